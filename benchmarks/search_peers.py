"""Milvus Lite (pymilvus + milvus-lite 3.x, a pure-Python Milvus server in this process) on the
search benchmark's data, in a child process with a time cap.

    python -m benchmarks.search_peers --rows N --queries Q --lite-queries L --ef EF --dir DIR

Same rows, schema, HNSW parameters and COSINE as vectorlog; ingest rows/s, seconds from the
last insert to every segment indexed, and one-query-per-call QPS and recall@10 of the first L
held-out queries (Milvus Lite answers ~6 queries/s at 400k rows: the count is capped). Prints
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from benchmarks.search_data import BUCKETS, HNSW_PARAMS, METRIC, Data, K, load, recall
from benchmarks.search_timing import child_json, peak_mb, per_call

NAME = "bench"


def lite_client(path: str, dim: int) -> Any:
    """Returns a MilvusClient on a fresh Milvus Lite database at `path` with the collection."""
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(path)
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("bucket", DataType.INT64)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="HNSW", metric_type=METRIC, params=HNSW_PARAMS)
    client.create_collection(NAME, schema=schema, index_params=index)
    return client


def wait_indexed(client: Any, path: str) -> str:
    """Flushes and waits until every segment has its index; returns how it waited. Milvus
    Lite's describe_index always says Finished (it builds in a background worker), so this
    drains that worker through its server's collection (a private API), else falls back to
    release + load (which builds missing indexes synchronously)."""
    client.flush(NAME)
    try:
        from milvus_lite.server_manager import server_manager_instance

        db = server_manager_instance._servers[os.path.abspath(path)][1]
        col = db.get_collection(NAME)
        col._wait_for_bg()
        col._ensure_loaded_segments_indexed()
        return "background worker drained (milvus_lite private API)"
    except (ImportError, KeyError, AttributeError):
        client.release_collection(NAME)
        client.load_collection(NAME)
        return "release_collection + load_collection"


def measure(data: Data, lite_queries: int, ef: int, path: str) -> dict[str, Any]:
    """Returns Milvus Lite's figures on `data`."""
    client = lite_client(path, data.dim)
    rows = [
        {"id": i, "vector": data.base[i].tolist(), "bucket": i % BUCKETS} for i in range(data.rows)
    ]
    start = time.perf_counter()
    for lo in range(0, len(rows), 1000):
        client.insert(NAME, rows[lo : lo + 1000])
    last = time.perf_counter()
    how = wait_indexed(client, path)
    indexed_s = time.perf_counter() - last
    params = {"params": {"ef": ef}}

    def one(q: Any) -> list[int]:
        hits = client.search(NAME, [q.tolist()], limit=K, search_params=params)
        return [int(h["id"]) for h in hits[0]]

    qs = data.queries[:lite_queries]
    qps, found = per_call(one, qs, warmup=5)
    client.close()
    return {
        "rows": data.rows,
        "insert_rows_per_s": data.rows / (last - start),
        "index_built_s": indexed_s,
        "index_wait": how,
        "ef": ef,
        "queries_one_per_call": len(qs),
        "single_qps": qps,
        "single_recall": recall(found, data.gt[: len(qs)]),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--queries", type=int, required=True)
    ap.add_argument("--lite-queries", type=int, default=200)
    ap.add_argument("--ef", type=int, required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args(argv)
    data = load(args.rows, args.queries)
    out = measure(data, args.lite_queries, args.ef, os.path.join(args.dir, "lite.db"))
    peak = peak_mb()
    print(json.dumps({**out, "peak_rss_mb_with_data": peak}))


def milvus_lite(
    rows: int, queries: int, lite_queries: int, ef: int, directory: str, timeout: float
) -> dict[str, Any]:
    """Runs Milvus Lite in a child process killed after `timeout` s; returns its figures, or
    {"error"} if it failed or is not installed."""
    cmd = [sys.executable, "-m", "benchmarks.search_peers", "--rows", str(rows)]
    cmd += ["--queries", str(queries), "--lite-queries", str(lite_queries)]
    cmd += ["--ef", str(ef), "--dir", directory]
    return child_json(cmd, timeout)


if __name__ == "__main__":
    main()
