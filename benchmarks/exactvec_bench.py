"""Exact output vectors (COSINE keeps the inserted vectors beside the normalized ones): the
CPU time of one query per call (no output fields) on growing and on HNSW-sealed COSINE
segments, and what a sealed segment holds, for the code of this tree and, with --before DIR,
of a checkout of the code before, in alternating rounds (each a child process).

Run: python -m benchmarks.exactvec_bench [--before DIR] [--rows N] [--rounds R]
Writes benchmarks/results/exactvec.json, exactvec.md and exactvec.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def child(rows: int, dim: int, calls: int) -> dict[str, Any]:
    """Runs one round in this process (importing vectorlog from PYTHONPATH); returns its
    figures: CPU and wall microseconds per one-query call, growing then sealed, and the bytes
    a sealed segment holds."""
    import numpy as np

    from vectorlog import Client, DataType
    from vectorlog.sdk import probes

    rng = np.random.default_rng(3)
    data = rng.standard_normal((rows, dim)).astype(np.float32)
    queries = rng.standard_normal((calls, dim)).astype(np.float32).tolist()
    client = Client(tempfile.mkdtemp(prefix="exactvec"))
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    ip = client.prepare_index_params()
    ip.add_index(
        "vector", index_type="HNSW", metric_type="COSINE", params={"M": 16, "efConstruction": 64}
    )
    client.create_collection("b", schema=s, index_params=ip, consistency_level="Strong")
    for lo in range(0, rows, 5000):
        batch = range(lo, min(rows, lo + 5000))
        client.insert("b", [{"id": i, "vector": data[i].tolist()} for i in batch])
    out: dict[str, Any] = {"growing": per_call(client, queries)}
    client.flush("b")
    cid = client.describe_collection("b")["collection_id"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        segs = [x for x in probes.served_segments(client, cid) if x.rows]
        if sum(x.rows for x in segs) == rows and all(x.indexed for x in segs):
            break
        time.sleep(0.5)
    out["sealed"] = per_call(client, queries)
    out["bytes"] = held(client, cid)
    client.close()
    return out


def per_call(client: Any, queries: list[list[float]]) -> dict[str, float]:
    """Returns the CPU (process) and wall microseconds per one-query search, after 20 untimed."""
    for q in queries[:20]:
        client.search("b", [q], limit=10)
    cpu, wall = time.process_time(), time.perf_counter()
    for q in queries:
        client.search("b", [q], limit=10)
    n = len(queries)
    return {
        "cpu_us": (time.process_time() - cpu) / n * 1e6,
        "wall_us": (time.perf_counter() - wall) / n * 1e6,
    }


def held(client: Any, cid: int) -> dict[str, int]:
    """Returns the bytes the sealed segments hold: index (serialized), flat copy, raw vectors,
    norms."""
    import faiss

    out = {"index": 0, "flat": 0, "raw": 0, "norms": 0}
    for col in client.cluster.querynode.replicas[cid].vectors.values():
        for seg in col.segs:
            if seg.index is not None:
                out["index"] += int(faiss.serialize_index(seg.index.index).nbytes)
            if seg.flat is not None:
                out["flat"] += int(seg.flat.ntotal) * seg.dim * 4
            raw = getattr(seg, "raw", None)
            out["raw"] += 0 if raw is None else int(raw.view().nbytes)
            out["norms"] += int(seg.norms.view().nbytes)
    return out


def round_of(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Runs one round in a child process importing vectorlog from `code`."""
    cmd = [sys.executable, str(HERE), "--child", "--rows", str(args.rows), "--dim", str(args.dim)]
    cmd += ["--calls", str(args.calls)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="a checkout of the code before, to compare")
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.rows, args.dim, args.calls)))
        return
    codes = {"after": HERE.parent.parent} | ({"before": args.before} if args.before else {})
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in codes}
    for _ in range(args.rounds):
        for name, code in sorted(codes.items(), reverse=True):  # before, then after
            runs[name].append(round_of(code, args))
    report(args, runs)


def report(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> None:
    """Writes the JSON, the markdown page and the plot."""
    from benchmarks import save  # here: a child runs this file on a tree that may lack it

    summary = {
        name: {
            phase: {m: statistics.median(r[phase][m] for r in rs) for m in ("cpu_us", "wall_us")}
            for phase in ("growing", "sealed")
        }
        | {"bytes": rs[-1]["bytes"]}
        for name, rs in runs.items()
    }
    load = save.load1()
    meta = {"rows": args.rows, "dim": args.dim, "calls": args.calls, "rounds": args.rounds}
    payload = {**meta, "load": load, "runs": runs, "median": summary}
    save.write("exactvec", payload, page(args, load, summary))
    plot(runs)


def page(args: argparse.Namespace, load: float, summary: dict[str, Any]) -> list[str]:
    """Returns the markdown page's lines: what was measured, the table of medians, the note."""
    from benchmarks import save  # here: a child runs this file on a tree that may lack it

    lines = [
        "# Exact output vectors: one-query search cost and sealed segment memory (COSINE)",
        "",
        f"{args.rows} rows x {args.dim} float32, HNSW M=16 efConstruction=64, limit 10, no "
        f"output fields; {args.calls} one-query calls per phase, median of {args.rounds} "
        f"alternating rounds (child processes); {os.cpu_count()} cores, load {load:.0f}.",
        "",
        *save.table(
            ("code", "growing CPU us/call", "sealed CPU us/call", "growing wall", "sealed wall",
             "index B", "flat B", "raw B", "norms B"),
            [_cells(name, s) for name, s in summary.items()],
            align="l" * 9,
        ),
    ]  # fmt: skip
    return lines + [
        "",
        "CPU is the process's (every thread's) per call. `after` keeps COSINE's inserted "
        "vectors (`raw`) beside the normalized copy the search reads, so the search path is "
        "unchanged; a sealed HNSW segment then holds raw (4 x dim B a row) beside its index.",
        "",
        "Command: `python -m benchmarks.exactvec_bench --before <checkout>`",
        "",
    ]


def _cells(name: str, s: dict[str, Any]) -> tuple[object, ...]:
    """Returns a code's table row: CPU then wall us per call, growing and sealed; its bytes."""
    us = [f"{s[phase][m]:.0f}" for m in ("cpu_us", "wall_us") for phase in ("growing", "sealed")]
    return (name, *us, *(s["bytes"][k] for k in ("index", "flat", "raw", "norms")))


def plot(runs: dict[str, list[dict[str, Any]]]) -> None:
    from benchmarks import save  # here: a child runs this file on a tree that may lack it

    fig, ax = save.pyplot().subplots(figsize=(6, 3.5))
    for i, (name, rs) in enumerate(sorted(runs.items())):
        for j, phase in enumerate(("growing", "sealed")):
            ys = [r[phase]["cpu_us"] for r in rs]
            ax.scatter([j * 3 + i] * len(ys), ys, label=f"{name} {phase}")
    ax.set_xticks([0.5, 3.5], ["growing", "HNSW sealed"])
    ax.set_ylabel("CPU us per one-query search")
    ax.legend(fontsize=7)
    save.plot(fig, save.RESULTS / "exactvec.png")


if __name__ == "__main__":
    main()
