"""The CPU an idle cluster spends (issue 24's b2): each process's user + system CPU ms per
second, from /proc, with nothing running, for a cluster of 2 query nodes loaded with data;
with `--before COMMIT`, an A/B of that commit's code against this checkout's.

    python -m benchmarks.idle_cluster [--before COMMIT | --env NAME=A,B] [--rows 200000]
        [--seconds 40] [--rounds 4] [--out DIR]

Each cluster runs under `vectorlog cluster up`'s supervisor (vectorlog.runners.supervisor) on
a local Tansu broker of its own (infra.broker), 1 proxy, 2 query nodes, one
data node and index node: `--rows` rows of 128-d vectors are inserted through pymilvus into a
4-shard collection, flushed and loaded (as benchmarks.scaleout_bench loads its clusters), then
nothing is asked of it (a broker's CPU grows with the batches its partitions hold, so with
two clusters both start before either is loaded). With `--before`, two clusters run side by
side, one on that commit's
code (`git archive`, first on its processes' PYTHONPATH) and one on this checkout's, and each
round measures both one after the other for `--seconds` each, the order alternated each round
(the machine's other work falls on both alike); `--env NAME=A,B` runs this checkout in both,
one with the variable NAME=A and one with NAME=B. Groups as the scale-out page's: the broker,
the proxy, the query nodes, rootcoord, the rest (datacoord, data node, index node). Writes
<out>/idle_cluster.json and idle_cluster.md.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import MilvusClient

from benchmarks import save
from benchmarks import scaleout_bench as sb
from benchmarks.scaleout_ab import cluster
from benchmarks.trees import ROOT, exported
from infra.broker import Broker
from vectorlog.runners.supervisor import Supervisor

#: seconds a cluster idles after it is loaded before the first measurement (the load's
#: flushes, index builds and compactions end)
SETTLE_S = 20.0
GROUPS = ("broker", "proxy", "querynode", "rootcoord", "rest")


def loaded(sup: Supervisor, uri: str, rows: int) -> None:
    """Inserts `rows` rows into a 4-shard collection of `sup`'s cluster (2 query nodes),
    flushes and waits until its query nodes serve them."""
    client = MilvusClient(uri)
    sb.load(client, rows)
    while not sb.ready(sup, client, 2, rows):
        time.sleep(0.5)


def pids(sup: Supervisor, broker: int | None) -> dict[str, int]:
    """Returns {name: pid} of the cluster's processes and its broker (the query nodes'
    spares are started by the supervisor's watch, which a benchmark does not run)."""
    out = {c.name: c.proc.pid for c in sup.children if c.proc}
    return out | ({"broker": broker} if broker else {})


def sampled(procs: dict[str, int], seconds: float) -> dict[str, Any]:
    """Returns each process's CPU ms per second over `seconds` and the load average at the
    start and end (a process that ended meanwhile is left out)."""
    load = [save.load1()]
    first, t = sb.cpu_seconds(procs), time.monotonic()
    time.sleep(seconds)
    last, span = sb.cpu_seconds(procs), time.monotonic() - t
    load.append(save.load1())
    ms = {r: round(1000 * (last[r] - first[r]) / span, 1) for r in procs if r in last}
    return {"ms_per_s": ms, "load1": [round(x, 2) for x in load]}


def grouped(ms: dict[str, float]) -> dict[str, float]:
    """Returns `ms` summed by GROUPS, and their sum as "all"."""
    out = dict.fromkeys(GROUPS, 0.0)
    for name, v in ms.items():
        group = next((g for g in GROUPS[:4] if name.startswith(g)), None)
        out[group or "rest"] += v
    return out | {"all": round(sum(out.values()), 1)}


def environments(args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, str]]:
    """Returns the environment added to each cluster's processes, by label."""
    # PYTHONSAFEPATH: `python -m` would put the working directory first on sys.path
    safe = {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(ROOT)}
    if args.env:
        name, _, values = args.env.partition("=")
        a, b = values.split(",")
        return {f"{name}={a}": safe | {name: a}, f"{name}={b}": safe | {name: b}}
    if not args.before:
        return {"this": safe}
    code = exported(args.before, tmp / "before-code")
    return {"before": safe | {"PYTHONPATH": str(code)}, "after": safe}


def medians(rounds: list[dict[str, Any]], label: str) -> dict[str, float]:
    """Returns the median ms/s of each process of cluster `label` over the rounds."""
    ms = [r["ms_per_s"] for r in rounds if r["label"] == label]
    return {p: float(np.median([m[p] for m in ms if p in m])) for p in ms[0]}


def report(res: dict[str, Any]) -> list[str]:
    """Returns the markdown page of `res`."""
    labels = list(res["labels"])
    loads = [x for r in res["rounds"] for x in r["load1"]]
    lines = [
        "# The CPU an idle cluster spends (issue 24's b2)",
        "",
        f"Run {res['when']}. `{res['command']}` on {save.cores(shared=True)}"
        + (
            f" (before: {res['before_commit']}, after: {res['machine']['git_head']})"
            if res.get("before_commit")
            else ""
        )
        + "; 1-minute load",
        f"average during the measurements {min(loads):.1f} to {max(loads):.1f}.",
        f"{res['rows']:,} rows of 128-d vectors in 4 shards, flushed and loaded, 1 proxy,",
        "2 query nodes, each cluster on a Tansu broker of its own; nothing",
        f"asked of it. {res['rounds_n']} rounds of {res['seconds']:.0f} s per cluster, the order",
        "alternated each round; CPU ms per second (user + system, /proc), medians over rounds.",
        "",
    ]
    rows = [[label, *(f"{grouped(medians(res['rounds'], label))[g]:.0f}" for g in (*GROUPS, "all"))]
            for label in labels]  # fmt: skip
    lines += save.table(["code", *GROUPS, "all"], rows)
    procs = list(medians(res["rounds"], labels[0]))
    lines += ["", "Per process (median ms/s):", ""]
    per = [[p, *(f"{medians(res['rounds'], lb).get(p, 0.0):.1f}" for lb in labels)] for p in procs]
    lines += save.table(["process", *labels], per)
    lines += ["", "Each round (all processes, ms/s; load at its start and end):", ""]
    each = [[r["round"], r["label"], f"{grouped(r['ms_per_s'])['all']:.0f}",
             f"{r['load1'][0]:.1f}-{r['load1'][1]:.1f}"] for r in res["rounds"]]  # fmt: skip
    return lines + save.table(["round", "code", "all ms/s", "load"], each)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Starts the clusters, loads them, measures them; returns the results."""
    with tempfile.TemporaryDirectory(prefix="idle-cluster-") as t, ExitStack() as stack:
        tmp, clusters = Path(t), []
        started = []  # all started before any is loaded: their partitions age alike
        for i, (label, env) in enumerate(environments(args, tmp).items()):
            broker = stack.enter_context(Broker())
            sup, uri = cluster(broker.bootstrap, tmp, f"idle{i}", env)  # 2 query nodes
            stack.callback(sup.stop_all)
            started.append((label, sup, uri, broker.pid))
        for label, sup, uri, broker_pid in started:
            loaded(sup, uri, args.rows)
            clusters.append((label, sup, broker_pid))
        time.sleep(SETTLE_S)
        rounds = []
        for r in range(args.rounds):
            for label, sup, broker_pid in clusters if r % 2 == 0 else clusters[::-1]:
                got = sampled(pids(sup, broker_pid), args.seconds)
                rounds.append({"round": r, "label": label} | got)
                print(f"  round {r} {label}: {grouped(got['ms_per_s'])} {got['load1']}", flush=True)
    return {"labels": [c[0] for c in clusters], "rounds": rounds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--before", help="a commit whose code a second cluster runs (A/B)")
    which.add_argument("--env", help="NAME=A,B: two clusters of this checkout, NAME=A and =B")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", type=Path, default=save.RESULTS, help="where the page goes")
    args = ap.parse_args()
    res = measure(args)
    command = "python -m benchmarks.idle_cluster" + "".join(
        f" --{k} {v}" for k, v in vars(args).items() if v is not None and k != "out"
    )
    res |= {"command": command, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    res |= {"rows": args.rows, "seconds": args.seconds}
    res |= {"rounds_n": args.rounds, "machine": save.machine()}
    if args.before:  # the commit it named then
        res["before_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", args.before],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    save.write("idle_cluster", res, report(res), out=args.out)


if __name__ == "__main__":
    main()
