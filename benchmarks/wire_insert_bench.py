"""Inserts through the same client with the server's CPU: one pymilvus 2.3.8 program against
the real Milvus 2.3.5 standalone and against `vectorlog serve`, in interleaved rounds (issue 28).

The program (WORKLOAD, run by the Milvus venv's python: infra/milvus_server.py) creates a
collection {id INT64 primary, tag INT64, vector FLOAT_VECTOR(50)}, then, each phase started
when this process says so: inserts of 1,000-row column batches of GloVe-6B-50d rows
(`--rows`), then single-row inserts (`--single-rows`, p50/p99 of a call). Around each phase
this process reads the server process's CPU seconds (/proc, all its threads), so a round
gives the server's CPU per call next to the client's rows/s and latency, and the machine's
load average at its start.

    python -m benchmarks.wire_insert_bench [--rows 50000] [--single-rows 500] [--rounds 3]
        [--out benchmarks/results]

Writes wire_insert.json, .md and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, free_port, serve_command
from infra.milvus_server import MilvusServer, ensure_venv
from vectorlog.demo.datasets import glove

NAME = "wire_insert"
SERVERS = ("milvus", "vectorlog")

WORKLOAD = r"""
import json, sys, time
import numpy as np
from pymilvus import Collection, CollectionSchema, DataType, FieldSchema, connections, utility

host, port = sys.argv[1].split(":")
cfg = json.loads(sys.stdin.readline())
connections.connect(host=host, port=port)
x = np.load(cfg["vectors"]); n, dim = x.shape
fields = [FieldSchema("id", DataType.INT64, is_primary=True), FieldSchema("tag", DataType.INT64),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim)]
if utility.has_collection("wire"):
    utility.drop_collection("wire")
c = Collection("wire", CollectionSchema(fields), consistency_level="Bounded")
ids = np.arange(n, dtype=np.int64)
def batch(lo, hi):
    c.insert([ids[lo:hi].tolist(), (ids[lo:hi] % 10).tolist(), x[lo:hi]])
def phase(name):
    print("GO " + name, flush=True); sys.stdin.readline()
    return time.perf_counter(), time.process_time()
batch(0, 1000)  # warm up
t, cpu = phase("batches")
for lo in range(0, n, 1000):
    batch(lo, min(n, lo + 1000))
wall = time.perf_counter() - t
print(json.dumps({"rows_per_s": n / wall, "calls": -(-n // 1000),
                  "client_cpu_s": time.process_time() - cpu}), flush=True)
lat = []
t, cpu = phase("single")
for i in range(cfg["single_rows"]):
    t = time.perf_counter()
    c.insert([[n + i], [0], x[i : i + 1]])
    lat.append(time.perf_counter() - t)
lat.sort()
p99 = lat[int(0.99 * (len(lat) - 1))]
print(json.dumps({"p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": p99 * 1e3, "calls": len(lat),
                  "client_cpu_s": time.process_time() - cpu}), flush=True)
"""


def cpu_seconds(pid: int) -> float:
    """Returns the user + system CPU seconds of process `pid` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(python: Path, port: int, pid: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs the workload against the server at `port` (process `pid`); returns per phase
    the client's figures, the server's CPU ms per call and the load average at its start."""
    cmd = [str(python), "-c", WORKLOAD, f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(cfg) + "\n")
    proc.stdin.flush()
    out: dict[str, Any] = {}
    for line in proc.stdout:
        if not line.startswith("GO "):
            raise RuntimeError(f"the workload said {line!r}")
        load, before = save.load1(), cpu_seconds(pid)
        proc.stdin.write("\n")
        proc.stdin.flush()
        got = json.loads(proc.stdout.readline())
        got["server_cpu_ms_per_call"] = (cpu_seconds(pid) - before) * 1e3 / got["calls"]
        out[line.split()[1]] = got | {"load": load}
    if proc.wait(timeout=600) != 0 or len(out) != 2:
        raise RuntimeError(f"the workload failed against port {port}")
    return out


@contextmanager
def server(kind: str, python: Path, data_dir: Path) -> Iterator[tuple[int, int]]:
    """Runs a fresh `kind` server in `data_dir`; yields (its gRPC port, its pid)."""
    if kind == "milvus":
        with MilvusServer(data_dir, python) as m:
            assert m.proc is not None
            yield m.port, m.proc.pid
        return
    ports = Ports(free_port(), free_port())
    health = f"http://127.0.0.1:{ports.rest}/healthz"
    with child(serve_command(str(data_dir), ports), health, new_session=True) as proc:
        yield ports.grpc, proc.pid


def ratio(rounds: list[dict[str, Any]], phase: str, key: str) -> float:
    """Returns vectorlog's mean over Milvus's mean of `key` in `phase`, rounds pooled."""
    mean = {s: np.mean([r[s][phase][key] for r in rounds]) for s in SERVERS}
    return float(mean["vectorlog"] / mean["milvus"])


ROWS = (
    ("1,000-row batches: rows/s", "batches", "rows_per_s", ""),
    ("  server CPU per batch (ms)", "batches", "server_cpu_ms_per_call", " (lower is better)"),
    ("single-row insert p50 (ms)", "single", "p50_ms", " (lower is better)"),
    ("single-row insert p99 (ms)", "single", "p99_ms", " (lower is better)"),
    ("  server CPU per call (ms)", "single", "server_cpu_ms_per_call", " (lower is better)"),
)


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON, the markdown table (each round's figures, its load) and the plot."""
    rounds = results["rounds"]
    lines = [
        "# Inserts through pymilvus 2.3.8: Milvus 2.3.5 and vectorlog, with the server's CPU",
        "",
        f"{results['rows']:,} GloVe-6B-50d rows in 1,000-row batches, then "
        f"{results['single_rows']} single-row inserts; each server fresh, one at a time, in "
        f"interleaved rounds. Machine: {results['machine']}. Load average at each round's "
        f"batches (Milvus / vectorlog): {results['loads']}.",
        f"Command: `python -m benchmarks.wire_insert_bench --rounds {len(rounds)}`.",
        "",
        *save.table(
            ("measure", "Milvus 2.3.5", "vectorlog", "vectorlog / Milvus"),
            [(label, *(" / ".join(_fmt(r[s][phase][key]) for r in rounds) for s in SERVERS),
              f"{ratio(rounds, phase, key):.2f}{note}") for label, phase, key, note in ROWS],
            "llll",
        ),
    ]  # fmt: skip
    lines += ["", *results.get("notes", []), "", f"![ratios]({NAME}.png)"]
    save.write(NAME, results, lines, out=out)
    _plot(rounds, out)


def _fmt(v: float) -> str:
    return f"{v:,.3g}" if v < 100 else f"{v:,.0f}"


def _plot(rounds: list[dict[str, Any]], out: Path) -> None:
    fig, ax = save.pyplot().subplots(figsize=(7, 3.0))
    ax.barh([r[0].strip() for r in ROWS], [ratio(rounds, p, k) for _, p, k, _ in ROWS])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("vectorlog / Milvus 2.3.5 (rows/s: higher is better; others: lower)")
    save.plot(fig, out / f"{NAME}.png")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--single-rows", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args(argv)
    python = ensure_venv()
    x, _ = glove(args.rows)
    results: dict[str, Any] = {"rows": args.rows, "single_rows": args.single_rows, "rounds": []}
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "x.npy", x)
        cfg = {"vectors": f"{tmp}/x.npy", "single_rows": args.single_rows}
        for i in range(args.rounds):
            got = {}
            for kind in SERVERS:
                with tempfile.TemporaryDirectory(dir=tmp) as d, server(kind, python, Path(d)) as s:
                    got[kind] = drive(python, s[0], s[1], cfg)
            print(f"round {i + 1}: {json.dumps(got)}", flush=True)
            results["rounds"].append(got)
            finish(results, args.out)  # each round's figures kept should a later round fail


def finish(results: dict[str, Any], out: Path) -> None:
    """Notes the machine and each round's load, then writes the results."""
    results["loads"] = ", ".join(
        f"{r['milvus']['batches']['load']:.0f}/{r['vectorlog']['batches']['load']:.0f}"
        for r in results["rounds"]
    )
    results["machine"] = save.cores()
    write(results, out)


if __name__ == "__main__":
    main()
