"""The gRPC Search handler in process, this tree against a base commit (issue 28): the handler
as the thread-pool server calls it (the metering interceptor, the servicer, the request's
decoding and the response's encoding) on a real pymilvus 2.3.8 one-query request (the one
benchmarks/search_wire_threads captured, from its results JSON), over a cluster of GloVe-6B-50d
rows with HNSW (M 16, efConstruction 100, COSINE); children alternate base, this, base,
this..., each reopening the same cluster and timing rounds of calls (CPU of the calling
thread). Prints each child's median and best round, their hits, and the ratio of medians.

    python -m benchmarks.search_handler_ab --base 0f3e8cc [--pairs 5] [--rows 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.trees import exported

#: the request: search_wire_threads' capture (collection "wire", one query, ef 128, k 10)
CAPTURE = save.RESULTS / "search_wire_threads.json"


def build(path: Path, rows: int) -> None:
    """Makes the cluster at `path`: collection "wire" {id, tag, vector(50)} as pymilvus 2.3.8
    made it, `rows` GloVe rows, HNSW built and loaded."""
    from vectorlog import Client
    from vectorlog.core.model import DataType
    from vectorlog.demo.datasets import glove

    x, _ = glove(rows)
    with Client(str(path)) as c:
        schema = c.create_schema()
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("tag", DataType.INT64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=x.shape[1])
        c.create_collection("wire", schema=schema, consistency_level="Bounded")
        for lo in range(0, rows, 1000):
            batch = range(lo, min(rows, lo + 1000))
            c.insert("wire", [{"id": i, "tag": i % 10, "vector": x[i]} for i in batch])
        c.flush("wire")
        index = c.prepare_index_params()
        params = {"M": 16, "efConstruction": 100}
        index.add_index("vector", index_type="HNSW", metric_type="COSINE", params=params)
        c.create_index("wire", index)
        while c.describe_index("wire", "vector")["state"] != "Finished":
            time.sleep(0.5)


CHILD = r"""
import json, sys, time
from types import SimpleNamespace
import grpc
from prometheus_client import CollectorRegistry
from pymilvus.grpc_gen import milvus_pb2
from vectorlog import Client
from vectorlog.server.grpc_metrics import GrpcMetrics
from vectorlog.server.grpc_service import MilvusServicer
from vectorlog.server.milvus_metrics import ProxyMetrics

cfg = json.loads(sys.argv[1])
raw = bytes.fromhex(cfg["request"])
class Context:
    def invocation_metadata(self): return ()
    def code(self): return None
    def time_remaining(self): return None
    def peer(self): return "ipv4:127.0.0.1:1"
ctx = Context()
with Client(cfg["dir"]) as c:
    c.load_collection("wire")
    servicer = MilvusServicer(c)
    registry = CollectorRegistry()
    meter = GrpcMetrics(SimpleNamespace(registry=registry, milvus=ProxyMetrics(registry)))
    handler = grpc.unary_unary_rpc_method_handler(
        servicer.Search, milvus_pb2.SearchRequest.FromString,
        milvus_pb2.SearchResults.SerializeToString)
    details = SimpleNamespace(method="/milvus.proto.milvus.MilvusService/Search")
    def call():
        h = meter.intercept_service(lambda d: handler, details)
        return h.response_serializer(h.unary_unary(h.request_deserializer(raw), ctx))
    first = milvus_pb2.SearchResults.FromString(call())
    rounds = []
    for _ in range(cfg["rounds"]):
        t = time.thread_time()
        for _ in range(cfg["calls"]):
            call()
        rounds.append((time.thread_time() - t) / cfg["calls"] * 1e6)
print(json.dumps({"rounds": rounds, "ids": list(first.results.ids.int_id.data),
                  "scores": [round(s, 6) for s in first.results.scores]}))
"""


def child(tree: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs one child on `tree`'s code; returns its rounds (µs per call) and first answer."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(cfg)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the base commit (git archive)")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=300)
    args = p.parse_args(argv)
    request = json.loads(CAPTURE.read_text())["requests_hex"]["Search"]
    this = Path(__file__).resolve().parent.parent
    medians: dict[str, list[float]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="handler-ab-") as tmp:
        build(Path(tmp) / "c", args.rows)
        trees = {"base": exported(args.base, Path(tmp) / "base"), "this": this}
        cfg = {"dir": f"{tmp}/c", "request": request, "rounds": args.rounds, "calls": args.calls}
        for _ in range(args.pairs):
            for name, tree in trees.items():
                load = save.load1()
                got = child(tree, cfg)
                rounds = sorted(got["rounds"])
                medians[name].append(statistics.median(rounds))
                print(
                    f"{name}: median {medians[name][-1]:.1f} best {rounds[0]:.1f} µs per call "
                    f"(load {load:.1f}); hits {got['ids'][:3]}... scores {got['scores'][:2]}...",
                    flush=True,
                )
    ratio = statistics.median(medians["this"]) / statistics.median(medians["base"])
    print(f"this / base, medians of the children's medians: {ratio:.2f}")


if __name__ == "__main__":
    main()
