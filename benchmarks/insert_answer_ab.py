"""A/B of `vectorlog serve`'s answer to a prebuilt 1,000-row Insert (issue 28): servers
started from different source trees run side by side, and one pymilvus 2.3.8 program sends
them the same prebuilt request bytes in alternating short rounds, so the machine's load
falls on every variant alike.

The program (run by the Milvus venv's python, as benchmarks/wire_vs_milvus does) creates a
collection {id INT64 primary, tag INT64, vector FLOAT_VECTOR(50)} on each server, builds
Insert requests of 1,000 rows (random float32 vectors; pymilvus's own request builder,
serialised once), then per round sends `--calls` of them to each server in turn (the order
alternates by round): each call's wall (request bytes sent, response bytes read: the
server's answer) and the server's CPU over the round (/proc, all its threads and those of
its child processes: `datanode_process`'s data node). Every call
to a server carries keys that server has not seen, as wire_vs_milvus's inserts do (a key
sent again is an upsert: the data node and query node then write delete records too);
`--batches` only caps how many requests are built (a cap below the calls makes repeats).
`--gap-ms` keeps the client's CPU busy that long between calls, as pymilvus building the
next request does (~2.4 ms a 1,000-row batch): the server's threads applying the batch
before then run while the client builds, not during the next answer.

    python -m benchmarks.insert_answer_ab --variant main=/work/main --variant new=. \\
        [--calls 50] [--rounds 12] [--gap-ms 2.4] [--out benchmarks/results]

A variant is NAME=TREE: the server runs with PYTHONPATH=TREE (a checkout of vectorlog, or a
commit of this repository, exported with `git archive`); `--env NAME:VAR=VALUE` sets a
variable in that variant's server only (a setting: `VECTORLOG_GIL_SWITCH_INTERVAL_MS=0.5`).
Writes insert_answer_ab.json, .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, free_port
from benchmarks.trees import exported
from infra.milvus_server import ensure_venv

NAME = "insert_answer_ab"
#: calls each server answers before the measured rounds
WARM_UP = 5

WORKLOAD = r"""
import json, os, sys, time
import grpc
import numpy as np
from pymilvus import Collection, CollectionSchema, DataType, FieldSchema, connections, utility
from pymilvus.orm.prepare import Prepare as Columns

cfg = json.loads(sys.stdin.read())
fields = [FieldSchema("id", DataType.INT64, is_primary=True), FieldSchema("tag", DataType.INT64),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=50)]
x = np.random.default_rng(7).random((cfg["batches"] * 1000, 50), dtype=np.float32)
gap = cfg["gap_ms"] / 1e3
ids = np.arange(len(x), dtype=np.int64)
def kids(pid):
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(x) for x in open(f"/proc/{pid}/task/{t}/children").read().split()]
        except FileNotFoundError:
            pass
    return out
def cpu(pid):
    total = 0.0
    for p in [pid, *kids(pid)]:
        try:
            stat = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return total
servers, built = [], None
for name, (port, pid) in cfg["servers"].items():
    connections.connect(alias=name, host="127.0.0.1", port=port)
    c = Collection("wire", CollectionSchema(fields), using=name)
    conn = connections._fetch_handler(name)
    if built is None:
        built = [conn._prepare_batch_insert_request("wire", Columns.prepare_insert_data(
            [ids[lo:lo + 1000].tolist(), (ids[lo:lo + 1000] % 10).tolist(), x[lo:lo + 1000]],
            c.schema), None, schema=c._schema_dict).SerializeToString()
            for lo in range(0, len(x), 1000)]
    ch = grpc.insecure_channel(f"127.0.0.1:{port}",
                               options=[("grpc.max_send_message_length", -1)])
    call = ch.unary_unary("/milvus.proto.milvus.MilvusService/Insert")
    servers.append((name, pid, call))
for name, pid, call in servers:
    for b in built[:cfg["warm"]]:
        call(b)  # warm up
out = {name: {"wall_ms": [], "cpu_ms": []} for name, _, _ in servers}
k = {name: cfg["warm"] for name, _, _ in servers}  # each server's next batch
for r in range(cfg["rounds"]):
    for name, pid, call in (servers if r % 2 == 0 else servers[::-1]):
        c0 = cpu(pid)
        for _ in range(cfg["calls"]):
            b = built[k[name] % len(built)]; k[name] += 1
            t = time.perf_counter(); call(b)
            out[name]["wall_ms"].append((time.perf_counter() - t) * 1e3)
            until = time.perf_counter() + gap
            while time.perf_counter() < until:
                pass  # the client's CPU, as pymilvus building the next request
        out[name]["cpu_ms"].append((cpu(pid) - c0) * 1e3 / cfg["calls"])
print(json.dumps(out))
"""


def server_source(spec: str, scratch: Path) -> tuple[str, Path]:
    """Returns (name, code folder) of "NAME=TREE": TREE a folder, or a commit exported."""
    name, _, tree = spec.partition("=")
    path = Path(tree)
    if path.is_dir():
        return name, path.resolve()
    return name, exported(tree, scratch / name)


def variant_env(specs: list[str]) -> dict[str, dict[str, str]]:
    """Returns {variant: {VAR: VALUE}} of the "NAME:VAR=VALUE" specs."""
    out: dict[str, dict[str, str]] = {}
    for spec in specs:
        name, _, assignment = spec.partition(":")
        var, _, value = assignment.partition("=")
        out.setdefault(name, {})[var] = value
    return out


def measure(
    variants: list[tuple[str, Path]],
    cfg: dict[str, Any],
    envs: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Starts one fresh `vectorlog serve` per variant (with its `envs` variables), runs
    WORKLOAD against them all; returns its per-variant call walls and CPU per call."""
    with ExitStack() as stack:
        servers: dict[str, tuple[int, int]] = {}
        for name, source in variants:
            d = stack.enter_context(tempfile.TemporaryDirectory(prefix="insert-ab-"))
            ports = Ports(free_port(), free_port())
            # -P: `python -m` would put the working directory first on sys.path, before
            # PYTHONPATH, and every variant would run the checkout the benchmark ran from
            cmd = [sys.executable, "-P", "-m", "vectorlog.cli", "serve", "--dir", d]
            cmd += ["--port", str(ports.grpc), "--rest-port", str(ports.rest)]
            env = {**os.environ, **(envs or {}).get(name, {}), "PYTHONPATH": str(source)}
            health = f"http://127.0.0.1:{ports.rest}/healthz"
            proc = stack.enter_context(child(cmd, health, new_session=True, env=env))
            servers[name] = (ports.grpc, proc.pid)
        res = subprocess.run(
            [str(ensure_venv()), "-c", WORKLOAD],
            input=json.dumps(cfg | {"servers": servers}),
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(f"the workload failed: {res.stderr[-2000:]}")
        return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def summary(got: dict[str, Any], calls: int) -> list[str]:
    """Returns markdown rows: per variant the call wall's quartiles and mean, the server's
    CPU per call (mean, median of rounds), and in how many rounds its median wall was the
    lowest of the variants."""
    walls = {k: np.array(v["wall_ms"]).reshape(-1, calls) for k, v in got.items()}
    per_round = np.array([np.median(w, axis=1) for w in walls.values()])
    wins = np.bincount(per_round.argmin(axis=0), minlength=len(walls))
    lines = [
        "| variant | answer p25 / p50 / p75 (ms) | mean (ms) | server CPU per call (ms) "
        "| rounds with the lowest median |",
        "|---|---|---|---|---|",
    ]
    for (name, wall), won in zip(walls.items(), wins, strict=True):
        cpu = np.array(got[name]["cpu_ms"])
        p25, p50, p75 = np.percentile(wall, [25, 50, 75])
        lines.append(
            f"| {name} | {p25:.3f} / {p50:.3f} / {p75:.3f} | {wall.mean():.3f} | "
            f"{cpu.mean():.3f} (median of rounds {np.median(cpu):.2f}) | {won} of {len(cpu)} |"
        )
    return lines


def workload(batches: int | None, calls: int, rounds: int, gap_ms: float) -> dict[str, Any]:
    """Returns WORKLOAD's configuration: `batches` requests built (None: one per call and
    warm-up call, so no server sees a key twice), WARM_UP calls first."""
    built = batches if batches is not None else WARM_UP + calls * rounds
    return {"batches": built, "calls": calls, "rounds": rounds, "gap_ms": gap_ms, "warm": WARM_UP}


def main() -> None:
    """Parses the arguments, runs the A/B, prints and writes its table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", action="append", required=True, help="NAME=TREE")
    p.add_argument("--batches", type=int, default=None, help="default: a new one per call")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--gap-ms", type=float, default=0.0, help="client CPU between calls")
    p.add_argument("--env", action="append", default=[], help="NAME:VAR=VALUE")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="insert-ab-src-") as scratch:
        variants = [server_source(s, Path(scratch)) for s in a.variant]
        load = save.load1()
        cfg = workload(a.batches, a.calls, a.rounds, a.gap_ms)
        got = measure(variants, cfg, variant_env(a.env))
    lines = [
        f"load average at the start: {load}; {a.calls} calls x {a.rounds} rounds a variant, "
        f"{a.gap_ms} ms of client CPU between calls; variables: {variant_env(a.env) or 'none'}",
        "",
        *summary(got, a.calls),
    ]
    print("\n".join(lines))
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / f"{NAME}.json").write_text(json.dumps(got | {"load": load}))
        (a.out / f"{NAME}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
