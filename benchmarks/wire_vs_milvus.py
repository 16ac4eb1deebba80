"""Side by side through the same client: one pymilvus 2.3.8 program against the real Milvus
2.3.5 standalone and against `vectorlog serve`, in interleaved rounds (issue 28).

The program (WORKLOAD, run by the Milvus venv's python: infra/milvus_server.py) creates a
collection {id INT64 primary, tag INT64, vector FLOAT_VECTOR(50)} of GloVe-6B-50d rows, and
times: inserts of 1,000-row column batches; flush; an HNSW build (M 16, efConstruction 100,
COSINE) to "Finished"; load; one query per call (ef 128) with its recall@10 against exact
COSINE neighbours computed here; 1,000 queries in one call; one query per call filtered by
`tag == 3` (10 % of the rows); single-row inserts (p50/p99 of a call). Every server runs on
this machine, one at a time, each from an empty data directory. `--parts` times only some
phases after the insert (the HNSW build and load run when a search phase is asked for);
`--servers vectorlog` runs one server alone (its rounds go to wire_vs_milvus_<server>.json).
Each search phase notes the load at its start, the segments the server lists with the index
progress at its start and end, the machine's busy and stolen CPU, the cores the server, the
client and every other process took, and the busiest processes and server threads; the
Milvus round waits until no process of its server's session is left (`left_behind`).
The insert and the batch search are also split: pymilvus's own CPU building the request
(timed alone, nothing sent) and the server's answer to the same request prebuilt (a raw
gRPC call, the response left as bytes), so a serial client's bound shows in the same run.

    python -m benchmarks.wire_vs_milvus [--rows 100000] [--queries 1000] [--rounds 2]
        [--parts insert,batch,one,filtered,single] [--servers milvus,vectorlog]
        [--out benchmarks/results]

Writes wire_vs_milvus.json, .md and .png. Building Milvus's venv takes a few minutes once
(cached under ~/.cache/vectorlog-test).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, end_group, free_port, serve_command
from infra.milvus_server import MilvusServer, ensure_venv
from vectorlog.demo.datasets import glove

NAME = "wire_vs_milvus"
K = 10
#: the phases timed after the timed insert: its split (client / server), the batch search,
#: one query per call, the filtered one, single-row inserts
PARTS = ("insert", "batch", "one", "filtered", "single")
#: the servers a round runs, one after the other
SERVERS = ("milvus", "vectorlog")

WORKLOAD = r"""
import json, os, sys, time
import grpc
import numpy as np
from pymilvus import (Collection, CollectionSchema, DataType, FieldSchema, connections,
                      utility)
from pymilvus.client.prepare import Prepare
from pymilvus.orm.prepare import Prepare as Columns

host, port = sys.argv[1].split(":")
cfg = json.loads(sys.stdin.read())
parts = set(cfg["parts"])
connections.connect(host=host, port=port)
conn = connections._fetch_handler("default")
raw = grpc.insecure_channel(f"{host}:{port}", options=[("grpc.max_send_message_length", -1),
                                                      ("grpc.max_receive_message_length", -1)])
def raw_call(method, request_bytes):  # a prebuilt request, the response left as bytes
    return raw.unary_unary("/milvus.proto.milvus.MilvusService/" + method)(request_bytes)
x = np.load(cfg["vectors"]); q = np.load(cfg["queries"]); k = cfg["k"]
n, dim = x.shape
fields = [FieldSchema("id", DataType.INT64, is_primary=True),
          FieldSchema("tag", DataType.INT64),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim)]
for name in ("wire", "wire_raw"):
    if utility.has_collection(name):
        utility.drop_collection(name)
c = Collection("wire", CollectionSchema(fields), consistency_level="Bounded")
out = {}
ids = np.arange(n, dtype=np.int64)
def columns(lo):
    hi = min(n, lo + 1000)
    return [ids[lo:hi].tolist(), (ids[lo:hi] % 10).tolist(), x[lo:hi]]
t = time.perf_counter()
for lo in range(0, n, 1000):
    c.insert(columns(lo))
out["insert_rows_per_s"] = n / (time.perf_counter() - t)
if "insert" in parts:  # one batch's wall split: pymilvus building it, the server answering it
    r = Collection("wire_raw", CollectionSchema(fields), consistency_level="Bounded")
    t, built = time.perf_counter(), []
    for lo in range(0, n, 1000):
        req = conn._prepare_batch_insert_request("wire_raw", Columns.prepare_insert_data(
            columns(lo), r.schema), None, schema=r._schema_dict)
        built.append(req.SerializeToString())
    out["insert_client_ms"] = (time.perf_counter() - t) * 1e3 / len(built)
    t = time.perf_counter()
    for b in built:
        raw_call("Insert", b)
    out["insert_server_ms"] = (time.perf_counter() - t) * 1e3 / len(built)
    r.drop()
t = time.perf_counter(); c.flush(); out["flush_s"] = time.perf_counter() - t
if parts & {"batch", "one", "filtered"}:
    t = time.perf_counter()
    c.create_index("vector", {"index_type": "HNSW", "metric_type": "COSINE",
                              "params": {"M": 16, "efConstruction": 100}})
    utility.wait_for_index_building_complete("wire")
    out["index_build_s"] = time.perf_counter() - t
    t = time.perf_counter(); c.load(); out["load_s"] = time.perf_counter() - t
param = {"metric_type": "COSINE", "params": {"ef": 128}}
def ticks(root):  # {pid or tid: (name, CPU ticks)} of the processes (or threads) under root
    got = {}
    for p in os.listdir(root):
        try:
            with open(f"{root}/{p}/stat") as f:
                s = f.read()
        except (OSError, ValueError):
            continue
        if p.isdigit():
            f = s[s.rindex(")") + 2 :].split()
            got[int(p)] = (s[s.index("(") + 1 : s.rindex(")")], int(f[11]) + int(f[12]))
    return got
def busiest(before, after, dt, top=6):  # [(id, name, CPU share)] over the interval
    hz = os.sysconf("SC_CLK_TCK")
    d = [(i, nm, (t - before.get(i, (nm, 0))[1]) / hz / dt) for i, (nm, t) in after.items()]
    return [(i, nm, round(c, 2)) for i, nm, c in sorted(d, key=lambda r: -r[2])[:top] if c > 0]
def segments():  # the server's segments as pymilvus sees them, and the index progress
    try:
        segs = utility.get_query_segment_info("wire")
        prog = utility.index_building_progress("wire")
    except Exception as exc:
        return {"error": str(exc)}
    return {"segments": [(s.segmentID, s.num_rows, s.index_name, s.state) for s in segs],
            "index": dict(prog)}
def machine():  # the machine's CPU ticks: busy, idle (with I/O wait), stolen by the host
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v[:3]) + sum(v[5:7]), v[3] + v[4], v[7]
def phase(name, fn):  # runs fn, noting the load, segments and busiest processes/threads
    spid = cfg.get("server_pid")
    tasks = f"/proc/{spid}/task"
    note = {"load1": os.getloadavg()[0], "at_start": segments()}
    p0, t0, w0 = ticks("/proc"), ticks(tasks) if spid else {}, time.perf_counter()
    m0 = machine()
    result = fn()
    dt, m1 = time.perf_counter() - w0, machine()
    hz, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count()
    note["busy"], note["idle"], note["steal"] = [
        round((b - a) / hz / dt / cores, 3) for a, b in zip(m0, m1)]
    p1 = ticks("/proc")
    note["processes"] = busiest(p0, p1, dt)
    shares = busiest(p0, p1, dt, top=len(p1))  # cores: ours (server, client), the others'
    note["server_cpu"] = sum(c for i, _, c in shares if i == spid)
    note["client_cpu"] = sum(c for i, _, c in shares if i == os.getpid())
    note["others_cpu"] = round(sum(c for i, _, c in shares if i not in (spid, os.getpid())), 2)
    if spid:
        note["server_threads"] = busiest(t0, ticks(tasks), dt, top=10)
    note["at_end"] = segments()
    out.setdefault("phases", {})[name] = note
    out[f"{name}_others_cpu"] = note["others_cpu"]
    return result
if parts & {"batch", "one", "filtered"}:
    c.search(q[:10].tolist(), "vector", param, limit=k)  # warm up
def one_per_call(expr):
    got, t = [], time.perf_counter()
    for v in q:
        r = c.search([v.tolist()], "vector", param, limit=k, expr=expr)
        got.append([h.id for h in r[0]])
    return len(q) / (time.perf_counter() - t), got
if "one" in parts:
    out["one_per_call_qps"], out["hits"] = phase("one", lambda: one_per_call(None))
if "filtered" in parts:
    out["filtered_qps"], out["filtered_hits"] = phase("filtered",
                                                      lambda: one_per_call("tag == 3"))
if "batch" in parts:  # best of 3 calls; then the same call split as the insert's
    def best_of_3():
        best = 0.0
        for _ in range(3):
            t = time.perf_counter()
            c.search(q.tolist(), "vector", param, limit=k)
            best = max(best, len(q) / (time.perf_counter() - t))
        return best
    out["batch_qps"] = phase("batch", best_of_3)
    t = time.perf_counter()
    req = Prepare.search_requests_with_expr("wire", q.tolist(), "vector", param, k)
    built = req.SerializeToString()
    out["batch_client_ms"] = (time.perf_counter() - t) * 1e3
    server = []
    for _ in range(3):
        t = time.perf_counter()
        raw_call("Search", built)
        server.append((time.perf_counter() - t) * 1e3)
    out["batch_server_ms"] = min(server)
if "single" in parts:
    lat = []
    for i in range(cfg["single_rows"]):
        t = time.perf_counter()
        c.insert([[n + i], [0], x[i : i + 1]])
        lat.append(time.perf_counter() - t)
    lat.sort()
    out["single_insert_p50_ms"] = lat[len(lat) // 2] * 1e3
    out["single_insert_p99_ms"] = lat[int(0.99 * (len(lat) - 1))] * 1e3
print(json.dumps(out))
"""


def exact_neighbours(x: np.ndarray, q: np.ndarray, mask: np.ndarray | None) -> list[list[int]]:
    """Returns the ids of each query's K nearest rows by cosine (rows where `mask`)."""
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    scores = qn @ xn.T
    if mask is not None:
        scores[:, ~mask] = -np.inf
    return np.argsort(-scores, axis=1)[:, :K].tolist()


def recall(got: list[list[int]], truth: list[list[int]]) -> float:
    """Returns the mean share of each query's true top K found."""
    return float(np.mean([len(set(g) & set(t)) / K for g, t in zip(got, truth, strict=True)]))


def one_round(
    server: str, python: Path, data: dict[str, Any], tmp: Path, pyspy: str | None = None
) -> dict[str, Any]:
    """Runs the workload once against a fresh `server` ("milvus" or "vectorlog"), its
    process id given to the workload (which notes its threads' CPU in each search phase);
    `pyspy`: py-spy's path, to name vectorlog's threads."""
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        if server == "milvus":
            with MilvusServer(Path(d), python) as m:
                assert m.proc is not None
                pid, started = m.proc.pid, time.perf_counter()
                got = m.run(WORKLOAD, data | {"server_pid": pid}, timeout=7200)
                got |= {"wall_s": time.perf_counter() - started}
            return got | {"left_behind": end_group(pid)}  # its session: no process may stay
        ports = Ports(free_port(), free_port())
        health = f"http://127.0.0.1:{ports.rest}/healthz"
        with child(serve_command(d, ports), health, new_session=True) as proc:  # as Milvus
            started = time.perf_counter()
            proxy = PymilvusProgram(python, ports.grpc)
            got = proxy.run(WORKLOAD, data | {"server_pid": proc.pid})
            got |= {"wall_s": time.perf_counter() - started}
            if pyspy:
                _name_threads(got, proc.pid, pyspy)
            return got


def _name_threads(got: dict[str, Any], pid: int, pyspy: str) -> None:
    """Names the server threads of `got`'s phases by their Python thread names, read with
    py-spy (at `pyspy`) from the server still running."""
    import re
    import subprocess

    res = subprocess.run(
        [pyspy, "dump", "--nonblocking", "-p", str(pid)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    names = {
        int(t): n for t, n in re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', res.stdout, re.M)
    }
    for note in got.get("phases", {}).values():
        note["server_threads"] = [
            [tid, names.get(tid, name), share] for tid, name, share in note["server_threads"]
        ]


class PymilvusProgram:
    """Runs a pymilvus program with the Milvus venv's python against a server on this machine
    (`vectorlog serve`, or wire_floor's)."""

    def __init__(self, python: Path, port: int) -> None:
        self.python, self.port = python, port

    def run(self, script: str, payload: Any) -> Any:
        """Returns the JSON value `script` prints last, given `payload` (JSON) on stdin and
        the server as argv[1]. Raises RuntimeError if it fails."""
        import subprocess

        res = subprocess.run(
            [str(self.python), "-c", script, f"127.0.0.1:{self.port}"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=7200,
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"the pymilvus program failed on port {self.port}: {res.stderr[-3000:]}"
            )
        return json.loads(res.stdout.strip().splitlines()[-1])


METRICS = (
    ("insert, 1,000-row column batches (rows/s)", "insert_rows_per_s", True),
    ("  pymilvus building one batch's request (ms)", "insert_client_ms", False),
    ("  the server answering it, request prebuilt (ms)", "insert_server_ms", False),
    ("flush (s)", "flush_s", False),
    ("load average at the round's start", "load1", False),
    ("HNSW build to Finished (s)", "index_build_s", False),
    ("load (s)", "load_s", False),
    ("one query per call, ef 128 (QPS)", "one_per_call_qps", True),
    ("  its recall@10", "recall", True),
    ("  other processes' CPU meanwhile (cores)", "one_others_cpu", False),
    ("all held-out queries in one call (QPS, best of 3)", "batch_qps", True),
    ("  other processes' CPU meanwhile (cores)", "batch_others_cpu", False),
    ("  pymilvus building the call's request (ms)", "batch_client_ms", False),
    ("  the server answering it, request prebuilt (ms)", "batch_server_ms", False),
    ("one query per call, tag == 3 (QPS)", "filtered_qps", True),
    ("  its recall@10", "filtered_recall", True),
    ("  other processes' CPU meanwhile (cores)", "filtered_others_cpu", False),
    ("single-row insert p50 (ms)", "single_insert_p50_ms", False),
    ("single-row insert p99 (ms)", "single_insert_p99_ms", False),
)


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON, the markdown table (each round's figures) and the plot."""
    rounds = results["rounds"]
    lines = [
        "# Through the same client: pymilvus 2.3.8 against Milvus 2.3.5 and vectorlog",
        "",
        f"{results['rows']:,} GloVe-6B-50d rows, {results['queries']} held-out queries, COSINE,",
        "HNSW M 16 efConstruction 100, search ef 128, k 10; the servers ran one at a time, in",
        f"interleaved rounds. Machine: {results['machine']}.",
        f"Command: `python -m benchmarks.wire_vs_milvus{results.get('options', '')}`.",
        "",
    ]
    rows = []
    for label, key, higher_better in METRICS:
        if key not in rounds[0]["milvus"]:
            continue
        m = [r["milvus"][key] for r in rounds]
        v = [r["vectorlog"][key] for r in rounds]
        ratio = np.mean(v) / np.mean(m) if np.mean(m) else float("nan")
        note = "" if higher_better else " (lower is better)"
        compared = "" if key.endswith("_others_cpu") else f"{ratio:.2f}{note}"  # context only
        rows.append((label, _fmt(m), _fmt(v), compared))
    headers = ("measure", "Milvus 2.3.5", "vectorlog", "vectorlog / Milvus")
    lines += [*save.table(headers, rows, "llll"), "", *results.get("notes", []), ""]
    lines.append(f"![side by side]({NAME}.png)")
    save.write(NAME, results, lines, out=out)
    _plot(rounds, out)


def _fmt(values: list[float]) -> str:
    return " / ".join(f"{v:,.3g}" if v < 100 else f"{v:,.0f}" for v in values)


def _plot(rounds: list[dict[str, Any]], out: Path) -> None:
    keys = [
        (label, key)
        for label, key, better in METRICS
        if better and "recall" not in key and key in rounds[0]["milvus"]
    ]
    ratios = [
        np.mean([r["vectorlog"][k] for r in rounds]) / np.mean([r["milvus"][k] for r in rounds])
        for _, k in keys
    ]
    fig, ax = save.pyplot().subplots(figsize=(7, 3.2))
    ax.barh([label.split(" (")[0] for label, _ in keys], ratios)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("vectorlog / Milvus 2.3.5 (higher is better)")
    save.plot(fig, out / f"{NAME}.png")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--single-rows", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="comma-separated phases to time after the insert (default all): " + ", ".join(PARTS),
    )
    parser.add_argument(
        "--servers",
        default=",".join(SERVERS),
        help="comma-separated servers to run, in this order (default both): " + ", ".join(SERVERS),
    )
    parser.add_argument("--py-spy", help="py-spy's path: names vectorlog's busiest threads")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    if not set(parts) <= set(PARTS):
        parser.error(f"--parts takes {', '.join(PARTS)}")
    servers = [s for s in args.servers.split(",") if s]
    if not servers or not set(servers) <= set(SERVERS):
        parser.error(f"--servers takes {', '.join(SERVERS)}")
    python = ensure_venv()
    x, _ = glove(args.rows + args.queries)
    base, queries = x[: args.rows], x[args.rows :]
    tags = np.arange(args.rows) % 10 == 3
    truth, ftruth = exact_neighbours(base, queries, None), exact_neighbours(base, queries, tags)
    results: dict[str, Any] = {"rows": args.rows, "queries": args.queries, "rounds": []}
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "x.npy", base)
        np.save(Path(tmp) / "q.npy", queries)
        data = {"vectors": f"{tmp}/x.npy", "queries": f"{tmp}/q.npy", "k": K}
        data["single_rows"], data["parts"] = args.single_rows, parts
        for i in range(args.rounds):
            got = {
                s: {"load1": save.load1()} | one_round(s, python, data, Path(tmp), args.py_spy)
                for s in servers
            }
            for r in got.values():
                if "hits" in r:
                    r["recall"] = recall(r.pop("hits"), truth)
                if "filtered_hits" in r:
                    r["filtered_recall"] = recall(r.pop("filtered_hits"), ftruth)
            print(f"round {i + 1}: {json.dumps(got)}", flush=True)
            results["rounds"].append(got)
    results["machine"] = save.cores(f"load {save.load1():.1f}")
    results["options"] = "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("out", "py_spy")
    )
    if len(servers) == len(SERVERS):
        write(results, args.out)
    else:  # no side by side: the rounds' figures alone, not the results page
        save.write_json(f"{NAME}_{'_'.join(servers)}", results, out=args.out)


if __name__ == "__main__":
    main()
