"""Compaction benchmark (issue 10): rows/s of merging many small flushed segments, in process
and as Spark tasks, and what it does to a restart.

    python -m benchmarks.compaction_bench [--rows 200000] [--segments 50]

A fresh embedded cluster (1 shard) gets `--rows` rows of 128-d, flushed into `--segments`
segments, then 10% of its keys deleted (into delta logs). With `log_retention_ms=0` the
horizon is now: a compaction drops the deleted rows. Timed: `compact(wait=True)` (plan, merge,
commit, until datacoord lists the new segments Flushed) with the local engine and, on a second
identical cluster, the Spark engine (JVM already up: a warm-up compaction runs first on a tiny
cluster); and the time to the first Strong count(*) after a restart, before and after.
Writes benchmarks/results/compaction.json and .md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.ingest import DIM, vectors
from vectorlog import Client, DataType

SETTINGS: dict[str, Any] = {"compaction_interval_s": None, "log_retention_ms": 0}


def build(uri: str, rows: int, segments: int, engine: str) -> int:
    """Fills a cluster with `rows` rows in `segments` flushed segments, deletes every tenth key
    and waits until the deletes are in delta logs; returns the rows left."""
    x, per = vectors(rows), max(1, rows // segments)
    with Client(uri, compaction_engine=engine, **SETTINGS) as client:
        schema = client.create_schema()
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
        client.create_collection("bench", schema=schema, metric_type="L2", num_shards=1)
        for lo in range(0, rows, per):
            ids = range(lo, min(rows, lo + per))
            for b in range(ids.start, ids.stop, 1000):
                chunk = range(b, min(ids.stop, b + 1000))
                client.insert("bench", [{"id": i, "vector": x[i]} for i in chunk])
            client.flush("bench", timeout=600)
        client.delete("bench", ids=list(range(0, rows, 10)))
        while client.cluster.datanode.deltas:
            time.sleep(0.1)
        return rows - len(range(0, rows, 10))


def reopen(uri: str, rows: int) -> float:
    t = time.perf_counter()
    with Client(uri, **SETTINGS) as client:
        got = client.query("bench", "", output_fields=["count(*)"])
        took = time.perf_counter() - t
    assert got == [{"count(*)": rows}], got
    return took


def compacted(uri: str, engine: str, rows: int) -> dict[str, Any]:
    with Client(uri, compaction_engine=engine, **SETTINGS) as client:
        before = len(client.list_segments("bench"))
        t = time.perf_counter()
        job = client.get_compaction_plans(client.compact("bench", wait=True))
        took = time.perf_counter() - t
        after = len(client.list_segments("bench"))
        got = client.query("bench", "", output_fields=["count(*)"])
    assert job["state"] == "Completed" and got == [{"count(*)": rows}], (job, got)
    return {
        "segments_before": before,
        "segments_after": after,
        "dropped_rows": job["dropped_rows"],
        "compact_s": round(took, 3),
    }


def case(rows: int, segments: int, engine: str, tmp: str) -> dict[str, Any]:
    uri = str(Path(tmp) / engine)
    left = build(uri, rows, segments, engine)
    out: dict[str, Any] = {"restart_before_s": round(reopen(uri, left), 3)}
    out |= compacted(uri, engine, left)
    out["rows_per_s"] = round(rows / out["compact_s"])
    out["restart_after_s"] = round(reopen(uri, left), 3)
    return out


def warm_spark(tmp: str) -> None:
    """Starts the JVM with a tiny compaction, so the Spark case times the merge, not it."""
    build(str(Path(tmp) / "warm"), 2000, 2, "spark")
    compacted(str(Path(tmp) / "warm"), "spark", 1800)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--segments", type=int, default=50)
    args = ap.parse_args()
    result: dict[str, Any] = {"rows": args.rows, "segments": args.segments, "dim": DIM}
    with tempfile.TemporaryDirectory() as tmp:
        result["local"] = case(args.rows, args.segments, "local", tmp)
        from pyspark.sql import SparkSession  # the JVM stays up between the two runs

        from vectorlog.engines.spark.datanode_job import build_session

        session: SparkSession = build_session()
        try:
            warm_spark(tmp)
            result["spark"] = case(args.rows, args.segments, "spark", tmp)
        finally:
            session.stop()
    result["machine"] = save.machine("cpus", "python")
    save.write("compaction", result, markdown(result))
    print(markdown(result))


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# Compaction: {r['rows']:,} rows of {r['dim']}-d in {r['segments']} flushed segments, "
        "10% deleted (horizon: now)",
        "",
        *save.table(
            ("engine", "segments before -> after", "rows dropped", "compact s", "rows/s",
             "restart before s", "restart after s"),
            [(e, f"{c['segments_before']} -> {c['segments_after']}", f"{c['dropped_rows']:,}",
              c["compact_s"], f"{c['rows_per_s']:,}", c["restart_before_s"],
              c["restart_after_s"]) for e, c in [("local", r["local"]), ("spark", r["spark"])]],
            align="l" * 2,
        ),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
