"""The floor under issue 28's goals through pymilvus: how fast a pymilvus 2.3.8 client calling
one call after the other can go against a server that does no work at all, against one that
does only the work no server can skip, and against `vectorlog serve` and Milvus 2.3.5 in the
same minutes.

The client program (run by the Milvus venv's python) makes wire_vs_milvus's calls, through the
same pymilvus functions `Collection.insert` and `Collection.search` call: inserts of
GloVe-6B-50d rows in 1,000-row column batches (rows/s, pymilvus's CPU per call, the answer to a
prebuilt request); then one query per call (ef 128, k 10) over the held-out queries, and all of
them in one call (best of 3). The servers, each fresh, one at a time, in interleaved rounds:

- `bare`: grpcio's thread-pool server in Python (as `vectorlog serve` uses) answering with
  prebuilt responses (1,000 ids; 10 hits a query), reading no more than a search's nq. No
  Python server answers faster through grpcio.
- `floor`: the least real work: an Insert's bytes appended to a file and fdatasync'ed before
  the answer (what acknowledging only what is on disk costs), a Search parsed, its vectors
  normalised and searched in one faiss HNSW index (M 16, efConstruction 100, the rows built at
  start) with its ef, the hits put in the response from numpy.
- `log`: the `floor` server, but each insert appended through the embedded log
  (streams.log.EmbeddedLog: RocksDB, its WAL synced), as DESIGN.md has `vectorlog serve` do:
  the least any server of this design does for an insert.
- `vectorlog`: `vectorlog serve`, its collection created, flushed, indexed and loaded by the
  program between the inserts and the searches (as wire_vs_milvus).
- `milvus`: Milvus 2.3.5 standalone, likewise (it acknowledges an insert once rocksmq wrote,
  without an fsync).

    python -m benchmarks.wire_floor [--rows 100000] [--queries 1000] [--rounds 2]
        [--servers bare,floor,log,vectorlog,milvus] [--out benchmarks/results]

Writes wire_floor.json, .md and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent import futures
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, free_port, serve_command
from benchmarks.wire_vs_milvus import PymilvusProgram
from infra.milvus_server import MilvusServer, ensure_venv
from vectorlog.demo.datasets import glove

NAME = "wire_floor"
SERVERS = ("bare", "floor", "log", "vectorlog", "milvus")
#: what a floor server writes to stderr once it listens
READY = "wire floor server ready"
SERVICE = "milvus.proto.milvus.MilvusService"
METHOD = f"/{SERVICE}/"
K = 10

WORKLOAD = r"""
import json, sys, time
import grpc
import numpy as np
from pymilvus import (Collection, CollectionSchema, DataType, FieldSchema, connections,
                      utility)
from pymilvus.client.prepare import Prepare as Requests
from pymilvus.orm.prepare import Prepare
from pymilvus.orm.schema import check_insert_schema

host, port = sys.argv[1].split(":")
cfg = json.loads(sys.stdin.read())
real = cfg["real"]
connections.connect(host=host, port=port)
conn = connections._fetch_handler("default")
x, q = np.load(cfg["vectors"]), np.load(cfg["queries"])
n, dim = x.shape
fields = [FieldSchema("id", DataType.INT64, is_primary=True),
          FieldSchema("tag", DataType.INT64),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim)]
schema = CollectionSchema(fields)
if real:
    if utility.has_collection("floor"):
        utility.drop_collection("floor")
    c = Collection("floor", schema, consistency_level="Bounded")
schema_dict = schema.to_dict()
schema_dict["consistency_level"] = 2  # Bounded, as Collection keeps it
raw = grpc.insecure_channel(f"{host}:{port}", options=[("grpc.max_send_message_length", -1),
                                                      ("grpc.max_receive_message_length", -1)])
ids = np.arange(n, dtype=np.int64)
def columns(lo, base=0):
    hi = min(n, lo + 1000)
    return [(ids[lo:hi] + base).tolist(), (ids[lo:hi] % 10).tolist(), x[lo:hi]]
def insert(data):  # Collection.insert's column path, call for call
    check_insert_schema(schema, data)
    entities = Prepare.prepare_insert_data(data, schema)
    return conn.batch_insert("floor", entities, None, timeout=None, schema=schema_dict)
def answer_ms(method, built):  # prebuilt request bytes: the server's answer alone
    call = raw.unary_unary("/milvus.proto.milvus.MilvusService/" + method)
    lat = []
    for b in built:
        t = time.perf_counter(); call(b); lat.append((time.perf_counter() - t) * 1e3)
    return sorted(lat)[len(lat) // 2]
out = {}
batches = -(-n // 1000)
cpu, t = time.process_time(), time.perf_counter()
for lo in range(0, n, 1000):
    insert(columns(lo))
wall = time.perf_counter() - t
out["insert_rows_per_s"] = n / wall
out["insert_client_cpu_ms"] = (time.process_time() - cpu) * 1e3 / batches
built = [conn._prepare_batch_insert_request("floor", Prepare.prepare_insert_data(
    columns(i * 1000 % n, base=n * (1 + i * 1000 // n)), schema), None,
    schema=schema_dict).SerializeToString() for i in range(cfg["prebuilt"])]
out["insert_answer_ms"] = answer_ms("Insert", built)  # keys not seen: an upsert costs more
param = {"metric_type": "COSINE", "params": {"ef": 128}}
if real:
    c.flush()
    c.create_index("vector", {"index_type": "HNSW", "metric_type": "COSINE",
                              "params": {"M": 16, "efConstruction": 100}})
    utility.wait_for_index_building_complete("floor")
    c.load()
def search(data):  # Collection.search's call
    return conn.search("floor", data, "vector", param, cfg["k"], None, None, None, -1,
                       timeout=None, schema=schema_dict)
search(q[:10].tolist())  # warm up
cpu, t = time.process_time(), time.perf_counter()
for v in q:
    search([v.tolist()])
wall = time.perf_counter() - t
out["one_qps"] = len(q) / wall
out["one_client_cpu_us"] = (time.process_time() - cpu) * 1e6 / len(q)
out["one_answer_ms"] = answer_ms("Search", [
    Requests.search_requests_with_expr("floor", [v.tolist()], "vector", param, cfg["k"])
    .SerializeToString() for v in q[:200]])
best = 0.0
for _ in range(3):
    t = time.perf_counter(); search(q.tolist())
    best = max(best, len(q) / (time.perf_counter() - t))
out["batch_qps"] = best
out["batch_answer_ms"] = answer_ms("Search", [Requests.search_requests_with_expr(
    "floor", q.tolist(), "vector", param, cfg["k"]).SerializeToString()] * 3)
print(json.dumps(out))
"""


class FloorServer:
    """The `bare`, `floor` or `log` server's answers (see the module docstring)."""

    def __init__(self, mode: str, appends: str, vectors: str, nq: int) -> None:
        from pymilvus.grpc_gen import common_pb2, milvus_pb2

        self.mode, self.pb = mode, milvus_pb2
        self.ok = common_pb2.Status(code=0, error_code=common_pb2.Success)
        self.inserted = self._mutation()
        self.connected = milvus_pb2.ConnectResponse(status=self.ok, identifier=1)
        self.found = {
            n: self._results(np.zeros((n, K), np.int64), np.zeros((n, K))) for n in {1, nq}
        }
        self.fd = os.open(appends, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.log = _embedded_log(appends + ".log") if mode == "log" else None
        self.index = _hnsw(np.load(vectors)) if mode != "bare" else None

    def _mutation(self) -> bytes:
        from pymilvus.grpc_gen import schema_pb2

        ids = schema_pb2.IDs(int_id=schema_pb2.LongArray(data=range(1000)))
        return self.pb.MutationResult(
            status=self.ok, IDs=ids, succ_index=range(1000), insert_cnt=1000, timestamp=1
        ).SerializeToString()

    def _results(self, ids: np.ndarray, scores: np.ndarray) -> bytes:
        from pymilvus.grpc_gen import schema_pb2

        nq, k = ids.shape
        data = schema_pb2.SearchResultData(num_queries=nq, top_k=k, topks=[k] * nq)
        data.ids.int_id.data.extend(ids.ravel().tolist())
        data.scores.extend(scores.ravel().astype(np.float32).tolist())
        return self.pb.SearchResults(status=self.ok, results=data).SerializeToString()

    def insert(self, request: bytes, context: Any) -> bytes:
        """Returns the prebuilt answer; `floor` first appends `request` to its file and
        fdatasyncs it, `log` appends it to its embedded log."""
        if self.log is not None:
            from vectorlog.streams.log.base import Append

            self.log.append("appends", [Append(0, request)])
        elif self.mode == "floor":
            os.write(self.fd, request)
            os.fdatasync(self.fd)
        return self.inserted

    def search(self, request: bytes, context: Any) -> bytes:
        """Returns prebuilt hits (`bare`, sized by the request) or the faiss HNSW search of
        the request's vectors with its topk and ef (`floor`)."""
        req = self.pb.SearchRequest.FromString(request)
        if self.index is None:
            return self.found[1 if req.nq <= 1 else max(self.found)]
        import faiss
        from pymilvus.grpc_gen import common_pb2

        params = {p.key: p.value for p in req.search_params}
        group = common_pb2.PlaceholderGroup.FromString(req.placeholder_group)
        queries = np.frombuffer(b"".join(group.placeholders[0].values), np.float32)
        queries = queries.reshape(len(group.placeholders[0].values), -1).copy()
        faiss.normalize_L2(queries)
        ef = json.loads(params.get("params", "{}")).get("ef", 64)
        knobs = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
        knobs.efSearch = int(ef)
        scores, ids = self.index.search(queries, int(params["topk"]), params=knobs)
        return self._results(ids, scores)


def _embedded_log(path: str) -> Any:
    """Returns an embedded log (fsync'd RocksDB) at `path` with a one-partition topic
    "appends"."""
    from vectorlog.streams.log.embedded import EmbeddedLog

    log = EmbeddedLog(path)
    log.create_topic("appends", 1)
    return log


def _hnsw(vectors: np.ndarray) -> Any:
    """Returns a faiss HNSW (M 16, efConstruction 100) inner-product index of `vectors`
    normalised: COSINE, as the servers build it."""
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    faiss.normalize_L2(x)
    index = faiss.IndexHNSWFlat(x.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 100
    index.add(x)
    return index


def floor_server(mode: str, port: int, appends: str, vectors: str, nq: int) -> None:
    """Serves Connect, Insert and Search (see FloorServer) on 127.0.0.1:`port` until killed."""
    import grpc

    answers = FloorServer(mode, appends, vectors, nq)
    handlers = {
        "Insert": grpc.unary_unary_rpc_method_handler(answers.insert),
        "Search": grpc.unary_unary_rpc_method_handler(answers.search),
        "Connect": grpc.unary_unary_rpc_method_handler(
            lambda request, context: answers.connected.SerializeToString()
        ),
    }
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=options)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(READY, file=sys.stderr, flush=True)
    server.wait_for_termination()


def floor_command(mode: str, port: int, scratch: Path, vectors: str, nq: int) -> list[str]:
    """Returns the command line of the `mode` floor server (its file of appends in `scratch`)."""
    cmd = [sys.executable, "-m", "benchmarks.wire_floor", "--serve", mode]
    cmd += ["--port", str(port), "--appends", str(scratch / "appends")]
    return cmd + ["--vectors", vectors, "--nq", str(nq)]


def one_round(server: str, python: Path, data: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Runs the client program once against a fresh `server`; returns its figures and the
    1-minute load average at its start."""
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        payload = data | {"real": server in ("vectorlog", "milvus")}
        if server == "milvus":
            with MilvusServer(Path(d), python) as m:
                load = save.load1()
                return m.run(WORKLOAD, payload, timeout=3600) | {"load1": load}
        port = free_port()
        health: str | None = None
        if server == "vectorlog":
            ports = Ports(port, free_port())
            health, ready = f"http://127.0.0.1:{ports.rest}/healthz", None
            cmd = serve_command(d, ports)
        else:
            cmd = floor_command(server, port, Path(d), data["vectors"], data["nq"])
            ready = READY
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        with child(cmd, health, ready=ready, new_session=True, env=env):
            load = save.load1()
            return PymilvusProgram(python, port).run(WORKLOAD, payload) | {"load1": load}


#: the page's rows: label, key, whether a ratio to Milvus is shown (higher is better)
ROWS = (
    ("insert, 1,000-row batches (rows/s)", "insert_rows_per_s", True),
    ("  pymilvus's CPU per call (ms)", "insert_client_cpu_ms", False),
    ("  the answer to a prebuilt request, p50 (ms)", "insert_answer_ms", False),
    ("one query per call (QPS)", "one_qps", True),
    ("  pymilvus's CPU per call (µs)", "one_client_cpu_us", False),
    ("  the answer to a prebuilt request, p50 (ms)", "one_answer_ms", False),
    ("all queries in one call (QPS, best of 3)", "batch_qps", True),
    ("  the answer to the prebuilt call, p50 of 3 (ms)", "batch_answer_ms", False),
    ("load average at the round's start", "load1", False),
)


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON, the markdown page (each round's figures per server, then each
    server's rate over Milvus's per round) and the plot."""
    servers, rounds = results["servers"], results["rounds"]
    rows = [
        [label] + [" / ".join(_fmt(r[s][key]) for r in rounds) for s in servers]
        for label, key, _ in ROWS
    ]
    page = [
        f"# {NAME}: what pymilvus reaches against servers doing no work, the least work, "
        "vectorlog and Milvus",
        "",
        f"{results['rows']:,} GloVe-6B-50d rows, {results['queries']:,} held-out queries; "
        "rounds interleaved, each server fresh. Figures per round, separated by /.",
        f"Machine: {results['machine']}. Command: `python -m benchmarks.{NAME}"
        f"{results['options']}`.",
        "",
        *save.table(["measure", *servers], rows),
    ]
    if "milvus" in servers:
        page += ["", "Over Milvus's in the same round:", ""]
        ratios = [
            [label]
            + [
                " / ".join(f"{r[s][key] / r['milvus'][key]:.2f}" for r in rounds)
                for s in servers
                if s != "milvus"
            ]
            for label, key, shown in ROWS
            if shown
        ]
        page += save.table(["measure", *[s for s in servers if s != "milvus"]], ratios)
    save.write(NAME, results, page, _plot, out)


def _fmt(value: float) -> str:
    """Returns `value` with thousands separators, or 3 significant digits below 1,000."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _plot(results: dict[str, Any], path: Path) -> None:
    """Draws, per measure, each server's rate in each round as bars, to `path`."""
    plt = save.pyplot()
    shown = [(label, key) for label, key, ratio in ROWS if ratio]
    fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.5))
    servers, rounds = results["servers"], results["rounds"]
    width = 0.8 / len(rounds)
    for ax, (label, key) in zip(axes, shown, strict=True):
        for i, r in enumerate(rounds):
            xs = [j + i * width for j in range(len(servers))]
            ax.bar(xs, [r[s][key] for s in servers], width, label=f"round {i + 1}")
        ax.set_xticks([j + width * (len(rounds) - 1) / 2 for j in range(len(servers))], servers)
        ax.set_title(label, fontsize=9)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    save.plot(fig, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=1_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--prebuilt", type=int, default=50)
    p.add_argument("--servers", default=",".join(SERVERS))
    p.add_argument("--out", type=Path, default=save.RESULTS)
    p.add_argument("--serve", choices=("bare", "floor", "log"), help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--appends", help=argparse.SUPPRESS)
    p.add_argument("--vectors", help=argparse.SUPPRESS)
    p.add_argument("--nq", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        floor_server(args.serve, args.port, args.appends, args.vectors, args.nq)
        return
    servers = [s for s in args.servers.split(",") if s]
    unknown = sorted(set(servers) - set(SERVERS))
    if unknown:
        p.error(f"unknown server(s) {', '.join(unknown)}: choose from {', '.join(SERVERS)}")
    python = ensure_venv()
    x, _ = glove(args.rows + args.queries)
    with tempfile.TemporaryDirectory(prefix="wire-floor-") as tmp:
        vectors, queries = Path(tmp) / "x.npy", Path(tmp) / "q.npy"
        np.save(vectors, x[: args.rows])
        np.save(queries, x[args.rows :])
        data = {"vectors": str(vectors), "queries": str(queries), "k": K}
        data |= {"prebuilt": args.prebuilt, "nq": args.queries}
        rounds = []
        for i in range(args.rounds):
            order = servers if i % 2 == 0 else servers[::-1]
            rounds.append({s: one_round(s, python, data, Path(tmp)) for s in order})
            print(f"round {i + 1}: {json.dumps(rounds[-1])}", flush=True)
    options = f" --rows {args.rows} --queries {args.queries} --rounds {args.rounds}"
    results = {
        "rows": args.rows,
        "queries": args.queries,
        "servers": servers,
        "rounds": rounds,
        "options": options + f" --servers {','.join(servers)}",
        "machine": save.cores(),
    }
    write(results, args.out)


if __name__ == "__main__":
    main()
