"""1,000 queries in one Search call through pymilvus 2.3.8, two or more `vectorlog serve`
source trees side by side (issue 28): every variant's server runs at once, each loaded by the
pymilvus program of benchmarks/wire_vs_milvus's batch phase (GloVe-6B-50d rows in 1,000-row
batches, flush, HNSW M 16 efConstruction 100 COSINE, load); then one client sends the same
prebuilt SearchRequest (the held-out queries, ef 128, limit 10; pymilvus builds it once) to
the servers in turn, the order reversed each round, so each pair of calls sees the same load.
Per call: the wall ms of the answer (a raw gRPC call, the response left as bytes) and the
server's CPU ms (its threads' schedstat); once per variant the full pymilvus call (request
built, hits parsed) and the sha256 of the answer's bytes (servers on the same graph, e.g.
VECTORLOG_INDEX_BUILD_THREADS=1: the same bytes if they answer the same).

    python -m benchmarks.search_batch_ab --variant main=/work/main --variant new=. \\
        [--rows 100000] [--queries 1000] [--calls 40] [--out benchmarks/results]

A variant is NAME=TREE[:KIND[:VAR=VALUE,...]] as in benchmarks/wire_calls_ab (a folder, or a
commit of this repository exported). Writes search_batch_ab.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, free_port
from benchmarks.wire_calls_ab import (
    ARGV_CONNECT,
    COLLECTION,
    DATA,
    INDEXED,
    INSERTED,
    PYMILVUS,
    Variant,
)
from infra.milvus_server import ensure_venv
from vectorlog.demo.datasets import glove

NAME = "search_batch_ab"

LOADER = (
    PYMILVUS
    + ARGV_CONNECT
    + DATA
    + COLLECTION
    + INSERTED
    + INDEXED
    + r"""c.search(q[:10].tolist(), "vector", param, limit=10)
print(json.dumps({"segments": len(utility.get_query_segment_info("wire"))}))
"""
)

TIMER = r"""
import hashlib, json, os, sys, time
import grpc
import numpy as np
from pymilvus import Collection, connections
from pymilvus.client.prepare import Prepare

cfg = json.loads(sys.stdin.read())
q = np.load(cfg["queries"])
param = {"metric_type": "COSINE", "params": {"ef": 128}}
built = Prepare.search_requests_with_expr("wire", q.tolist(), "vector", param, 10)
built = built.SerializeToString()
def cpu(pid):  # the server's CPU seconds so far: its threads' schedstat (ns, not ticks)
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended: its time is gone from both readings alike
    return total / 1e9
servers = cfg["servers"]  # [(name, port, pid)]
calls = {}
for name, port, pid in servers:
    ch = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
        ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
    calls[name] = ch.unary_unary("/milvus.proto.milvus.MilvusService/Search")
    calls[name](built)  # warm up
out = {name: {"wall_ms": [], "cpu_ms": [], "pymilvus_ms": [], "first_ids": None}
       for name, _, _ in servers}
for name, _, _ in servers:  # the answer's bytes (the same graph: the same bytes)
    out[name]["response_sha256"] = hashlib.sha256(calls[name](built)).hexdigest()
for r in range(cfg["calls"]):
    for name, port, pid in servers if r % 2 == 0 else servers[::-1]:
        c0, t = cpu(pid), time.perf_counter()
        calls[name](built)
        out[name]["wall_ms"].append((time.perf_counter() - t) * 1e3)
        out[name]["cpu_ms"].append((cpu(pid) - c0) * 1e3)
for name, port, pid in servers:  # the full pymilvus call once per server
    alias = f"s{port}"
    connections.connect(alias=alias, host="127.0.0.1", port=port)
    col = Collection("wire", using=alias)
    t = time.perf_counter()
    res = col.search(q.tolist(), "vector", param, limit=10)
    out[name]["pymilvus_ms"].append((time.perf_counter() - t) * 1e3)
    out[name]["first_ids"] = [list(h.ids) for h in res][:3]
print(json.dumps(out))
"""


def loaded(python: Path, port: int, data: dict[str, Any]) -> dict[str, Any]:
    """Runs LOADER against the server on `port`; returns what it printed."""
    res = subprocess.run(
        [str(python), "-c", LOADER, f"127.0.0.1:{port}"],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if res.returncode != 0:
        raise RuntimeError(f"loading failed: {res.stderr[-3000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _anon_huge_kb(pid: int) -> int:
    """Returns the kB of a process's anonymous memory on huge pages (smaps_rollup)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Starts every variant's server, loads each, then runs TIMER across them."""
    python = ensure_venv()
    x, _ = glove(args.rows + args.queries)
    np.save(tmp / "x.npy", x[: args.rows])
    np.save(tmp / "q.npy", x[args.rows :])
    data = {"vectors": f"{tmp}/x.npy", "queries": f"{tmp}/q.npy"}
    out: dict[str, Any] = {"variants": {}}
    with contextlib.ExitStack() as stack:
        servers = []
        for v in args.variant:
            src = v.source(tmp / f"src-{v.name}")
            env = {**os.environ, "PYTHONPATH": str(src), **dict(v.env)}
            if v.kind:
                env["VECTORLOG_GRPC_SERVER"] = v.kind
            ports, d = Ports(free_port(), free_port()), tmp / f"data-{v.name}"
            # -P: the variant's tree (PYTHONPATH) first, not this process's folder (-m puts it
            # ahead of PYTHONPATH: every variant would run the code of where this runs)
            cmd = [sys.executable, "-P", "-m", "vectorlog.cli", "serve", "--dir", str(d)]
            cmd += ["--port", str(ports.grpc), "--rest-port", str(ports.rest)]
            health = f"http://127.0.0.1:{ports.rest}/healthz"
            proc = stack.enter_context(child(cmd, health, new_session=True, env=env))
            out["variants"][v.name] = {"tree": v.tree, "env": dict(v.env)}
            out["variants"][v.name] |= loaded(python, ports.grpc, data)
            out["variants"][v.name]["anon_huge_kb"] = _anon_huge_kb(proc.pid)
            servers.append((v.name, ports.grpc, proc.pid))
        out["load1_start"] = save.load1()
        res = subprocess.run(
            [str(python), "-c", TIMER],
            input=json.dumps(data | {"servers": servers, "calls": args.calls}),
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(f"the timer failed: {res.stderr[-3000:]}")
        out["load1_end"] = save.load1()
        out["calls"] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON and a markdown table of each variant's medians, and the ratio of each
    pair's calls (the same round) to the first variant's."""
    calls = results["calls"]
    names = list(calls)
    first = np.asarray(calls[names[0]]["wall_ms"])
    rows = []
    for n in names:
        wall, cpu = np.asarray(calls[n]["wall_ms"]), np.asarray(calls[n]["cpu_ms"])
        ratio = wall / first
        cpu_ratio = cpu / np.asarray(calls[names[0]]["cpu_ms"])
        rows.append(
            (
                n,
                f"{np.median(wall):.1f}",
                f"{np.percentile(wall, 25):.1f} / {np.percentile(wall, 75):.1f}",
                f"{np.min(wall):.1f}",
                f"{np.median(cpu):.1f}",
                f"{np.median(ratio):.3f}",
                f"{np.median(cpu_ratio):.3f}",
                f"{calls[n]['pymilvus_ms'][0]:.1f}",
                calls[n]["response_sha256"][:12],
            )
        )
    lines = [
        "# 1,000 queries in one Search call: vectorlog A/B, servers side by side",
        "",
        f"{results['rows']:,} GloVe-6B-50d rows, HNSW M 16 efConstruction 100 COSINE, "
        f"{results['queries']:,} queries in one prebuilt request (ef 128, k 10), "
        f"{results['calls_per_server']} calls per server alternated (order reversed each "
        "round). Machine: "
        f"{results['machine']}; 1-minute load {results['load1_start']:.1f} at the start, "
        f"{results['load1_end']:.1f} at the end.",
        "",
        *save.table(
            (
                "variant",
                "answer wall ms (median)",
                "p25 / p75",
                "min",
                "server CPU ms (median)",
                f"wall / {names[0]}'s in the same round (median)",
                f"CPU / {names[0]}'s in the same round (median)",
                "one full pymilvus call (ms)",
                "response sha256",
            ),
            rows,
            "l",
        ),
        "",
    ]
    save.write(NAME, results, lines, out=out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", required=True, type=Variant.parse)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="batch-ab-") as tmp:
        got = measure(args, Path(tmp))
    got |= {"rows": args.rows, "queries": args.queries, "calls_per_server": args.calls}
    got["machine"] = save.cores()
    print(json.dumps({k: v for k, v in got.items() if k != "calls"}))
    write(got, args.out)


if __name__ == "__main__":
    main()
