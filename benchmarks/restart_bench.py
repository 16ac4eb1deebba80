"""Restart benchmark (issue 10): seconds from opening a cluster to its first answered Strong
read, against the rows it holds and the length of its dml log, with the query node loading
segments from binlogs (`querynode_recovery="binlogs"`, the default) and replaying the whole
log from offset 0 (`"log"`, what every start did before).

    python -m benchmarks.restart_bench [--sizes 10000,100000,1000000] [--single 20000]

Each case is a fresh embedded cluster: `--sizes` rows of 128-d in inserts of 1,000, or
`--single` rows in single-row inserts (a long log of small records); flushed, then closed.
The collection has no vector index: index builds (minutes of HNSW for 1M rows on 2 cores)
would run beside every reopen and measure them, not the restart; segments are served by
exact search.
It is then reopened RUNS times per mode; the median time from `Client(...)` to the answer
of a Strong `count(*)` (checked against the rows inserted) is reported, and the first
reopen's: the live node that flushed the segments wrote the query node's segment cache
(`querynode_mmap`), so every reopen maps it (a segment without an entry is decoded from
its binlogs and its entry written after). Writes
benchmarks/results/restart.json, restart.md and restart.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.ingest import BATCH, DIM, vectors
from vectorlog import Client, DataType

RUNS = 3
MODES = ("binlogs", "log")


def build(uri: str, rows: int, batch: int) -> int:
    """Fills a cluster with `rows` rows in inserts of `batch`, flushes it; returns the
    number of dml records (inserts and ticks excluded) it wrote."""
    x = vectors(rows)
    with Client(uri) as client:
        schema = client.create_schema()
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
        client.create_collection("bench", schema=schema, metric_type="L2", num_shards=1)
        for lo in range(0, rows, batch):
            n = min(batch, rows - lo)
            client.insert("bench", [{"id": lo + i, "vector": x[lo + i]} for i in range(n)])
        client.flush("bench", timeout=600)
        return int(sum(client.cluster.log.end_offsets(client.cluster.topics.dml).values()))


def reopen(uri: str, mode: str, rows: int) -> tuple[float, int]:
    """Returns (seconds to the first Strong count, rows loaded from binlogs)."""
    t = time.perf_counter()
    client = Client(uri, querynode_recovery=mode)
    try:
        got = client.query("bench", "", output_fields=["count(*)"])
        took = time.perf_counter() - t
        assert got == [{"count(*)": rows}], got
        return took, client.cluster.querynode.loaded_rows
    finally:
        client.close()


def case(rows: int, batch: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "db")
        records = build(uri, rows, batch)
        out: dict[str, Any] = {"rows": rows, "insert_batch": batch, "dml_records": records}
        for mode in MODES:
            runs = [reopen(uri, mode, rows) for _ in range(RUNS)]
            seconds = [s for s, _ in runs]
            out[mode] = {
                "median_s": round(statistics.median(seconds), 3),
                "runs_s": [round(s, 3) for s in seconds],
                "rows_loaded": runs[-1][1],
            }
        print(json.dumps(out), flush=True)
        return out


def report(result: dict[str, Any]) -> str:
    lines = [
        "# Restart: seconds to the first Strong read (`python -m benchmarks.restart_bench`)",
        "",
        f"Embedded log, {result['cpus']} cores; median of {RUNS} reopens per mode.",
        "",
        *save.table(
            ("rows", "rows per insert", "dml records", "from binlogs s", "first reopen s",
             "rows loaded", "whole log s"),
            [(f"{c['rows']:,}", f"{c['insert_batch']:,}", f"{c['dml_records']:,}",
              c["binlogs"]["median_s"], c["binlogs"]["runs_s"][0],
              f"{c['binlogs']['rows_loaded']:,}", c["log"]["median_s"])
             for c in result["cases"]],
            "r",
        ),
    ]  # fmt: skip
    goals = result["goals"]
    lines += [
        "",
        f"Goal: 1M flushed rows reopen in <= 1.5 s: {goals['one_million_s']} s "
        f"({'met' if goals['one_million_met'] else 'missed'}); within 3 x a 10k-row "
        f"database: {goals['ratio_to_10k']} x ({'met' if goals['ratio_met'] else 'missed'}).",
    ]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    fig, ax = save.pyplot().subplots(figsize=(7, 4.5))
    for batch, marker in ((BATCH, "o"), (1, "s")):
        cases = sorted(
            (c for c in result["cases"] if c["insert_batch"] == batch),
            key=lambda c: c["dml_records"],
        )
        if not cases:
            continue
        x = [c["dml_records"] for c in cases]
        for mode, style in (("binlogs", "-"), ("log", "--")):
            label = f"{'from binlogs' if mode == 'binlogs' else 'whole log'}, {batch}-row inserts"
            ax.plot(x, [c[mode]["median_s"] for c in cases], style, marker=marker, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("dml records in the log")
    ax.set_ylabel("seconds to the first Strong read")
    ax.set_title("vectorlog restart time vs log length (embedded, 128-d)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    save.plot(fig, path, dpi=110)


def goals(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's goals from the batched cases: 1M rows <= 1.5 s, <= 3 x 10k rows."""
    by_rows = {c["rows"]: c["binlogs"]["median_s"] for c in cases if c["insert_batch"] == BATCH}
    big, small = by_rows.get(1_000_000), by_rows.get(10_000)
    ratio = round(big / small, 2) if big and small else None
    return {
        "one_million_s": big,
        "one_million_met": big is not None and big <= 1.5,
        "ratio_to_10k": ratio,
        "ratio_met": ratio is not None and ratio <= 3,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", default="10000,100000,1000000")
    p.add_argument("--single", default="20000")
    args = p.parse_args()
    cases = [case(int(n), BATCH) for n in args.sizes.split(",") if n]
    cases += [case(int(n), 1) for n in args.single.split(",") if n]
    result: dict[str, Any] = save.machine("machine", "cpus")
    result |= {"cases": cases, "goals": goals(cases)}
    save.write("restart", result, report(result), plot)
    print(report(result))


if __name__ == "__main__":
    main()
