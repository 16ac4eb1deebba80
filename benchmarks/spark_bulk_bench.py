"""Bulk insert on a Spark cluster benchmark (issue 25): rows/s of `Client.bulk_insert` on a
standalone cluster of 2 one-core workers (infra/spark_cluster.py) against `local[2]`.

    python -m benchmarks.spark_bulk_bench [--rows 400000] [--files 8]

Rows are 128-d float32 vectors with an int64 key and a VarChar tag, in `--files` Parquet files
(row groups of 50,000: a Spark task each), in a folder the workers see. Each case runs in a
process of its own (one SparkContext per process) on a fresh cluster of the Kafka-API test
broker (infra/broker.py): a first import of one small file starts the JVM and the executors
(untimed), then the timed import of every file, then a Strong count(*) check. Writes
benchmarks/results/spark_bulk.json, .md and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.bulkload_bench import count, create, write_files
from benchmarks.ingest import vectors
from benchmarks.spark_datanode_bench import child_env

CASES = (("local[2]", None), ("cluster of 2 workers", "cluster"))


def child(uri: str, folder: Path, rows: int) -> dict[str, Any]:
    """In a process of its own: a warm-up import, then the timed one; returns its timing."""
    from vectorlog import Client

    files = sorted(str(p) for p in folder.glob("part-*.parquet"))
    with Client(uri) as client:
        create(client, "warm")
        client.bulk_insert("warm", [str(folder / "warm" / "part-0.parquet")])
        create(client, "bulk")
        t = time.perf_counter()
        state = client.bulk_insert("bulk", files)
        took = time.perf_counter() - t
        assert state["row_count"] == rows and count(client, "bulk") == rows, state
        bulk = client.cluster.bulk
        return {
            "s": round(took, 2),
            "rows_per_s": round(rows / took),
            "segments": len(state["segment_ids"]),
            "workers": len(bulk.workers) if bulk is not None else 0,
        }


def run_case(bootstrap: str, cluster: Any, folder: Path, rows: int, state: Path) -> dict[str, Any]:
    env = child_env(cluster, state)
    cmd = [sys.executable, "-m", "benchmarks.spark_bulk_bench", "--child", str(folder)]
    cmd += ["--rows", str(rows), "--uri", f"kafka://{bootstrap}"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(done.stderr[-3000:])
    return dict(json.loads(lines[-1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--child")
    ap.add_argument("--uri")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.uri, Path(args.child), args.rows)), flush=True)
        return
    from infra.broker import running_broker
    from infra.spark_cluster import SparkCluster

    cases = []
    with running_broker() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "files"
        folder.mkdir()
        write_files(folder, vectors(args.rows), args.files)
        (folder / "warm").mkdir()
        write_files(folder / "warm", vectors(1000), 1)
        for label, where in CASES:
            cluster = SparkCluster(pythonpath=os.getcwd()).start() if where else None
            try:
                got = run_case(bootstrap, cluster, folder, args.rows, Path(tmp))
            finally:
                if cluster is not None:
                    cluster.stop()
            cases.append({"master": label, **got})
            print(label, got, flush=True)
    result = {
        "rows": args.rows,
        "files": args.files,
        "machine": save.cores(f"load average {save.load1():.1f} at the end"),
        "cases": cases,
    }
    save.write("spark_bulk", result, markdown(result), plot)
    print(markdown(result))


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# Bulk insert on Spark: {r['rows']:,} rows of 128-d in {r['files']} Parquet files",
        "",
        "Timed: `Client.bulk_insert` until Completed (the JVM and executors up: a one-file",
        "import ran first), on the Kafka log. Row groups of 50,000 rows, a Spark task each.",
        f"Machine: {r['machine']}.",
        f"Command: `python -m benchmarks.spark_bulk_bench --rows {r['rows']}`.",
        "",
        *save.table(
            ("Spark master", "seconds", "rows/s", "segments", "workers that ran tasks"),
            [(c["master"], c["s"], f"{c['rows_per_s']:,}", c["segments"], c["workers"])
             for c in r["cases"]],
        ),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: Path) -> None:
    fig, ax = save.pyplot().subplots(figsize=(6, 2.5))
    ax.barh([c["master"] for c in r["cases"]], [c["rows_per_s"] for c in r["cases"]])
    ax.set_xlabel(f"bulk insert rows/s ({r['rows']:,} rows of 128-d)")
    ax.invert_yaxis()
    save.plot(fig, path, dpi=110)


if __name__ == "__main__":
    main()
