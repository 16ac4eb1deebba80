"""Search calls benchmark (issue 28): one query per call next to bare faiss, in process
(`vectorlog.Client.search`, Bounded) and through pymilvus against `vectorlog serve`, in
alternating rounds; and one large answer (100 queries x top 100 with an output field) through
pymilvus, where the server builds the response from the result's arrays. Writes
search_calls.json, .md and .png (default: benchmarks/results/).

    python -m benchmarks.search_calls_bench [--rows 100000] [--queries 500] [--rounds 5]
        [--baseline search_calls.json of an earlier commit] [--out DIR]

GloVe-6B-50d, COSINE, HNSW as search_bench (search_data.HNSW_PARAMS), at the ef bare faiss
needs for recall@10 >= 0.95 (search_faiss.sweep). Each round times bare faiss's per-query
search then vectorlog's on the same queries, wall and CPU time (CPU: this process's; through
pymilvus, this process's plus the server child's), so the ratio of a round is measured under
the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import MilvusClient

from benchmarks import save, search_faiss
from benchmarks.search_data import Data, K, load, recall, row_batches
from benchmarks.search_product import build
from benchmarks.server_serve import Ports, child, free_port, serve_command
from vectorlog import Client

NAME = "calls"
#: the large answer: queries per call, top-k, and the output field it carries
BIG_NQ, BIG_K = 100, 100


def child_cpu(pid: int) -> float:
    """Returns the CPU seconds (user + system) process `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_calls(
    one: Callable[[np.ndarray], list[int]], queries: np.ndarray, pid: int | None = None
) -> dict[str, Any]:
    """Calls `one` per query; returns {wall_us, cpu_us} per call and the ids found. CPU: of
    the calling thread (in process: the cluster's background threads excluded), or with a
    child `pid`, of this process and of the child."""
    clock = time.process_time if pid else time.thread_time
    found = []
    cpu0, child0, wall0 = clock(), child_cpu(pid) if pid else 0.0, time.perf_counter()
    for q in queries:
        found.append(one(q))
    wall = time.perf_counter() - wall0
    cpu = clock() - cpu0 + (child_cpu(pid) - child0 if pid else 0.0)
    n = len(queries)
    return {"wall_us": wall / n * 1e6, "cpu_us": cpu / n * 1e6, "found": found}


def rounds(
    bare: Callable[[np.ndarray], list[int]],
    ours: Callable[[np.ndarray], list[int]],
    data: Data,
    count: int,
    pid: int | None = None,
) -> list[dict[str, Any]]:
    """Returns `count` rounds of bare faiss then `ours` (after 20 warm-up calls each)."""
    for q in data.queries[:20]:
        bare(q)
        ours(q)
    out = []
    for _ in range(count):
        b = timed_calls(bare, data.queries_n)
        o = timed_calls(ours, data.queries, pid)
        out.append(
            {
                "bare": {k: v for k, v in b.items() if k != "found"},
                "ours": {k: v for k, v in o.items() if k != "found"},
                "ratio_wall": b["wall_us"] / o["wall_us"],
                "ratio_cpu": b["cpu_us"] / o["cpu_us"],
                "recall_bare": recall(b["found"], data.gt),
                "recall_ours": recall(o["found"], data.gt),
            }
        )
    return out


def served(tmp: str, data: Data, ef: int, bare: Any, count: int) -> dict[str, Any]:
    """Returns the pymilvus rounds and the large answer's figures against `vectorlog serve`
    on the cluster in `tmp`."""
    ports = Ports(free_port(), free_port())
    with child(serve_command(tmp, ports), f"http://127.0.0.1:{ports.rest}/healthz") as proc:
        milvus = MilvusClient(f"http://127.0.0.1:{ports.grpc}")
        params = {"params": {"ef": ef}}

        def one(q: np.ndarray) -> list[int]:
            hits = milvus.search(NAME, [q.tolist()], limit=K, search_params=params)
            return [int(h["id"]) for h in hits[0]]

        per_call = rounds(bare, one, data, count, proc.pid)
        big_q = [q.tolist() for q in data.queries[:BIG_NQ]]
        big = []
        for _ in range(count):
            start = time.perf_counter()
            hits = milvus.search(
                NAME, big_q, limit=BIG_K, search_params=params, output_fields=["bucket"]
            )
            big.append(time.perf_counter() - start)
        milvus.close()
    hits_n = sum(len(h) for h in hits)
    return {"rounds": per_call, "big_answer_ms": [s * 1e3 for s in big], "big_hits": hits_n}


def response_build(hits: int = 1000) -> dict[str, float]:
    """Returns µs to build and serialize the ids, scores and topks of a SearchResultData of
    `hits` hits each way measured: from per-hit dicts (the server before issue 28), repeated
    fields given to the constructor as lists, extended from numpy arrays, extended from
    lists (.tolist(); what grpc_data.search_result does)."""
    import timeit

    from pymilvus.grpc_gen import schema_pb2 as pb

    ids = np.arange(hits, dtype=np.int64) * 7919
    dist = np.random.default_rng(0).random(hits).astype(np.float32)

    def dicts() -> bytes:
        flat = [{"id": i, "distance": d} for i, d in zip(ids.tolist(), dist.tolist(), strict=True)]
        ids_pb = pb.IDs(int_id=pb.LongArray(data=[int(h["id"]) for h in flat]))
        scores = [float(h["distance"]) for h in flat]
        return pb.SearchResultData(scores=scores, ids=ids_pb, topks=[hits]).SerializeToString()

    def constructor() -> bytes:
        ids_pb = pb.IDs(int_id=pb.LongArray(data=ids.tolist()))
        return pb.SearchResultData(
            scores=dist.tolist(), ids=ids_pb, topks=[hits]
        ).SerializeToString()

    def extend_numpy() -> bytes:
        m = pb.SearchResultData(topks=[hits])
        m.scores.extend(dist)
        m.ids.int_id.data.extend(ids)
        return m.SerializeToString()

    def extend_lists() -> bytes:
        m = pb.SearchResultData(topks=[hits])
        m.scores.extend(dist.tolist())
        m.ids.int_id.data.extend(ids.tolist())
        return m.SerializeToString()

    ways = (dicts, constructor, extend_numpy, extend_lists)
    assert len({f() for f in ways}) == 1, "every way must build the same message"
    return {f.__name__: min(timeit.repeat(f, number=100, repeat=9)) / 100 * 1e6 for f in ways}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Runs both parts; returns the results."""
    load_before = save.loadavg()
    data = load(args.rows, args.queries)
    index, anchor = search_faiss.run(data)
    ef = anchor["ef"]
    index.hnsw.efSearch = ef

    def bare(q: np.ndarray) -> list[int]:
        return index.search(q[None], K)[1][0].tolist()

    with tempfile.TemporaryDirectory() as tmp:
        with Client(tmp) as c:
            built = build(c, NAME, data, list(row_batches(data.base)), args.index_timeout)
            params = {"params": {"ef": ef}}

            def ours(q: np.ndarray) -> list[int]:
                hits = c.search(
                    NAME, [q], limit=K, search_params=params, consistency_level="Bounded"
                )
                return [int(h["id"]) for h in hits[0]]

            in_process = rounds(bare, ours, data, args.rounds)
        wire = served(tmp, data, ef, bare, args.rounds)
    return {
        "benchmark": "search_calls",
        "params": {"rows": args.rows, "queries": args.queries, "ef": ef, "k": K},
        "segments": built["segments"],
        "in_process": in_process,
        "pymilvus": wire,
        "response_build_us_1000_hits": response_build(),
        "median_ratio_cpu": {
            "in_process": float(np.median([r["ratio_cpu"] for r in in_process])),
            "pymilvus": float(np.median([r["ratio_cpu"] for r in wire["rounds"]])),
        },
        "machine": {**save.machine(), "loadavg_at_start": load_before},
        "loadavg_at_end": save.loadavg(),
    }


def _row(label: str, r: dict[str, Any]) -> tuple[str, ...]:
    b, o = r["bare"], r["ours"]
    return (label, f"{b['wall_us']:.0f}", f"{o['wall_us']:.0f}", f"{r['ratio_wall']:.2f}",
            f"{b['cpu_us']:.0f}", f"{o['cpu_us']:.0f}", f"{r['ratio_cpu']:.2f}",
            f"{r['recall_bare']:.3f} / {r['recall_ours']:.3f}")  # fmt: skip


def markdown(res: dict[str, Any]) -> str:
    """Returns the results page."""
    p, m = res["params"], res["machine"]
    lines = [
        "# Search calls: one query per call against bare faiss (issue 28)",
        "",
        f"GloVe-6B-50d, {p['rows']:,} rows ({res['segments']} segment), {p['queries']} held-out "
        f"queries, COSINE, HNSW, ef {p['ef']}, k={p['k']}. Each round: bare faiss's per-query "
        "search, then vectorlog's on the same queries. CPU in process: the calling thread's; "
        "through pymilvus: the benchmark process's plus the server's. "
        f"Machine: {m['cpus']} CPUs ({m['cpu']}), Python "
        f"{m['python']}, git {m['git_head']}, faiss {m['faiss']} ({m['faiss_threads']} "
        f"threads), load average {m['loadavg_at_start']} at the start, "
        f"{res['loadavg_at_end']} at the end (other agents' work: compare ratios).",
        "",
    ]
    rows = [_row(f"in process {i + 1}", r) for i, r in enumerate(res["in_process"])]
    rows += [_row(f"pymilvus {i + 1}", r) for i, r in enumerate(res["pymilvus"]["rounds"])]
    lines += save.table(
        ("round", "bare faiss µs/call", "vectorlog µs/call", "ratio (wall)", "bare CPU µs",
         "vectorlog CPU µs", "ratio (CPU)", "recall@10 bare / vectorlog"),
        rows,
        "lrrrrrrl",
    )  # fmt: skip
    big = res["pymilvus"]["big_answer_ms"]
    med = res["median_ratio_cpu"]
    lines += [
        "",
        f"Median CPU ratio (bare faiss / vectorlog): in process {med['in_process']:.2f}, "
        f"through pymilvus {med['pymilvus']:.3f}.",
    ]
    base = res.get("baseline")
    if base:
        bm = base["median_ratio_cpu"]
        lines += [
            "",
            f"Baseline (the same benchmark at git {base['git']}, run just before, load "
            f"{base['load']}): median CPU ratio in process {bm['in_process']:.2f}, through "
            f"pymilvus {bm['pymilvus']:.3f}; the large answer "
            + ", ".join(f"{ms:.1f}" for ms in base["big_answer_ms"])
            + " ms.",
        ]
    lines += [
        "",
        f"One call of {BIG_NQ} queries x top {BIG_K} with output field `bucket` through "
        f"pymilvus ({res['pymilvus']['big_hits']:,} hits): "
        + ", ".join(f"{ms:.1f}" for ms in big)
        + " ms.",
        "",
        "Building and serializing a SearchResultData's ids, scores and topks of 1,000 hits "
        "(µs, best of 9 x 100): "
        + ", ".join(f"{k} {v:.0f}" for k, v in res["response_build_us_1000_hits"].items())
        + " (grpc_data.search_result extends from lists).",
        "",
        "Command: `python -m benchmarks.search_calls_bench`.",
        "",
    ]
    return "\n".join(lines)


def baseline(old: dict[str, Any]) -> dict[str, Any]:
    """Returns what the page quotes of an earlier run: its commit, load, median ratios and
    large answer times."""
    medians = old.get("median_ratio_cpu") or {
        "in_process": float(np.median([r["ratio_cpu"] for r in old["in_process"]])),
        "pymilvus": float(np.median([r["ratio_cpu"] for r in old["pymilvus"]["rounds"]])),
    }
    return {
        "git": old["machine"].get("git_head") or "?",
        "load": old["machine"].get("loadavg_at_start"),
        "median_ratio_cpu": medians,
        "big_answer_ms": old["pymilvus"]["big_answer_ms"],
    }


def plot(res: dict[str, Any], path: Path) -> None:
    """Draws each round's µs per call (wall) of bare faiss and vectorlog, in process and
    through pymilvus."""
    fig, ax = save.pyplot().subplots(figsize=(7, 3.5))
    for part, label in (("in_process", "in process"), ("pymilvus", "pymilvus")):
        rs = res[part] if part == "in_process" else res[part]["rounds"]
        xs = [f"{label} {i + 1}" for i in range(len(rs))]
        ax.bar(xs, [r["ours"]["wall_us"] for r in rs], label=f"vectorlog, {label}")
        ax.plot(xs, [r["bare"]["wall_us"] for r in rs], "k_", markersize=20)
    ax.set_ylabel("µs per call (wall); bars: vectorlog, ticks: bare faiss")
    ax.tick_params(axis="x", labelrotation=30)
    ax.legend(fontsize=8)
    save.plot(fig, path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000, help="GloVe rows, queries included")
    ap.add_argument("--queries", type=int, default=500, help="rows held out as queries")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--index-timeout", type=float, default=600.0)
    ap.add_argument("--baseline", type=Path, help="an earlier run's search_calls.json to quote")
    ap.add_argument("--out", type=Path, default=save.RESULTS)
    args = ap.parse_args(argv)
    res = run(args)
    if args.baseline:
        res["baseline"] = baseline(json.loads(args.baseline.read_text()))
    page = markdown(res)
    save.write("search_calls", res, page, plot, args.out)
    print(page)


if __name__ == "__main__":
    main()
