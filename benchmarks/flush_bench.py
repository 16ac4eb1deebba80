"""Flush benchmark (issue 6): flush latency, and what the data node costs ingest.

    python -m benchmarks.flush_bench [--engine local] [--flushes 20] [--rows 50000]

- latency: `Client.flush` (call -> every segment Flushed, binlogs written) after each of
  `--flushes` rounds of `--rows` 128-d float32 rows inserted in batches of 1,000; p50/p99;
  a warm-up flush comes first (the Spark engine's start is not counted).
- ingest: `Client.insert` rows/s of 200,000 rows with the data node running vs off, on fresh
  embedded clusters, median of 3 each, and their ratio.
Writes benchmarks/results/flush-<engine>.json. Vectors: GloVe-6B-50d tiled to 128 dims.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.ingest import BATCH, DIM, vectors
from vectorlog import Client


def insert(client: Client, x: np.ndarray, start: int) -> float:
    """Inserts x with ids from `start`; returns seconds."""
    rows = [{"id": start + i, "vector": x[i]} for i in range(len(x))]
    t = time.perf_counter()
    for lo in range(0, len(rows), BATCH):
        client.insert("bench", rows[lo : lo + BATCH])
    return time.perf_counter() - t


def latency(engine: str, flushes: int, rows: int) -> dict[str, Any]:
    x = vectors(rows)
    seconds = []
    with tempfile.TemporaryDirectory() as tmp, Client(tmp, datanode=engine) as client:
        client.create_collection("warmup", dimension=DIM, metric_type="L2")
        client.insert("warmup", [{"id": 0, "vector": x[0]}])
        client.flush("warmup", timeout=300)  # Spark's start (10-16 s here) is not a flush
        client.create_collection("bench", dimension=DIM, metric_type="L2")
        for i in range(flushes):
            insert(client, x, i * rows)
            t = time.perf_counter()
            ids = client.flush("bench", timeout=120)
            seconds.append(time.perf_counter() - t)
            assert client.get_flush_state(ids)
        total = sum(s["num_rows"] for s in client.list_segments("bench"))
    assert total == flushes * rows, total
    return {
        "flushes": flushes,
        "rows_per_flush": rows,
        "p50_s": float(np.percentile(seconds, 50)),
        "p99_s": float(np.percentile(seconds, 99)),
        "max_s": max(seconds),
        "seconds": seconds,
    }


def ingest(datanode: str, rows: int, repeat: int) -> list[float]:
    x = vectors(rows)
    rates = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp, Client(tmp, datanode=datanode) as client:
            client.create_collection("bench", dimension=DIM, metric_type="L2")
            rates.append(rows / insert(client, x, 0))
    return rates


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--engine", default="local", choices=["local", "spark"])
    ap.add_argument("--flushes", type=int, default=20)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--ingest-rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    lat = latency(args.engine, args.flushes, args.rows)
    with_node = ingest(args.engine, args.ingest_rows, args.repeat)
    without = ingest("off", args.ingest_rows, args.repeat)
    res = {
        "engine": args.engine,
        "latency": lat,
        "ingest": {
            "rows": args.ingest_rows,
            "with_datanode_rows_per_s": float(np.median(with_node)),
            "without_datanode_rows_per_s": float(np.median(without)),
            "ratio": float(np.median(with_node) / np.median(without)),
            "runs_with": with_node,
            "runs_without": without,
        },
        "goal": {"local_p99_s": 1.0, "spark_p99_s": 5.0, "ingest_ratio_min": 0.8},
        "machine": save.machine("cpus", "python"),
    }
    save.write_json(f"flush-{args.engine}", res)
    ing = res["ingest"]
    print(
        f"{args.engine}: flush of {args.rows:,} rows p50 {lat['p50_s']:.3f}s p99 "
        f"{lat['p99_s']:.3f}s (n={args.flushes}) | ingest with data node "
        f"{ing['with_datanode_rows_per_s']:,.0f} rows/s, without "
        f"{ing['without_datanode_rows_per_s']:,.0f} rows/s, ratio {ing['ratio']:.2f}"
    )


if __name__ == "__main__":
    main()
