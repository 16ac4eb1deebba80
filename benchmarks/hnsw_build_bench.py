"""HNSW build time (issue 28): vectorlog's index node, bare faiss and Milvus 2.3.5's, in wall
and CPU seconds, on the same GloVe-6B-50d rows (COSINE, M 16, efConstruction 100).

- bare faiss: IndexHNSWFlat(50, 16, inner product) over the L2-normalised rows, added in one
  call, with 1 OpenMP thread and with every core; this process's CPU seconds.
- vectorlog: `vectorlog serve` gets the rows through pymilvus 2.3.8 (1,000-row inserts,
  flush); then, timed, create_index to the index's state "Finished" (polled every 0.1 s);
  CPU seconds are the server process's (/proc/PID/stat) over that window.
- Milvus 2.3.5 standalone: the same pymilvus program and window, Milvus's process CPU.

A server's CPU over the window includes what it spends idle; its idle rate (CPU seconds per
second over 3 s before create_index) is reported beside it. The load average is read before
and after each figure: CPU seconds hardly move with the machine's load, wall seconds do.

    python -m benchmarks.hnsw_build_bench [--rows 100000,399000] [--rounds 1]
        [--faiss-threads 1,2]

Writes benchmarks/results/hnsw_build.json, .md and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from benchmarks import save
from benchmarks.server_serve import Ports, child, free_port, serve_command
from infra.milvus_server import MilvusServer, ensure_venv
from vectorlog.demo.datasets import glove

NAME = "hnsw_build"
M, EF_CONSTRUCTION = 16, 100
IDLE_S = 3.0

#: run with the Milvus venv's python: loads the rows, prints "flushed", waits for a line on
#: stdin, then builds the index (M and efConstruction: argv 3 and 4) and prints {"build_s": ...}
WORKLOAD = r"""
import json, sys, time
import numpy as np
from pymilvus import Collection, CollectionSchema, DataType, FieldSchema, connections
from pymilvus.client.types import IndexState

host, port = sys.argv[1].split(":")
connections.connect(host=host, port=port)
x = np.load(sys.argv[2]); n, dim = x.shape
fields = [FieldSchema("id", DataType.INT64, is_primary=True),
          FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim)]
c = Collection("hb", CollectionSchema(fields), consistency_level="Bounded")
ids = np.arange(n, dtype=np.int64)
for lo in range(0, n, 1000):
    c.insert([ids[lo:lo + 1000].tolist(), x[lo:lo + 1000]])
c.flush()
print("flushed", flush=True)
sys.stdin.readline()
t = time.perf_counter()
c.create_index("vector", {"index_type": "HNSW", "metric_type": "COSINE",
                          "params": {"M": int(sys.argv[3]),
                                     "efConstruction": int(sys.argv[4])}})
h = connections._fetch_handler("default")
while True:
    state, reason = h.get_index_state("hb", "", field_name="vector")
    if state == IndexState.Finished:
        break
    if state == IndexState.Failed:
        raise SystemExit(f"the build failed: {reason}")
    time.sleep(0.1)
print(json.dumps({"build_s": time.perf_counter() - t}), flush=True)
"""


def cpu_seconds(pid: int) -> float:
    """Returns the user + system CPU seconds of process `pid` (all its threads) so far."""
    return cpu_seconds_of(Path(f"/proc/{pid}/stat"))


def thread_cpu(pid: int) -> dict[str, float]:
    """Returns the CPU seconds so far of each thread of process `pid` (by thread id)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = cpu_seconds_of(task / "stat")
        except OSError:  # the thread ended meanwhile
            continue
    return out


def cpu_seconds_of(stat: Path) -> float:
    """Returns the user + system CPU seconds in a /proc stat file."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busiest(before: dict[str, float], after: dict[str, float], n: int = 3) -> list[float]:
    """Returns the `n` largest per-thread CPU seconds between two thread_cpu readings."""
    spent = sorted((after[t] - before.get(t, 0.0) for t in after), reverse=True)
    return [round(s, 1) for s in spent[:n]]


def load() -> float:
    """Returns the 1-minute load average."""
    return round(save.load1(), 1)


def bare_faiss(x: np.ndarray, threads: int) -> dict[str, Any]:
    """Returns the wall and CPU seconds of faiss adding `x` (normalised) to an HNSW index."""
    xn = np.array(x, dtype=np.float32, copy=True)
    faiss.normalize_L2(xn)
    faiss.omp_set_num_threads(threads)
    index = faiss.IndexHNSWFlat(xn.shape[1], M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    before, wall, cpu = load(), time.perf_counter(), time.process_time()
    index.add(xn)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "threads": threads, "load": [before, load()]}


def bare_faiss_apart(vectors: Path, threads: int) -> dict[str, Any]:
    """Returns bare_faiss's figures from a child process in a session of its own, as the
    servers run (with autogroup scheduling each session is one CPU-sharing group)."""
    code = "import json, sys, numpy as np; from benchmarks.hnsw_build_bench import bare_faiss; "
    code += "print(json.dumps(bare_faiss(np.load(sys.argv[1]), int(sys.argv[2]))))"
    res = subprocess.run(
        [sys.executable, "-c", code, str(vectors), str(threads)],
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
    )
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def through_server(pid: int, python: Path, port: int, vectors: Path) -> dict[str, Any]:
    """Runs WORKLOAD against the server (process `pid`); returns the build's wall seconds,
    the server's CPU seconds meanwhile, its idle CPU rate and the load averages."""
    cmd = [str(python), "-c", WORKLOAD, f"127.0.0.1:{port}", str(vectors), str(M)]
    cmd.append(str(EF_CONSTRUCTION))
    with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        if proc.stdout.readline().strip() != "flushed":
            raise RuntimeError(f"the workload failed before the build (exit {proc.wait()})")
        idle = cpu_seconds(pid)
        time.sleep(IDLE_S)
        before, started, threads = load(), cpu_seconds(pid), thread_cpu(pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        cpu, busy = cpu_seconds(pid) - started, busiest(threads, thread_cpu(pid))
        if proc.wait() != 0 or not line:
            raise RuntimeError(f"the workload failed during the build (exit {proc.returncode})")
    return {
        "wall_s": float(json.loads(line)["build_s"]),
        "cpu_s": cpu,
        "idle_cpu_per_s": (started - idle) / IDLE_S,
        "busiest_threads_cpu_s": busy,
        "load": [before, load()],
    }


def vectorlog_round(python: Path, vectors: Path, tmp: Path) -> dict[str, Any]:
    """Returns through_server's figures for a fresh `vectorlog serve`."""
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        ports = Ports(free_port(), free_port())
        health = f"http://127.0.0.1:{ports.rest}/healthz"
        with child(serve_command(d, ports), health, new_session=True) as proc:
            return through_server(proc.pid, python, ports.grpc, vectors)


def milvus_round(python: Path, vectors: Path, tmp: Path) -> dict[str, Any]:
    """Returns through_server's figures for a fresh Milvus 2.3.5 standalone."""
    with tempfile.TemporaryDirectory(dir=tmp) as d, MilvusServer(Path(d), python) as m:
        assert m.proc is not None
        return through_server(m.proc.pid, python, m.port, vectors)


def measure(
    rows: int, rounds: int, python: Path, tmp: Path, faiss_threads: list[int]
) -> dict[str, Any]:
    """Returns every round's figures for `rows` GloVe rows (bare faiss with each of
    `faiss_threads` threads, then both servers)."""
    x, _ = glove(rows)
    vectors = tmp / f"x{rows}.npy"
    np.save(vectors, x)
    out: dict[str, Any] = {"rows": len(x), "rounds": []}
    for i in range(rounds):
        got = {f"faiss_{t}": bare_faiss_apart(vectors, t) for t in faiss_threads}
        servers = [("vectorlog", vectorlog_round), ("milvus", milvus_round)]
        for key, run in servers[:: 1 if i % 2 == 0 else -1]:  # alternate who goes first
            got[key] = run(python, vectors, tmp)
        print(f"{len(x)} rows, round {i + 1}: {json.dumps(got)}", flush=True)
        out["rounds"].append(got)
    return out


LABELS = {
    "faiss_1": "bare faiss, 1 thread",
    "vectorlog": "vectorlog serve, create_index to Finished",
    "milvus": "Milvus 2.3.5, create_index to Finished",
}


def _label(key: str) -> str:
    return LABELS.get(key, f"bare faiss, {key.rsplit('_', 1)[-1]} threads")


def write(results: dict[str, Any], out: Path) -> None:
    """Writes the JSON, the markdown table (one line per round and builder) and the plot."""
    lines = [
        "# HNSW build: vectorlog, bare faiss and Milvus 2.3.5 (wall and CPU seconds)",
        "",
        f"GloVe-6B-50d rows, COSINE, HNSW M {M} efConstruction {EF_CONSTRUCTION}. Machine: "
        f"{results['machine']}. Command: `python -m benchmarks.hnsw_build_bench`.",
        "Servers: pymilvus 2.3.8, 1,000-row inserts, flush, then create_index to the state",
        "Finished (polled every 0.1 s); CPU seconds are the server process's over that window",
        "(idle rate: its CPU seconds per second before create_index). Bare faiss: one add of the",
        "normalised rows, this process's CPU seconds. Load: 1-minute average before / after.",
        "",
        *save.table(
            ("rows", "round", "builder", "wall (s)", "CPU (s)", "idle CPU/s",
             "busiest threads (CPU s)", "load"),
            [_row(size["rows"], i, key, r) for size in results["sizes"]
             for i, rnd in enumerate(size["rounds"], 1) for key, r in rnd.items()],
            align="l" * 8,
        ),
    ]  # fmt: skip
    lines += ["", *results.get("notes", []), "", f"![build CPU seconds]({NAME}.png)"]
    save.write(NAME, results, lines, out=out)
    _plot(results, out)


def _row(rows: int, i: int, key: str, r: dict[str, Any]) -> tuple[object, ...]:
    """Returns one round's table row for one builder."""
    idle = f"{r['idle_cpu_per_s']:.2f}" if "idle_cpu_per_s" in r else ""
    busy = ", ".join(str(s) for s in r.get("busiest_threads_cpu_s", []))
    return (f"{rows:,}", i, _label(key), f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}", idle, busy,
            f"{r['load'][0]} / {r['load'][1]}")  # fmt: skip


def _plot(results: dict[str, Any], out: Path) -> None:
    fig, axes = save.pyplot().subplots(1, 2, figsize=(9, 3.4))
    for ax, what in zip(axes, ("cpu_s", "wall_s"), strict=True):
        for size in results["sizes"]:
            keys = list(size["rounds"][0])
            means = [np.mean([r[k][what] for r in size["rounds"]]) for k in keys]
            ax.barh([f"{_label(k)} ({size['rows'] // 1000}k)" for k in keys], means)
        ax.set_xlabel("CPU seconds" if what == "cpu_s" else "wall seconds")
        ax.tick_params(axis="y", labelsize=7)
    save.plot(fig, out / f"{NAME}.png")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000", help="comma-separated sizes")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--faiss-threads",
        default=f"1,{os.cpu_count() or 1}",
        help="comma-separated thread counts of the bare faiss builds ('' for none)",
    )
    parser.add_argument("--out", type=Path, default=save.RESULTS)
    args = parser.parse_args(argv)
    python = ensure_venv()
    sizes = [int(r) for r in args.rows.split(",")]
    threads = [int(t) for t in args.faiss_threads.split(",") if t.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        measured = [measure(n, args.rounds, python, Path(tmp), threads) for n in sizes]
    machine = save.cores(f"faiss {faiss.__version__}")
    write({"machine": machine, "sizes": measured}, args.out)


if __name__ == "__main__":
    main()
