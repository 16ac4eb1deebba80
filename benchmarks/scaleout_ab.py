"""A/B of a cut of the CPU a search costs outside the query node (issue 24): two clusters of 2
query nodes x 1 search thread side by side on one local broker, one on the code before the
change and one with it, measured in turn with the order alternated each round; the CPU ms
per search of each process beyond its background, as benchmarks.scaleout_bench measures it.

    python -m benchmarks.scaleout_ab --change TEXT (--before COMMIT | --env NAME=A,B)
        [--rows 50000] [--seconds 10] [--rounds 6] [--threads 4] [--out DIR]

`--before COMMIT`: the "before" cluster runs that commit's code (`git archive` into a temporary
folder, put first on its processes' PYTHONPATH), the "after" cluster this checkout's. `--env
NAME=A,B`: both run this checkout, the "before" one with NAME=A in its environment and the
"after" one with NAME=B. Adds the rounds to benchmarks/results/scaleout.json's `cuts` and
rewrites scaleout.md and scaleout.png (benchmarks.scaleout_bench renders them).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import MilvusClient

from benchmarks import save
from benchmarks import scaleout_bench as sb
from benchmarks.trees import ROOT, exported
from infra.broker import running_broker
from vectorlog.runners.ports import PortInUse
from vectorlog.runners.supervisor import Shape, Supervisor, free_port


def cluster(bootstrap: str, tmp: Path, label: str, env: dict[str, str]) -> tuple[Supervisor, str]:
    """Starts a cluster of 2 query nodes x 1 search thread with `env` added to its
    processes' environment (three tries on new ports); returns it and its pymilvus uri."""
    for attempt in range(3):
        port, key = free_port(), f"{label}{attempt}"
        sup = Supervisor(
            f"kafka://{bootstrap}",
            str(tmp / f"s{key}"),
            tmp / f"n{key}",
            Shape(proxies=1, querynodes=2),
            port,
            f"ab{key}x{os.getpid()}",
            say=lambda line: print(f"  {line}", flush=True),
        )
        sup.env |= {"VECTORLOG_QUERYNODE_SEARCH_THREADS": "1", **env}
        try:
            if sup.start_all():
                return sup, f"http://127.0.0.1:{port}"
        except PortInUse as exc:  # taken by another program between the pick and the start
            print(f"  {exc}; again on other ports", flush=True)
        sup.stop_all()
    raise RuntimeError(f"the {label} cluster did not start three times")


def measured(
    clusters: list[tuple[str, Supervisor, str]], vectors: np.ndarray, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Returns one measurement per cluster per round, the order alternated each round."""
    out = []
    for r in range(args.rounds):
        for label, sup, uri in clusters if r % 2 == 0 else clusters[::-1]:
            m = sb.measure(sup, uri, vectors, args)
            g = sb.grouped(m["cpu_ms_per_search_beyond_background"])
            row = {"label": label, "round": r, "qps": m["qps"], "load1": m["load1"]}
            row["per_fanout"] = m["searches_per_fanout"]  # 0.0: a proxy that does not count
            out.append(row | {k: round(g[k], 2) for k in ("proxy", "querynode", "clients")})
            print(f"  {json.dumps(out[-1])}", flush=True)
    return out


def environments(args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, str]]:
    """Returns the environment added to the before and after clusters' processes."""
    if args.before:
        code = exported(args.before, tmp / "before-code")
        # PYTHONSAFEPATH: `python -m` would put the working directory (this checkout) first on
        # sys.path, before PYTHONPATH: the "before" cluster ran this checkout's code
        safe = {"PYTHONSAFEPATH": "1"}
        return {
            "before": {"PYTHONPATH": str(code)} | safe,
            "after": {"PYTHONPATH": str(ROOT)} | safe,
        }
    name, _, values = args.env.partition("=")
    a, b = values.split(",")
    return {"before": {name: a}, "after": {name: b}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--change", required=True, help="what the after cluster has")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--before", help="the commit the before cluster runs")
    which.add_argument("--env", help="NAME=BEFORE,AFTER: one variable, two values")
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=4, help="pymilvus clients searching")
    ap.add_argument(
        "--out", type=Path, default=save.RESULTS, help="where the pages go (a scratch folder "
        "while the machine is loaded; default benchmarks/results)",
    )  # fmt: skip
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t, running_broker() as bootstrap:
        tmp, sups = Path(t), []
        try:
            clusters = []
            for label, env in environments(args, tmp).items():
                sup, uri = cluster(bootstrap, tmp, label, env)
                sups.append(sup)
                vectors = sb.load(MilvusClient(uri), args.rows)
                while not sb.ready(sup, MilvusClient(uri), 2, args.rows):
                    time.sleep(0.5)
                clusters.append((label, sup, uri))
            rounds = measured(clusters, vectors, args)
        finally:
            for s in sups:
                s.stop_all()
    how = f"--before {args.before}" if args.before else f"--env {args.env}"
    command = (
        f"python -m benchmarks.scaleout_ab --change '{args.change}' {how} --rows {args.rows} "
        f"--seconds {args.seconds} --rounds {args.rounds}"
        + ("" if args.threads == 4 else f" --threads {args.threads}")
        + ("" if args.out == save.RESULTS else f" --out {args.out}")
    )
    page = args.out / "scaleout.json"
    res = json.loads((page if page.exists() else save.RESULTS / "scaleout.json").read_text())
    res["cuts"] = [
        *res.get("cuts", []),
        {"change": args.change, "command": command, "rounds": rounds},
    ]
    save.write("scaleout", res, sb.report(res), sb.plot, args.out)


if __name__ == "__main__":
    main()
