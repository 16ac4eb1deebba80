"""Ingest benchmark: `Client.insert` of 128-d float32 vectors in batches of 1,000, next to a raw
append of the same bytes to the same log backend. Writes benchmarks/results/ingest-<backend>.json.

    python -m benchmarks.ingest [--backend embedded|kafka|both] [--rows 200000] [--repeat 3]

Vectors are GloVe-6B-50d rows tiled to 128 dims (real data, not random normals); the raw
anchor appends, per batch, records of the same sizes the insert path wrote (one per
vchannel) to a fresh topic with the same partition count, through the same `Log.append`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from contextlib import ExitStack
from typing import Any

import numpy as np

from benchmarks import save
from vectorlog import Client
from vectorlog.demo.datasets import glove
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.log.base import Append
from vectorlog.streams.scan import read_to_end

DIM, BATCH = 128, 1000


def vectors(n: int) -> np.ndarray:
    base, _ = glove(min(n, 400_000))
    tiled = np.tile(base, (1, 3))[:, :DIM]
    reps = -(-n // len(tiled))
    return np.ascontiguousarray(np.tile(tiled, (reps, 1))[:n])


def bench_insert(client: Client, x: np.ndarray, shards: int) -> tuple[float, list[int]]:
    client.create_collection("bench", dimension=DIM, metric_type="L2", num_shards=shards)
    rows = [{"id": i, "vector": x[i]} for i in range(len(x))]
    start = time.perf_counter()
    for lo in range(0, len(rows), BATCH):
        client.insert("bench", rows[lo : lo + BATCH])
    elapsed = time.perf_counter() - start
    return elapsed, record_sizes(client)


def record_sizes(client: Client) -> list[int]:
    """Returns the sizes of the RowsInserted records the insert path wrote (for the anchor)."""
    serde, topic = EventSerde(), client.cluster.topics.dml
    return [
        len(r.value)
        for r in read_to_end(client.cluster.log, topic)
        if serde.decode(r.value).type == "RowsInserted"
    ]


def bench_raw(client: Client, sizes: list[int], batches: int) -> float:
    log, topic = client.cluster.log, f"{client.cfg.cluster}.raw-{uuid.uuid4().hex[:6]}"
    parts = client.cluster.topics.dml_partitions
    log.create_topic(topic, parts)
    per_batch = max(1, len(sizes) // batches)
    payloads = [bytes(s) for s in sizes[:per_batch]]
    start = time.perf_counter()
    for b in range(batches):
        log.append(topic, [Append((b + i) % parts, p) for i, p in enumerate(payloads)])
    return time.perf_counter() - start


def once(client: Client, x: np.ndarray, shards: int) -> dict[str, float]:
    """One measurement on a fresh cluster: the insert path, then the raw anchor."""
    elapsed, sizes = bench_insert(client, x, shards)
    client.get_collection_stats("bench")  # the query node caught up: the anchor runs alone
    raw = bench_raw(client, sizes, len(x) // BATCH)
    nbytes = x.nbytes + len(x) * 8
    return {
        "insert_rows_per_s": len(x) / elapsed,
        "insert_mb_per_s": nbytes / elapsed / 1e6,
        "raw_append_rows_per_s": len(x) / raw,
        "raw_append_mb_per_s": sum(sizes) / raw / 1e6,
        "ratio_insert_to_raw": raw / elapsed,
        "records": len(sizes),
        "record_bytes_mean": float(np.mean(sizes)) if sizes else 0.0,
    }


def run(backend: str, rows: int, shards: int, repeat: int, stack: ExitStack) -> dict[str, Any]:
    x = vectors(rows)
    boot = ""
    if backend == "kafka":
        from infra.broker import running_broker

        boot = stack.enter_context(running_broker())
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            if backend == "kafka":
                cluster = f"bench{uuid.uuid4().hex[:6]}"
                client = Client(f"kafka://{boot}", cluster=cluster, data_dir=tmp)
            else:
                client = Client(tmp)
            with client:
                runs.append(once(client, x, shards))
    summary = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
    spread = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in runs[0]}
    return {
        "backend": backend,
        "rows": rows,
        "dim": DIM,
        "batch": BATCH,
        "shards": shards,
        "repeat": repeat,
        **summary,
        "min_max": spread,
        "runs": runs,
        "goal": {"rows_per_s": 100_000, "ratio": 0.7},
        "machine": save.machine("cpus", "python"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="both", choices=["embedded", "kafka", "both"])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="fresh clusters; medians reported")
    args = ap.parse_args(argv)
    for backend in ["embedded", "kafka"] if args.backend == "both" else [args.backend]:
        with ExitStack() as stack:
            res = run(backend, args.rows, args.shards, args.repeat, stack)
        save.write_json(f"ingest-{backend}", res)
        print(
            f"{backend:9s} insert {res['insert_rows_per_s']:>9,.0f} rows/s "
            f"{res['insert_mb_per_s']:6.1f} MB/s | raw append "
            f"{res['raw_append_rows_per_s']:>9,.0f} rows/s {res['raw_append_mb_per_s']:6.1f} MB/s"
            f" | ratio {res['ratio_insert_to_raw']:.2f} (median of {args.repeat}; range "
            f"{res['min_max']['ratio_insert_to_raw'][0]:.2f}-"
            f"{res['min_max']['ratio_insert_to_raw'][1]:.2f})"
        )


if __name__ == "__main__":
    main()
