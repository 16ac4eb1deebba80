"""The floor under issue 28's insert goal: how many rows/s a pymilvus 2.3.8 client inserting
1,000-row column batches, one call after the other, can reach against a server that does no work
at all, against one that only makes each request durable, and against `vectorlog serve` and
Milvus 2.3.5 in the same minutes.

The client program (run by the Milvus venv's python) inserts GloVe-6B-50d rows in 1,000-row
batches exactly as `Collection.insert` does (check_insert_schema, prepare_insert_data,
batch_insert with the collection's schema), the rows and columns of wire_vs_milvus. It notes
the loop's rows/s, its own CPU per call, and the answer to one prebuilt request (a raw call).
The servers, each fresh, one at a time, in interleaved rounds:

- `bare`: grpcio's thread-pool server in Python (as `vectorlog serve` uses) answering Insert
  with a prebuilt MutationResult of 1,000 ids; the request is not even parsed. No Python
  server can answer faster through grpcio.
- `synced`: the same, but each request's bytes are first appended to a file and
  fdatasync'ed: the least any server does that acknowledges only what is on disk.
- `vectorlog`: `vectorlog serve` (collection created by the program).
- `milvus`: Milvus 2.3.5 standalone (acknowledges once rocksmq wrote, without an fsync).

    python -m benchmarks.insert_floor [--rows 100000] [--rounds 2]
        [--servers bare,synced,vectorlog,milvus] [--out benchmarks/results]

Writes insert_floor.json, .md and .png.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from concurrent import futures
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, free_port, serve_command
from infra.milvus_server import MilvusServer, ensure_venv
from vectorlog.demo.datasets import glove

NAME = "insert_floor"
SERVERS = ("bare", "synced", "vectorlog", "milvus")
#: what a floor server writes to stderr once it listens
READY = "insert floor server ready"
METHOD = "/milvus.proto.milvus.MilvusService/"

WORKLOAD = r"""
import json, sys, time
import grpc
import numpy as np
from pymilvus import (Collection, CollectionSchema, DataType, FieldSchema, connections,
                      utility)
from pymilvus.orm.prepare import Prepare
from pymilvus.orm.schema import check_insert_schema

host, port = sys.argv[1].split(":")
cfg = json.loads(sys.stdin.read())
connections.connect(host=host, port=port)
conn = connections._fetch_handler("default")
x = np.load(cfg["vectors"])
n, dim = x.shape
fields = [FieldSchema("id", DataType.INT64, is_primary=True),
          FieldSchema("tag", DataType.INT64),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim)]
schema = CollectionSchema(fields)
if cfg["create"]:
    if utility.has_collection("floor"):
        utility.drop_collection("floor")
    Collection("floor", schema, consistency_level="Bounded")
schema_dict = schema.to_dict()
schema_dict["consistency_level"] = 2  # Bounded, as Collection keeps it
ids = np.arange(n, dtype=np.int64)
def columns(lo, base=0):
    hi = min(n, lo + 1000)
    return [(ids[lo:hi] + base).tolist(), (ids[lo:hi] % 10).tolist(), x[lo:hi]]
def insert(data):  # Collection.insert's column path, call for call
    check_insert_schema(schema, data)
    entities = Prepare.prepare_insert_data(data, schema)
    return conn.batch_insert("floor", entities, None, timeout=None, schema=schema_dict)
out = {}
cpu, t = time.process_time(), time.perf_counter()
for lo in range(0, n, 1000):
    insert(columns(lo))
wall = time.perf_counter() - t
out["rows_per_s"] = n / wall
out["client_cpu_ms"] = (time.process_time() - cpu) * 1e3 / -(-n // 1000)
out["call_ms"] = wall * 1e3 / -(-n // 1000)
req = conn._prepare_batch_insert_request("floor", Prepare.prepare_insert_data(
    columns(0, base=n), schema), None, schema=schema_dict).SerializeToString()
raw = grpc.insecure_channel(f"{host}:{port}", options=[("grpc.max_send_message_length", -1),
                                                      ("grpc.max_receive_message_length", -1)])
call = raw.unary_unary("/milvus.proto.milvus.MilvusService/Insert")
lat = []
for i in range(cfg["prebuilt"]):  # keys the server has not seen: an upsert costs more
    if cfg["create"]:
        req = conn._prepare_batch_insert_request("floor", Prepare.prepare_insert_data(
            columns(i * 1000 % n, base=n * (1 + i * 1000 // n)), schema), None,
            schema=schema_dict).SerializeToString()
    t = time.perf_counter(); call(req); lat.append(time.perf_counter() - t)
lat.sort()
out["answer_p50_ms"] = lat[len(lat) // 2] * 1e3
out["answer_mean_ms"] = sum(lat) / len(lat) * 1e3
print(json.dumps(out))
"""


def floor_server(mode: str, port: int, path: str) -> None:
    """Serves Connect and Insert with prebuilt answers on 127.0.0.1:`port` until killed;
    `mode` "synced" appends each Insert's bytes to `path` and fdatasyncs it first."""
    import grpc
    from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

    ok = common_pb2.Status(code=0, error_code=common_pb2.Success)
    ids = schema_pb2.IDs(int_id=schema_pb2.LongArray(data=list(range(1000))))
    insert = milvus_pb2.MutationResult(
        status=ok, IDs=ids, succ_index=list(range(1000)), insert_cnt=1000, timestamp=1
    ).SerializeToString()
    connect = milvus_pb2.ConnectResponse(status=ok, identifier=1).SerializeToString()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def on_insert(request: bytes, context: Any) -> bytes:
        if mode == "synced":
            os.write(fd, request)
            os.fdatasync(fd)
        return insert

    handlers = {
        "Insert": grpc.unary_unary_rpc_method_handler(on_insert),
        "Connect": grpc.unary_unary_rpc_method_handler(lambda request, context: connect),
    }
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=options)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("milvus.proto.milvus.MilvusService", handlers),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(READY, file=sys.stderr, flush=True)
    server.wait_for_termination()


def one_round(server: str, python: Path, data: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Runs the client program once against a fresh `server`; returns its figures and the
    1-minute load average at its start."""
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        load = save.load1()
        if server == "milvus":
            with MilvusServer(Path(d), python) as m:
                return m.run(WORKLOAD, data | {"create": True}, timeout=3600) | {"load1": load}
        port = free_port()
        if server == "vectorlog":
            ports = Ports(port, free_port())
            health = f"http://127.0.0.1:{ports.rest}/healthz"
            cmd, ready = serve_command(d, ports), None
        else:
            cmd = [sys.executable, "-P", "-m", "benchmarks.insert_floor", "--serve", server]
            cmd += ["--port", str(port), "--file", str(Path(d) / "appends")]
            health, ready = None, READY
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        with child(cmd, health, ready=ready, new_session=True, env=env):
            got = _run(python, port, data | {"create": server == "vectorlog"})
        return got | {"load1": load}


def _run(python: Path, port: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Runs WORKLOAD with `python` against 127.0.0.1:`port`; returns its figures."""
    import json
    import subprocess

    res = subprocess.run(
        [str(python), "-c", WORKLOAD, f"127.0.0.1:{port}"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if res.returncode != 0:
        raise RuntimeError(f"the insert program failed: {res.stderr[-3000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


ROWS = (
    ("1,000-row batches through pymilvus (rows/s)", "rows_per_s"),
    ("  one call, wall (ms)", "call_ms"),
    ("  pymilvus's CPU per call (ms)", "client_cpu_ms"),
    ("the answer to a prebuilt request, p50 (ms)", "answer_p50_ms"),
    ("  mean (ms)", "answer_mean_ms"),
    ("load average at the round's start", "load1"),
)


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON, the markdown page (per server, each round's figures) and the plot."""
    servers, rounds = results["servers"], results["rounds"]
    rows = []
    for label, key in ROWS:
        rows.append([label] + [" / ".join(_fmt(r[s][key]) for r in rounds) for s in servers])
    page = [
        f"# {NAME}: the floor under pymilvus's 1,000-row inserts",
        "",
        f"{results['rows']:,} GloVe-6B-50d rows; rounds interleaved, each server fresh.",
        f"Machine: {results['machine']}. Command: `python -m benchmarks.{NAME} "
        f"{results['options']}`.",
        "",
        *save.table(["measure", *servers], rows),
    ]
    if "milvus" in servers:
        page += ["", "Per round, each server's rows/s over Milvus's in the same round:", ""]
        ratios = [
            [s] + [f"{r[s]['rows_per_s'] / r['milvus']['rows_per_s']:.2f}" for r in rounds]
            for s in servers
            if s != "milvus"
        ]
        page += save.table(["server", *[f"round {i + 1}" for i in range(len(rounds))]], ratios)
    save.write(NAME, results, page, _plot, out)


def _fmt(value: float) -> str:
    """Returns `value` with thousands separators, or 3 significant digits below 1,000."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _plot(results: dict[str, Any], path: Path) -> None:
    """Draws bars of each server's rows/s per round to `path`."""
    plt = save.pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    servers, rounds = results["servers"], results["rounds"]
    width = 0.8 / len(rounds)
    for i, r in enumerate(rounds):
        xs = [j + i * width for j in range(len(servers))]
        ax.bar(xs, [r[s]["rows_per_s"] for s in servers], width, label=f"round {i + 1}")
    ax.set_xticks([j + width * (len(rounds) - 1) / 2 for j in range(len(servers))], servers)
    ax.set_ylabel("rows/s, 1,000-row batches")
    ax.set_title("pymilvus 2.3.8 inserts: floor servers, vectorlog, Milvus 2.3.5")
    ax.legend()
    save.plot(fig, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--prebuilt", type=int, default=50)
    p.add_argument("--servers", default=",".join(SERVERS))
    p.add_argument("--out", type=Path, default=save.RESULTS)
    p.add_argument("--serve", choices=("bare", "synced"), help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--file", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        floor_server(args.serve, args.port, args.file)
        return
    servers = [s for s in args.servers.split(",") if s]
    unknown = sorted(set(servers) - set(SERVERS))
    if unknown:
        p.error(f"unknown server(s) {', '.join(unknown)}: choose from {', '.join(SERVERS)}")
    python = ensure_venv()
    with tempfile.TemporaryDirectory(prefix="insert-floor-") as tmp:
        vectors = Path(tmp) / "x.npy"
        np.save(vectors, glove(args.rows)[0])
        data = {"vectors": str(vectors), "prebuilt": args.prebuilt}
        rounds = []
        for i in range(args.rounds):
            order = servers if i % 2 == 0 else servers[::-1]
            rounds.append({s: one_round(s, python, data, Path(tmp)) for s in order})
    options = f"--rows {args.rows} --rounds {args.rounds} --servers {','.join(servers)}"
    results = {
        "rows": args.rows,
        "servers": servers,
        "rounds": rounds,
        "options": options,
        "machine": save.cores(),
    }
    write(results, args.out)


if __name__ == "__main__":
    main()
