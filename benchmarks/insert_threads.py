"""Where the server's CPU goes per 1,000-row column insert through pymilvus 2.3.8 (issue 28):
`vectorlog serve`'s gRPC server and embedded cluster run in this process (as `serve` starts
them), the pymilvus program in Milvus 2.3.5's venv inserts GloVe-6B-50d rows in 1,000-row
batches (unique keys), and each thread's CPU time over the run (its run time in
/proc/self/task/*/schedstat) is divided by the batches: the gRPC handler's against the query
node's and the data node's, which consume every batch beside it, on the same GIL.

    python -m benchmarks.insert_threads [--rows 100000] [--rounds 2] [--out benchmarks/results]

Writes insert_threads.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import free_port
from infra.milvus_server import ensure_venv
from vectorlog import Client
from vectorlog.demo.datasets import glove
from vectorlog.server.grpc_server import start_grpc

NAME = "insert_threads"

WORKLOAD = r"""
import json, sys, time
import numpy as np
from pymilvus import Collection, CollectionSchema, DataType, FieldSchema, connections
connections.connect(host="127.0.0.1", port=sys.argv[1])
x = np.load(sys.argv[2]); n, dim = x.shape
fields = [FieldSchema("id", DataType.INT64, is_primary=True),
          FieldSchema("tag", DataType.INT64),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim)]
c = Collection("wire", CollectionSchema(fields), consistency_level="Bounded")
ids = np.arange(n, dtype=np.int64)
batches = [[ids[lo:lo + 1000].tolist(), (ids[lo:lo + 1000] % 10).tolist(), x[lo:lo + 1000]]
           for lo in range(0, n, 1000)]
print("ready", flush=True); sys.stdin.readline()
lat = []
t0 = time.perf_counter()
for b in batches:
    t = time.perf_counter(); c.insert(b); lat.append(time.perf_counter() - t)
wall = time.perf_counter() - t0
lat.sort()
p99 = lat[int(.99 * (len(lat) - 1))]
print(json.dumps({"batches": len(batches), "rows_per_s": n / wall,
                  "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": p99 * 1e3}))
"""

#: thread name prefixes merged into one row (numbered pool threads)
GROUPS = ("vectorlog-grpc", "ThreadPoolExecutor")


def group(name: str) -> str:
    """Returns the row a thread's CPU goes to: its name, or its pool's."""
    if name.endswith("(_serve)"):
        return "gRPC server poll (_serve)"
    return next((g for g in GROUPS if name.startswith(g)), name)


def thread_cpu() -> dict[str, float]:
    """Returns the CPU seconds of every thread of this process so far (the scheduler's run
    time, /proc/self/task/*/schedstat, in ns), by Python thread name (`group`); threads
    Python did not start, such as gRPC's and RocksDB's, as "native"."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for task in os.listdir("/proc/self/task"):
        try:
            ran = int(Path(f"/proc/self/task/{task}/schedstat").read_text().split()[0])
        except FileNotFoundError:
            continue
        name = group(names.get(int(task), "native"))
        out[name] = out.get(name, 0.0) + ran / 1e9
    return out


def one_round(python: Path, vectors: Path) -> dict[str, Any]:
    """Runs the workload once against a fresh server and cluster; returns its client-side
    figures, the server's CPU milliseconds per batch by thread, and the load average."""
    with tempfile.TemporaryDirectory(prefix="insert-threads-") as d, Client(d) as client:
        sys.setswitchinterval(client.cfg.gil_switch_interval_ms / 1000)
        port = free_port()
        server = start_grpc(client, f"127.0.0.1:{port}")
        try:
            proc = subprocess.Popen(
                [str(python), "-c", WORKLOAD, str(port), str(vectors)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdin is not None and proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            load, before = save.load1(), thread_cpu()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            figures = json.loads(proc.stdout.readline())
            after = thread_cpu()
            proc.wait(60)
        finally:
            server.stop(1.0)
    per = {k: (after[k] - before.get(k, 0.0)) * 1e3 / figures["batches"] for k in after}
    return figures | {"load1": load, "cpu_ms_per_batch": per}


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON and a markdown table: per round, the client's figures and each
    thread's CPU per batch (the busiest first)."""
    rounds = results["rounds"]
    total: dict[str, float] = {}
    for r in rounds:
        for k, ms in r["cpu_ms_per_batch"].items():
            total[k] = total.get(k, 0.0) + ms
    names = sorted((k for k in total if total[k] / len(rounds) >= 0.05), key=lambda k: -total[k])

    def cells(get: Any) -> list[str]:
        return [f"{get(r):,.0f}" if get(r) >= 100 else f"{get(r):.3g}" for r in rounds]

    rows = [
        ("1,000-row batches through pymilvus (rows/s)", *cells(lambda r: r["rows_per_s"])),
        ("  p50 per batch (ms)", *cells(lambda r: r["p50_ms"])),
        ("  p99 per batch (ms)", *cells(lambda r: r["p99_ms"])),
        ("  1-minute load at the start", *cells(lambda r: r["load1"])),
        (
            "server CPU per batch, all threads (ms)",
            *cells(lambda r: sum(r["cpu_ms_per_batch"].values())),
        ),
    ]
    rows += [(f"  {n}", *cells(lambda r, n=n: r["cpu_ms_per_batch"].get(n, 0.0))) for n in names]
    lines = [
        "# Where the server's CPU goes per 1,000-row insert (through pymilvus 2.3.8)",
        "",
        f"{results['rows']:,} GloVe-6B-50d rows in 1,000-row column batches, unique keys, "
        "into {id INT64, tag INT64, vector FLOAT_VECTOR(50)}; the gRPC server and the "
        "embedded cluster in one process (as `vectorlog serve`), each thread's CPU "
        "(its run time in /proc/self/task/*/schedstat) over the inserts divided by the "
        "batches. Pool threads are merged; "
        "`native`: threads Python did not start (gRPC's, RocksDB's).",
        f"Machine: {results['machine']}. Command: `python -m benchmarks.insert_threads "
        f"--rows {results['rows']} --rounds {len(rounds)}`.",
        "",
        *save.table(("measure", *[f"round {i + 1}" for i in range(len(rounds))]), rows, "l"),
        "",
    ]
    save.write(NAME, results, lines, out=out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args(argv)
    python = ensure_venv()
    x, _ = glove(args.rows)
    results: dict[str, Any] = {"rows": args.rows, "rounds": []}
    with tempfile.TemporaryDirectory() as tmp:
        vectors = Path(tmp) / "x.npy"
        np.save(vectors, x[: args.rows])
        for i in range(args.rounds):
            got = one_round(python, vectors)
            print(f"round {i + 1}: {json.dumps(got)}", flush=True)
            results["rounds"].append(got)
            time.sleep(1)
    results["machine"] = save.cores()
    write(results, args.out)


if __name__ == "__main__":
    main()
