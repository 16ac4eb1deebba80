"""Binlog write throughput: vectorlog's Milvus binlogs of a flushed segment's columns, next to a
bare `pyarrow.parquet.write_table` of the same columns with the same compression (ZSTD) in the
same run. Writes benchmarks/results/binlog.json.

    python -m benchmarks.binlog_bench [--rows 50000] [--dim 128] [--repeat 5]

Columns: a float32 vector column (GloVe-6B-50d rows tiled to `dim`, real data; random normals
if the demo extra is not installed), an int64 primary key and the int64 timestamps. vectorlog
writes one binlog per column (magic, descriptor, one Insert event, a Parquet payload); the
anchor writes one Parquet file holding the three columns. Both write to memory; MB/s counts
the columns' raw bytes. The goal (issue 6) is a ratio of at least 0.5.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import save
from vectorlog.storage.binlog import DataTypeCode, insert_binlog

TS0 = 470630107633418249


def vectors(rows: int, dim: int) -> tuple[np.ndarray, str]:
    """Returns (rows x dim float32 vectors, where they come from)."""
    try:
        from vectorlog.demo.datasets import glove

        base, _ = glove(min(rows, 400_000))
        source = "GloVe-6B-50d tiled"
    except ImportError:
        base = np.random.default_rng(0).standard_normal((rows, 50), dtype=np.float32)
        source = "random normal (GloVe not installed)"
    tiled = np.tile(base, (1, -(-dim // base.shape[1])))[:, :dim]
    reps = -(-rows // len(tiled))
    return np.ascontiguousarray(np.tile(tiled, (reps, 1))[:rows]), source


def columns(rows: int, dim: int) -> tuple[dict[str, Any], str]:
    x, source = vectors(rows, dim)
    pks = np.arange(rows, dtype=np.int64)
    tss = TS0 + np.arange(rows, dtype=np.int64) // 1000 * 6  # batches of 1,000 rows
    return {"vector": x, "pk": pks, "ts": tss}, source


def write_binlogs(cols: dict[str, Any]) -> int:
    """Writes the three binlogs; returns their total size in bytes."""
    specs = [
        (107, DataTypeCode.FLOAT_VECTOR, cols["vector"]),
        (100, DataTypeCode.INT64, cols["pk"]),
        (1, DataTypeCode.INT64, cols["ts"]),
    ]
    lo, hi = int(cols["ts"].min()), int(cols["ts"].max())
    total = 0
    for field, kind, values in specs:
        total += len(
            insert_binlog(
                collection_id=1,
                partition_id=2,
                segment_id=3,
                field_id=field,
                data_type=kind,
                values=values,
                start_ts=lo,
                end_ts=hi,
                write_ts=hi,
                dim=cols["vector"].shape[1] if kind == DataTypeCode.FLOAT_VECTOR else None,
            )
        )
    return total


def write_bare(cols: dict[str, Any]) -> int:
    """Writes one Parquet file of the same columns (ZSTD); returns its size in bytes."""
    x = cols["vector"]
    vector = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(4 * x.shape[1]), len(x), [None, pa.py_buffer(x)]
    )
    table = pa.table({"vector": vector, "pk": cols["pk"], "ts": cols["ts"]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return len(sink.getvalue())


def timed(fn: Any, cols: dict[str, Any]) -> tuple[float, int]:
    start = time.perf_counter()
    size = fn(cols)
    return time.perf_counter() - start, size


def run(rows: int, dim: int, repeat: int) -> dict[str, Any]:
    cols, source = columns(rows, dim)
    raw = sum(int(c.nbytes) for c in cols.values())
    write_binlogs(cols), write_bare(cols)  # warm up (imports, allocator)
    ours, bare = [], []
    for _ in range(repeat):  # interleaved, so drift hits both alike
        ours.append(timed(write_binlogs, cols))
        bare.append(timed(write_bare, cols))
    ours_s = float(np.median([t for t, _ in ours]))
    bare_s = float(np.median([t for t, _ in bare]))
    return {
        "benchmark": "binlog",
        "rows": rows,
        "dim": dim,
        "vectors": source,
        "raw_mb": raw / 1e6,
        "repeat": repeat,
        "binlog_seconds": ours_s,
        "binlog_mb_per_s": raw / ours_s / 1e6,
        "binlog_bytes": ours[0][1],
        "bare_parquet_seconds": bare_s,
        "bare_parquet_mb_per_s": raw / bare_s / 1e6,
        "bare_parquet_bytes": bare[0][1],
        "ratio_binlog_to_bare": bare_s / ours_s,
        "ratio_min_max": [
            min(b[0] for b in bare) / max(o[0] for o in ours),
            max(b[0] for b in bare) / min(o[0] for o in ours),
        ],
        "goal": {"ratio": 0.5},
        "machine": save.machine("cpus", "python"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs each; medians reported")
    args = ap.parse_args(argv)
    res = run(args.rows, args.dim, args.repeat)
    save.write_json("binlog", res)
    print(
        f"binlogs {res['binlog_mb_per_s']:7.1f} MB/s | bare write_table "
        f"{res['bare_parquet_mb_per_s']:7.1f} MB/s | ratio {res['ratio_binlog_to_bare']:.2f} "
        f"(median of {args.repeat}; {args.rows:,} x {args.dim}-d + pk + ts, {res['vectors']})"
    )


if __name__ == "__main__":
    main()
