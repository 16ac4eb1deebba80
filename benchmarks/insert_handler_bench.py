"""The gRPC Insert handler in process (issue 28): MilvusServicer.Insert called directly on
pymilvus-shaped 1,000-row InsertRequests ({id INT64 primary, tag INT64, vector
FLOAT_VECTOR(50)}, ~203 KB, keys never sent before), the calling thread's CPU per call (the
request parsed, the handler, the response serialised: what a gRPC server thread does) and
each phase's: the request's parsing, its columns (grpc_data._rows), their validation
(validation.rows_to_columns), the key check (Proxy._primary_keys), the event's encoding
(EventSerde.encode), RocksDB's write and its WAL sync (the embedded log's Rdict.write and
flush_wal), the response (grpc_data._mutation); "other" is the rest.

Each variant (NAME=TREE: a folder, or a commit of this repository) runs in children that
alternate (a, b, a, b, ...), each on a fresh embedded cluster: warm-up calls, then `--calls`
timed calls with `--gap-ms` of sleep between them (the log's threads settle, as between a
client's calls), then as many calls again with every phase timed (a wrapper per phase:
about a microsecond each). Prints, per variant, the median over its children of each
child's median; writes insert_handler.json and .md.

    python -m benchmarks.insert_handler_bench --variant main=/work/main --variant new=. \\
        [--pairs 3] [--calls 150] [--gap-ms 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import save
from benchmarks.trees import exported, run_in_tree

NAME = "insert_handler"
PHASES = ("parse", "rows", "validate", "keys", "encode", "write", "sync", "response", "other")

CHILD = r"""
import gc, json, sys, tempfile, time
import numpy as np
from pymilvus.grpc_gen import milvus_pb2, schema_pb2
from vectorlog import Client
from vectorlog.core.model import DataType
from vectorlog.processors.proxy import validation
from vectorlog.processors.proxy.proxy import Proxy
from vectorlog.schemas.serde import EventSerde
from vectorlog.server import grpc_data
from vectorlog.server.grpc_service import MilvusServicer
from vectorlog.streams.log.embedded import EmbeddedLog

cfg = json.loads(sys.argv[1])
x = np.random.default_rng(7).random((1000, 50), dtype=np.float32).ravel().tolist()

def request(b):
    ids = list(range(b * 1000, b * 1000 + 1000))
    r = milvus_pb2.InsertRequest(collection_name="ins", num_rows=1000)
    f = r.fields_data.add(type=schema_pb2.Int64, field_name="id")
    f.scalars.long_data.data.extend(ids)
    f = r.fields_data.add(type=schema_pb2.Int64, field_name="tag")
    f.scalars.long_data.data.extend([i % 10 for i in ids])
    f = r.fields_data.add(type=schema_pb2.FloatVector, field_name="vector")
    f.vectors.dim = 50
    f.vectors.float_vector.data.extend(x)
    return r.SerializeToString()

class Context:
    def invocation_metadata(self): return ()
    def time_remaining(self): return None
    def peer(self): return "ipv4:127.0.0.1:1"
    def code(self): return None

spent = {}
def timed(owner, attr, phase):
    fn = getattr(owner, attr)
    def wrapper(*a, **k):
        t = time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.thread_time() - t
    setattr(owner, attr, wrapper)

class TimedDb:
    def __init__(self, db): self.__dict__["db"] = db
    def __getattr__(self, name): return getattr(self.db, name)
for phase, method in (("write", "write"), ("sync", "flush_wal")):
    def make(method=method, phase=phase):
        def call(self, *a, **k):
            t = time.thread_time()
            try:
                return getattr(self.db, method)(*a, **k)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.thread_time() - t
        return call
    setattr(TimedDb, method, make())

calls, warm = cfg["calls"], cfg["warm"]
raw = [request(b) for b in range(warm + 2 * calls)]
gap = cfg["gap_ms"] / 1e3
ctx = Context()
with tempfile.TemporaryDirectory(dir=cfg.get("scratch")) as d, Client(d) as c:
    schema = c.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("tag", DataType.INT64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=50)
    c.create_collection("ins", schema=schema, consistency_level="Bounded")
    servicer = MilvusServicer(c)
    def call(b):
        t = time.thread_time()
        r = milvus_pb2.InsertRequest.FromString(b)
        spent["parse"] = time.thread_time() - t
        return servicer.Insert(r, ctx).SerializeToString()
    reqs = raw
    first = milvus_pb2.MutationResult.FromString(call(reqs[0]))
    assert first.insert_cnt == 1000 and list(first.IDs.int_id.data[:2]) == [0, 1], first
    for r in reqs[1:warm]:
        call(r)
        time.sleep(gap)
    cpu, wall = [], []
    for r in reqs[warm:warm + calls]:
        t, tc = time.perf_counter(), time.thread_time()
        call(r)
        cpu.append(time.thread_time() - tc); wall.append(time.perf_counter() - t)
        time.sleep(gap)
    timed(grpc_data, "_rows", "rows")
    timed(validation, "rows_to_columns", "validate")
    timed(Proxy, "_primary_keys", "keys")
    timed(EventSerde, "encode", "encode")
    timed(grpc_data, "_mutation", "response")
    for log in [o for o in gc.get_objects() if isinstance(o, EmbeddedLog)]:
        log._db = TimedDb(log._db)
    phases = {p: [] for p in ("parse", "rows", "validate", "keys", "encode", "write", "sync",
                              "response", "other", "total")}
    for r in reqs[warm + calls:]:
        spent.clear()
        tc = time.thread_time()
        call(r)
        total = time.thread_time() - tc
        for p in phases:
            phases[p].append(spent.get(p, 0.0))
        phases["total"][-1] = total
        phases["other"][-1] = total - sum(spent.values())
        time.sleep(gap)
med = lambda v: sorted(v)[len(v) // 2] * 1e3
print(json.dumps({"cpu_ms": med(cpu), "wall_ms": med(wall),
                  "mean_cpu_ms": sum(cpu) / len(cpu) * 1e3,
                  "phases_ms": {p: med(v) for p, v in phases.items()}}))
"""


def run_child(tree: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs one child on `tree`'s code; returns its medians (ms per call)."""
    import json

    return run_in_tree(tree, CHILD, json.dumps(cfg))


def source(spec: str, scratch: Path) -> tuple[str, Path]:
    """Returns (name, code folder) of "NAME=TREE": TREE a folder, or a commit exported."""
    name, _, tree = spec.partition("=")
    path = Path(tree)
    return (name, path.resolve()) if path.is_dir() else (name, exported(tree, scratch / name))


def page(got: dict[str, list[dict[str, Any]]], header: str) -> list[str]:
    """Returns the result's markdown: per variant the median over children of the handler's
    CPU, wall and each phase's CPU per call (ms)."""
    headers = ["variant", "children", "CPU p50", "wall p50", *PHASES]
    rows = []
    for name, children in got.items():

        def mid(key: str, children: list[dict[str, Any]] = children) -> str:
            return f"{statistics.median(c[key] for c in children):.3f}"

        def phase(p: str, children: list[dict[str, Any]] = children) -> str:
            return f"{statistics.median(c['phases_ms'][p] for c in children):.3f}"

        rows.append([name, len(children), mid("cpu_ms"), mid("wall_ms"), *map(phase, PHASES)])
    return [header, "", *save.table(headers, rows)]


def main(argv: list[str] | None = None) -> None:
    """Parses the arguments, runs the children alternating, prints and writes the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", action="append", required=True, help="NAME=TREE")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--calls", type=int, default=150)
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--gap-ms", type=float, default=3.0)
    p.add_argument("--out", type=Path, default=save.RESULTS)
    a = p.parse_args(argv)
    cfg = {"calls": a.calls, "warm": a.warm, "gap_ms": a.gap_ms}
    load = save.loadavg()
    got: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="insert-handler-") as scratch:
        variants = [source(s, Path(scratch)) for s in a.variant]
        for _ in range(a.pairs):
            for name, tree in variants:
                res = run_child(tree, cfg | {"scratch": scratch})
                got.setdefault(name, []).append(res)
                print(f"{name}: CPU p50 {res['cpu_ms']:.3f} ms, phases {res['phases_ms']}")
    header = (
        f"Insert handler in process, {a.calls} calls a child, {a.gap_ms} ms gaps, "
        f"{a.pairs} children a variant alternating; load at the start {load}, at the end "
        f"{save.loadavg()}; ms of the calling thread's CPU per call (medians)"
    )
    lines = page(got, header)
    print("\n".join(lines))
    data = {"config": cfg, "machine": save.machine("cpus", "cpu"), "runs": got}
    save.write_json(NAME, data, a.out)
    save.write_markdown(NAME, lines, a.out)


if __name__ == "__main__":
    main()
