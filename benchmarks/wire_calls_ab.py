"""A/B of `vectorlog serve`'s per-call wall time through pymilvus 2.3.8 (issue 28): the same
client program against servers started from different source trees and/or gRPC servers
(VECTORLOG_GRPC_SERVER: aio, threads), alternated round by round on this machine so the
machine's load falls on every variant alike.

The program (run by the Milvus venv's python, as benchmarks/wire_vs_milvus does) creates a
collection {id INT64 primary, tag INT64, vector FLOAT_VECTOR(50)}, times inserting its GloVe-6B-50d
rows in 1,000-row column batches (the lists built before the clock), builds HNSW (M 16,
efConstruction 100, COSINE), loads it, then times: one query per call
(ef 128), describe_collection per call, and sequential single-row inserts (p50/p99);
with `--insert-only` it stops after the batch inserts (their rows/s and each side's CPU).

    python -m benchmarks.wire_calls_ab --variant main=/work/main:threads \\
        --variant aio=.:aio [--rows 20000] [--queries 1000] [--single-rows 300] [--rounds 3]
        [--insert-only] [--out benchmarks/results]

A variant is NAME=TREE[:KIND[:VAR=VALUE,...]]: the server runs with PYTHONPATH=TREE (a checkout
of vectorlog, or a commit of this repository, exported with `git archive`),
VECTORLOG_GRPC_SERVER=KIND if given, with the VAR=VALUE pairs in its environment (e.g.
`si1=.:threads:VECTORLOG_GIL_SWITCH_INTERVAL_MS=1`). Writes wire_calls_ab.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, free_port
from benchmarks.trees import exported
from infra.milvus_server import ensure_venv
from vectorlog.demo.datasets import glove

NAME = "wire_calls_ab"

#: the program's collection {id, tag, vector} (x: its rows; ids: their keys), as pymilvus
#: 2.3.8 makes it
COLLECTION = r"""
fields = [FieldSchema("id", DataType.INT64, is_primary=True),
          FieldSchema("tag", DataType.INT64),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim)]
c = Collection("wire", CollectionSchema(fields), consistency_level="Bounded")
ids = np.arange(n, dtype=np.int64)
"""
#: flushing, HNSW (M 16, efConstruction 100, COSINE) built and loaded; `param`: ef 128
INDEXED = r"""
c.flush()
c.create_index("vector", {"index_type": "HNSW", "metric_type": "COSINE",
                          "params": {"M": 16, "efConstruction": 100}})
utility.wait_for_index_building_complete("wire")
c.load()
param = {"metric_type": "COSINE", "params": {"ef": 128}}
"""

#: a program's imports (it runs in the Milvus venv, pymilvus 2.3.8)
PYMILVUS = r"""
import json, os, sys, time
import numpy as np
from pymilvus import (Collection, CollectionSchema, DataType, FieldSchema, connections,
                      utility)
"""
#: connecting to the server at argv[1] (HOST:PORT), the program's cfg on stdin
ARGV_CONNECT = r"""
host, port = sys.argv[1].split(":")
cfg = json.loads(sys.stdin.read())
connections.connect(host=host, port=port)
"""
#: connecting to the server at cfg's port, cfg the first line on stdin
STDIN_CONNECT = r"""
cfg = json.loads(sys.stdin.readline())
connections.connect(host="127.0.0.1", port=cfg["port"])
"""
#: the rows (x) and the queries (q) cfg names
DATA = r"""x = np.load(cfg["vectors"]); q = np.load(cfg["queries"])
n, dim = x.shape
"""
#: every row of x inserted into the collection, 1,000 a call
INSERTED = r"""for lo in range(0, n, 1000):
    c.insert([ids[lo:lo + 1000].tolist(), (ids[lo:lo + 1000] % 10).tolist(), x[lo:lo + 1000]])
"""

WORKLOAD = (
    PYMILVUS
    + ARGV_CONNECT
    + DATA
    + COLLECTION
    + r"""
batches = [(ids[lo:lo + 1000].tolist(), (ids[lo:lo + 1000] % 10).tolist(), x[lo:lo + 1000])
           for lo in range(0, n, 1000)]
def server_use():
    # (CPU seconds, context switches of all its threads) of the server so far
    stat = open(f"{proc}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    switches = 0
    for task in os.listdir(f"{proc}/task"):
        try:
            for line in open(f"{proc}/task/{task}/status"):
                if "ctxt_switches" in line:
                    switches += int(line.split()[1])
        except FileNotFoundError:
            pass
    return cpu, switches
def timed(key, calls, call):
    cpu0, sw0 = server_use()
    own0, t = time.process_time(), time.perf_counter()
    for i in range(calls):
        call(i)
    wall = time.perf_counter() - t
    cpu1, sw1 = server_use()
    out[key + "_per_s"] = calls / wall
    out[key + "_server_cpu_us"] = (cpu1 - cpu0) / calls * 1e6
    out[key + "_client_cpu_us"] = (time.process_time() - own0) / calls * 1e6
    out[key + "_server_switches"] = (sw1 - sw0) / calls
out = {}
proc = f"/proc/{cfg['server_pid']}"
timed("batch_insert", len(batches), lambda i: c.insert(list(batches[i])))
out["batch_insert_rows_per_s"] = out["batch_insert_per_s"] * n / len(batches)
if cfg.get("insert_only"):
    print(json.dumps(out))
    sys.exit(0)
"""
    + INDEXED
    + r"""
for v in q[:50]:
    c.search([v.tolist()], "vector", param, limit=10)
timed("search", len(q), lambda i: c.search([q[i].tolist()], "vector", param, limit=10))
timed("has_collection", len(q), lambda i: utility.has_collection("wire"))
lat = []
def one_row(i):
    t = time.perf_counter()
    c.insert([[n + i], [0], x[i : i + 1]])
    lat.append(time.perf_counter() - t)
timed("single_insert", cfg["single_rows"], one_row)
lat.sort()
out["single_insert_p50_ms"] = lat[len(lat) // 2] * 1e3
out["single_insert_p99_ms"] = lat[int(0.99 * (len(lat) - 1))] * 1e3
print(json.dumps(out))
"""
)

METRICS = (
    ("1,000-row batch inserts (rows/s)", "batch_insert_rows_per_s"),
    ("  server CPU per batch (µs)", "batch_insert_server_cpu_us"),
    ("  client CPU per batch (µs)", "batch_insert_client_cpu_us"),
    ("one query per call, ef 128 (QPS)", "search_per_s"),
    ("  server CPU per call (µs)", "search_server_cpu_us"),
    ("  client CPU per call (µs)", "search_client_cpu_us"),
    ("  server context switches per call", "search_server_switches"),
    ("has_collection per call (calls/s)", "has_collection_per_s"),
    ("  server CPU per call (µs)", "has_collection_server_cpu_us"),
    ("  server context switches per call", "has_collection_server_switches"),
    ("single-row insert p50 (ms)", "single_insert_p50_ms"),
    ("single-row insert p99 (ms)", "single_insert_p99_ms"),
    ("  server CPU per call (µs)", "single_insert_server_cpu_us"),
    ("  server context switches per call", "single_insert_server_switches"),
)


@dataclass(frozen=True)
class Variant:
    """A server to measure: `tree` (PYTHONPATH of `vectorlog serve`), `kind` (its
    VECTORLOG_GRPC_SERVER, None: its default), `env` (more of its environment)."""

    name: str
    tree: str
    kind: str | None
    env: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def parse(text: str) -> Variant:
        """Returns the variant of "NAME=TREE[:KIND[:VAR=VALUE,...]]"."""
        name, _, rest = text.partition("=")
        tree, _, rest = rest.partition(":")
        kind, _, env = rest.partition(":")
        pairs = tuple((k, val) for k, _, val in (kv.partition("=") for kv in env.split(",") if kv))
        path = Path(tree)
        return Variant(name, str(path.resolve()) if path.is_dir() else tree, kind or None, pairs)

    def source(self, scratch: Path) -> Path:
        """Returns the folder of its code: `tree` if a folder, else that commit's tree
        exported into `scratch`."""
        path = Path(self.tree)
        return path if path.is_dir() else exported(self.tree, scratch)


def run_variant(
    variant: Variant, source: Path, python: Path, data: dict[str, Any]
) -> dict[str, Any]:
    """Runs the program once against a fresh `vectorlog serve` of `variant` (its code in
    `source`); returns its figures and the 1-minute load average at the start."""
    env = {**os.environ, "PYTHONPATH": str(source), **dict(variant.env)}
    if variant.kind:
        env["VECTORLOG_GRPC_SERVER"] = variant.kind
    with tempfile.TemporaryDirectory(prefix="wire-ab-") as d:
        ports = Ports(free_port(), free_port())
        # -P: the variant's tree (PYTHONPATH) first; -m alone puts this process's folder ahead
        # of it, and every variant ran the code of the checkout this runs in
        cmd = [sys.executable, "-P", "-m", "vectorlog.cli", "serve", "--dir", d]
        cmd += ["--port", str(ports.grpc), "--rest-port", str(ports.rest)]
        health = f"http://127.0.0.1:{ports.rest}/healthz"
        with child(cmd, health, new_session=True, env=env) as server:
            load = save.load1()
            res = subprocess.run(
                [str(python), "-c", WORKLOAD, f"127.0.0.1:{ports.grpc}"],
                input=json.dumps(data | {"server_pid": server.pid}),
                capture_output=True,
                text=True,
                timeout=3600,
                check=False,
            )
    if res.returncode != 0:
        raise RuntimeError(f"the workload failed against {variant.name}: {res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1]) | {"load1": load}


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON and a markdown table: each variant's figures per round, medians."""
    names = [v["name"] for v in results["variants"]]
    rows = []
    for label, key in METRICS:
        if any(key not in r[n] for r in results["rounds"] for n in names):
            continue  # a phase not run (--insert-only)
        per = {n: [r[n][key] for r in results["rounds"]] for n in names}
        cells = [" / ".join(f"{x:,.3g}" if x < 100 else f"{x:,.0f}" for x in per[n]) for n in names]
        medians = [float(np.median(per[n])) for n in names]
        ratio = medians[-1] / medians[0] if medians[0] else float("nan")
        rows.append((label, *cells, f"{ratio:.2f}"))
    loads = [r[n]["load1"] for r in results["rounds"] for n in names]
    lines = [
        "# Per-call wall time through pymilvus 2.3.8: vectorlog A/B",
        "",
        f"{results['rows']:,} GloVe-6B-50d rows in 1,000-row batches"
        + (
            " only (--insert-only)"
            if results.get("insert_only")
            else f", HNSW M 16 efConstruction 100, COSINE, {results['queries']:,} queries one "
            f"per call (ef 128, k 10), {results['single_rows']} single-row inserts"
        )
        + "; variants alternated, each server fresh.",
        f"Machine: {results['machine']}; 1-minute load at each run's start "
        f"{min(loads):.1f}-{max(loads):.1f}.",
        "Variants: "
        + "; ".join(
            f"`{v['name']}` = {v['tree']} ({v['kind'] or 'default'}"
            + "".join(f", {k}={val}" for k, val in v.get("env", {}).items())
            + ")"
            for v in results["variants"]
        ),
        "",
        *save.table(("measure", *names, f"{names[-1]} / {names[0]} (medians)"), rows, "l"),
        "",
    ]
    save.write(NAME, results, lines, out=out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", required=True, type=Variant.parse)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--single-rows", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    parser.add_argument(
        "--insert-only", action="store_true", help="time the 1,000-row batch inserts alone"
    )
    args = parser.parse_args(argv)
    python = ensure_venv()
    x, _ = glove(args.rows + args.queries)
    results: dict[str, Any] = {
        "insert_only": args.insert_only,
        "rows": args.rows,
        "queries": args.queries,
        "single_rows": args.single_rows,
        "variants": [
            {"name": v.name, "tree": str(v.tree), "kind": v.kind, "env": dict(v.env)}
            for v in args.variant
        ],
        "rounds": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "x.npy", x[: args.rows])
        np.save(Path(tmp) / "q.npy", x[args.rows :])
        data = {"vectors": f"{tmp}/x.npy", "queries": f"{tmp}/q.npy"}
        data["single_rows"], data["insert_only"] = args.single_rows, args.insert_only
        sources = {v.name: v.source(Path(tmp) / v.name) for v in args.variant}
        for i in range(args.rounds):
            order = args.variant if i % 2 == 0 else args.variant[::-1]
            got = {v.name: run_variant(v, sources[v.name], python, data) for v in order}
            print(f"round {i + 1}: {json.dumps(got)}", flush=True)
            results["rounds"].append(got)
            time.sleep(1)
    results["machine"] = save.cores()
    write(results, args.out)


if __name__ == "__main__":
    main()
