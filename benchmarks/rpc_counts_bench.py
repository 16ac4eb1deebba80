"""RPCs to rootcoord per request in the cluster mode: what a Bounded search, a Strong search
and an insert batch through a proxy process ask of rootcoord, and the CPU they cost the
proxy and rootcoord processes.

    python -m benchmarks.rpc_counts_bench [--ops 200] [--dim 8] [--rows 1000]

One cluster started by `vectorlog cluster up`'s supervisor (1 proxy, 1 query node) on a local
test broker. Rootcoord counts the calls it serves on /metrics (`vectorlog_rpc_served_total`,
by method); each phase runs `--ops` requests one after another through pymilvus (Bounded
searches, Strong searches, inserts of 100 rows), and the calls served during the phase, less
what the cluster asks by itself in the same time (measured in an idle phase first: data
node, index node and coordinators allocate timestamps now and then), are divided by the
requests. Writes benchmarks/results/rpc_counts.json, rpc_counts.md, rpc_counts.png.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pymilvus import MilvusClient

from benchmarks import save
from benchmarks.scaleout_bench import cpu_seconds
from infra.broker import running_broker
from vectorlog.runners.supervisor import CLUSTER_TOKEN_ENV, Shape, Supervisor, free_port

SERVED = re.compile(r'vectorlog_rpc_served_total\{[^}]*method="([^"]+)"[^}]*\} (\S+)')
BATCH = 100


def served(sup: Supervisor) -> dict[str, float]:
    """Returns {method: calls rootcoord served so far}, from its /metrics."""
    rc = next(c for c in sup.children if c.name == "rootcoord")
    token = sup.env[CLUSTER_TOKEN_ENV]
    text = httpx.get(
        f"http://127.0.0.1:{rc.metrics_port}/metrics",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ).text
    return {m: float(n) for m, n in SERVED.findall(text)}


def phase(sup: Supervisor, run: Any, ops: int) -> dict[str, Any]:
    """Runs `run(i)` `ops` times; returns the seconds, calls served by method and the CPU
    seconds of the proxy and rootcoord in that time."""
    measured = ("proxy1", "rootcoord")
    pids = {c.name: c.proc.pid for c in sup.children if c.proc and c.name in measured}
    calls0, cpu0, t0 = served(sup), cpu_seconds(pids), time.monotonic()
    for i in range(ops):
        run(i)
    seconds = time.monotonic() - t0
    calls1, cpu1 = served(sup), cpu_seconds(pids)
    calls = {m: calls1[m] - calls0.get(m, 0.0) for m in calls1 if calls1[m] > calls0.get(m, 0.0)}
    return {"seconds": seconds, "calls": calls, "cpu": {r: cpu1[r] - cpu0[r] for r in pids}}


def per_op(ph: dict[str, Any], idle: dict[str, Any], ops: int) -> dict[str, Any]:
    """Returns calls per request by method and CPU ms per request (each less the idle
    phase's rate over the same time), and the wall ms per request."""
    rate = {m: n / idle["seconds"] for m, n in idle["calls"].items()}
    spent = {r: s - idle["cpu"][r] / idle["seconds"] * ph["seconds"] for r, s in ph["cpu"].items()}
    calls = {
        m: round(max(n - rate.get(m, 0.0) * ph["seconds"], 0.0) / ops, 3)
        for m, n in ph["calls"].items()
    }
    calls = {m: n for m, n in calls.items() if n >= 0.005}
    cpu = {r: round(1000 * max(s, 0.0) / ops, 2) for r, s in spent.items()}
    total = round(sum(calls.values()), 3)
    return {
        "calls": calls,
        "total": total,
        "cpu_ms": cpu,
        "ms": round(1000 * ph["seconds"] / ops, 1),
    }


def measure(uri: str, sup: Supervisor, args: argparse.Namespace) -> dict[str, Any]:
    client = MilvusClient(uri)
    client.create_collection("c", dimension=args.dim, consistency_level="Bounded")
    rng = np.random.default_rng(1)
    rows = [{"id": i, "vector": rng.random(args.dim).tolist()} for i in range(args.rows)]
    client.insert("c", rows)
    q = [rng.random(args.dim).tolist()]
    client.search("c", q, limit=10, consistency_level="Strong")  # meta cached, node ready
    idle = phase(sup, lambda i: time.sleep(0.05), max(args.ops // 2, 20))

    def insert(i: int) -> None:
        first = args.rows + i * BATCH
        client.insert("c", [{"id": first + k, "vector": q[0]} for k in range(BATCH)])

    phases = {
        "Bounded search": lambda i: client.search("c", q, limit=10),
        "Strong search": lambda i: client.search("c", q, limit=10, consistency_level="Strong"),
        f"insert of {BATCH} rows": insert,
    }
    return {name: per_op(phase(sup, run, args.ops), idle, args.ops) for name, run in phases.items()}


def report(res: dict[str, Any]) -> str:
    lines = [
        "# RPCs to rootcoord per request (cluster mode)",
        "",
        f"`{res['command']}` on {res['machine']}; load average {res['load1']:.1f} at the start.",
        "One process cluster (1 proxy, 1 query node) on a local Tansu broker; requests one",
        "after another through pymilvus. Calls counted by rootcoord (/metrics), less the",
        "cluster's own background rate from an idle phase; CPU ms per request from /proc",
        "(user + system), less each process's CPU rate in the idle phase over the same time.",
        "",
        *save.table(
            ("code", "request", "rootcoord RPCs per request", "by method", "CPU ms: proxy",
             "rootcoord", "wall ms per request"),
            [_row(code, name, r) for code, got in res["runs"].items() for name, r in got.items()],
            align="l" * 7,
        ),
    ]  # fmt: skip
    return "\n".join(lines)


def _row(code: str, name: str, r: dict[str, Any]) -> tuple[str, ...]:
    """Returns one request's table row: its rootcoord calls, in all and by method, and CPU."""
    by = ", ".join(f"{m} {n:g}" for m, n in sorted(r["calls"].items())) or "none"
    cpu = r["cpu_ms"]
    return (code, name, f"{r['total']:g}", by, f"{cpu['proxy1']:.2f}",
            f"{cpu['rootcoord']:.2f}", f"{r['ms']:.1f}")  # fmt: skip


def plot(res: dict[str, Any], path: Path) -> None:
    codes = list(res["runs"])
    names = list(res["runs"][codes[0]])
    fig, ax = save.pyplot().subplots(figsize=(7, 3.2))
    width = 0.8 / len(codes)
    for k, code in enumerate(codes):
        totals = [res["runs"][code][n]["total"] for n in names]
        ax.bar([i + k * width for i in range(len(names))], totals, width, label=code)
    ax.set_xticks([i + width * (len(codes) - 1) / 2 for i in range(len(names))], names)
    ax.set_ylabel("rootcoord RPCs per request")
    ax.legend(fontsize=8)
    save.plot(fig, path)


def run_code(bootstrap: str, tmp: Path, args: argparse.Namespace, label: str) -> dict:
    sup = Supervisor(
        f"kafka://{bootstrap}",
        str(tmp / f"s-{label}"),
        tmp / f"n-{label}",
        Shape(proxies=1, querynodes=1),
        free_port(),
        f"rpc{label}{os.getpid()}",
        say=lambda line: None,
    )
    port = next(c.port for c in sup.children if c.role == "proxy")
    try:
        if not sup.start_all():
            raise RuntimeError("the cluster did not start")
        return measure(f"http://127.0.0.1:{port}", sup, args)
    finally:
        sup.stop_all()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--label", default="this branch", help="what code is measured")
    ap.add_argument("--merge", help="a results json to add this run to (before/after)")
    args = ap.parse_args()
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    res: dict[str, Any] = {
        "command": f"python -m benchmarks.rpc_counts_bench --ops {args.ops} --dim {args.dim}"
        f" --rows {args.rows}",
        "machine": save.cores(shared=True),
        "load1": save.load1(),
        "runs": json.loads(Path(args.merge).read_text())["runs"] if args.merge else {},
    }
    with tempfile.TemporaryDirectory() as tmp, running_broker() as bootstrap:
        label = f"{args.label} ({git.stdout.strip() or '?'})"
        res["runs"][label] = run_code(bootstrap, Path(tmp), args, "x")
    save.write("rpc_counts", res, report(res), plot)
    print(report(res))


if __name__ == "__main__":
    main()
