"""Bulk load benchmark (issue 10): rows/s of `Client.bulk_insert` (Parquet files -> the Spark
job writing binlogs -> one commit) against `Client.insert` of the same rows in the same run.

    python -m benchmarks.bulkload_bench [--rows 200000] [--files 4]

Rows are 128-d float32 vectors with an int64 key and a VarChar tag, written as `--files`
Parquet files (row groups of 50,000). Each case runs in a fresh embedded cluster (no vector
index: an index build would run beside the next case):
- insert: `Client.insert` in batches of 1,000 until acknowledged (rows durable on the log,
  not yet in binlogs), then `flush` until the segments are Flushed (the state a bulk insert
  ends in);
- bulk_insert cold: the first import of the process (the Spark JVM starts inside it);
- bulk_insert warm: the same files into a second collection, the session already up.
Every case checks a Strong count(*) afterwards. Writes benchmarks/results/bulkload.json and .md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import save
from benchmarks.ingest import BATCH, DIM, vectors
from vectorlog import Client, DataType

ROW_GROUP = 50_000


def write_files(folder: Path, x: np.ndarray, files: int) -> list[str]:
    """Writes the rows as `files` Parquet files; returns their paths."""
    out = []
    for i, idx in enumerate(np.array_split(np.arange(len(x)), files)):
        table = pa.table(
            {
                "id": idx.astype(np.int64),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(x[idx].ravel()), DIM),
                "tag": [f"t{k % 10}" for k in idx.tolist()],
            }
        )
        path = folder / f"part-{i}.parquet"
        pq.write_table(table, path, row_group_size=ROW_GROUP)
        out.append(str(path))
    return out


def create(client: Client, name: str) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("tag", DataType.VARCHAR, max_length=16)
    client.create_collection(name, schema=schema, metric_type="L2", num_shards=1)


def count(client: Client, name: str) -> int:
    return int(client.query(name, "", output_fields=["count(*)"])[0]["count(*)"])


def run_insert(uri: str, x: np.ndarray) -> dict[str, Any]:
    """Inserts the rows in batches, then flushes; returns the timings."""
    with Client(uri) as client:
        create(client, "ins")
        t = time.perf_counter()
        for lo in range(0, len(x), BATCH):
            ids = range(lo, min(len(x), lo + BATCH))
            client.insert("ins", [{"id": i, "vector": x[i], "tag": f"t{i % 10}"} for i in ids])
        acked = time.perf_counter() - t
        client.flush("ins", timeout=600)
        flushed = time.perf_counter() - t
        assert count(client, "ins") == len(x)
    return {"acked_s": round(acked, 3), "flushed_s": round(flushed, 3)}


def run_bulk(uri: str, files: list[str], rows: int) -> dict[str, Any]:
    """Imports the files twice (cold: the JVM starts inside; warm); returns the timings."""
    out: dict[str, Any] = {}
    with Client(uri) as client:
        for case in ("cold", "warm"):
            name = f"bulk_{case}"
            create(client, name)
            t = time.perf_counter()
            state = client.bulk_insert(name, files)
            took = time.perf_counter() - t
            assert state["row_count"] == rows and count(client, name) == rows
            out[case] = {"s": round(took, 3), "segments": len(state["segment_ids"])}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=4)
    args = ap.parse_args()
    x = vectors(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), x, args.files)
        ins = run_insert(str(Path(tmp) / "ins"), x)
        bulk = run_bulk(str(Path(tmp) / "bulk"), files, args.rows)
    rate = {
        "insert_acked": args.rows / ins["acked_s"],
        "insert_flushed": args.rows / ins["flushed_s"],
        "bulk_cold": args.rows / bulk["cold"]["s"],
        "bulk_warm": args.rows / bulk["warm"]["s"],
    }
    result = {
        "rows": args.rows,
        "dim": DIM,
        "files": args.files,
        "insert": ins,
        "bulk_insert": bulk,
        "rows_per_s": {k: round(v) for k, v in rate.items()},
        "machine": save.machine("cpus", "python"),
    }
    save.write("bulkload", result, markdown(result))
    print(markdown(result))


def markdown(r: dict[str, Any]) -> str:
    rate, ins, bulk = r["rows_per_s"], r["insert"], r["bulk_insert"]
    lines = [
        f"# Bulk load: {r['rows']:,} rows of {r['dim']}-d in {r['files']} Parquet files",
        "",
    ]
    rows = [
        ("`Client.insert` (acknowledged)", ins["acked_s"], f"{rate['insert_acked']:,}", ""),
        ("`Client.insert` + `flush` (Flushed)", ins["flushed_s"],
         f"{rate['insert_flushed']:,}", "1.00"),
    ]  # fmt: skip
    for case in ("cold", "warm"):
        ratio = rate[f"bulk_{case}"] / rate["insert_flushed"]
        jvm = "JVM start inside" if case == "cold" else "JVM up"
        rows.append(
            (f"`bulk_insert` ({case}: {jvm}, {bulk[case]['segments']} segments)",
             bulk[case]["s"], f"{rate[f'bulk_{case}']:,}", f"{ratio:.2f}")
        )  # fmt: skip
    table = save.table(("path", "seconds", "rows/s", "ratio to insert+flush"), rows)
    return "\n".join(lines + table) + "\n"


if __name__ == "__main__":
    main()
