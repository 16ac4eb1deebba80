"""Memory of vectorlog holding the benchmark's rows with their HNSW index, measured in a child
process per phase, so neither bare faiss nor Milvus Lite pollutes the figures.

    python -m benchmarks.search_memory --phase baseline|hold|reopen --rows N --queries Q
        --dir DIR [--timeout S]

baseline: imports vectorlog and loads the rows; hold: a fresh embedded cluster in DIR gets the
rows (the loaded copy is dropped after the insert), is flushed, its index waited for, and a few
queries searched; reopen: the cluster left in DIR is reopened and searched. Prints one JSON
line: current RSS after each step and the peak (VmHWM), in MB.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from benchmarks.search_data import HNSW_PARAMS, K, row_batches, split
from benchmarks.search_product import create, insert, wait_index
from benchmarks.search_timing import child_json, peak_mb, rss_mb
from vectorlog import Client

NAME, PROBES = "memory", 20
#: a child may take this long beyond its index wait (load, ingest, flush, start-up)
KILL_MARGIN_S = 300.0


def probe(client: Client, queries: Any, start: float) -> float:
    """Searches PROBES queries (loading what a search loads); returns the seconds from the
    perf_counter `start` to the first result."""
    first = None
    for q in queries[:PROBES]:
        client.search(NAME, [q], limit=K, search_params={"params": {"ef": 64}})
        first = time.perf_counter() - start if first is None else first
    return first or 0.0


def hold(args: argparse.Namespace, steps: dict[str, float]) -> dict[str, Any]:
    """Fills, flushes and indexes a fresh cluster; returns the rows and the index wait."""
    base, queries = split(args.rows, args.queries)
    steps["data_loaded"] = rss_mb()
    with Client(args.dir) as client:
        create(client, NAME, base.shape[1])
        _, rows = insert(client, NAME, row_batches(base))
        del base
        steps["inserted"] = rss_mb()
        client.flush(NAME, timeout=args.timeout)
        steps["flushed"] = rss_mb()
        index = wait_index(client, NAME, rows, time.perf_counter(), args.timeout)
        steps["index_waited"] = rss_mb()
        probe(client, queries, time.perf_counter())
        steps["searched"] = rss_mb()
    return {"rows": rows, "index": index}


def reopen(args: argparse.Namespace, steps: dict[str, float]) -> dict[str, Any]:
    """Reopens the cluster `hold` left; returns the seconds from opening to a first result."""
    _, queries = split(args.rows, args.queries)
    start = time.perf_counter()
    with Client(args.dir) as client:
        steps["opened"] = rss_mb()
        first = probe(client, queries, start)
        steps["searched"] = rss_mb()
    return {"open_to_first_result_s": first}


def baseline(args: argparse.Namespace, steps: dict[str, float]) -> dict[str, Any]:
    """Loads the rows only; returns how many."""
    base, _ = split(args.rows, args.queries)
    steps["data_loaded"] = rss_mb()
    return {"rows": len(base)}


PHASES = {"baseline": baseline, "hold": hold, "reopen": reopen}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--phase", required=True, choices=sorted(PHASES))
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--queries", type=int, required=True)
    ap.add_argument("--dir", default="")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args(argv)
    steps: dict[str, float] = {"imported": rss_mb()}
    extra = PHASES[args.phase](args, steps)
    out = {"phase": args.phase, "rss_mb": steps, "peak_rss_mb": peak_mb(), **extra}
    print(json.dumps({**out, "hnsw": HNSW_PARAMS}))


def measure(phase: str, rows: int, queries: int, directory: str, timeout: float) -> dict:
    """Runs one phase in a child process (waiting up to `timeout` s for the index, killed
    after `timeout` + KILL_MARGIN_S); returns its JSON, or {"phase", "error"} if it failed."""
    cmd = [sys.executable, "-m", "benchmarks.search_memory", "--phase", phase]
    cmd += ["--rows", str(rows), "--queries", str(queries), "--dir", directory]
    cmd += ["--timeout", str(timeout)]
    return {"phase": phase, **child_json(cmd, timeout + KILL_MARGIN_S)}


if __name__ == "__main__":
    main()
