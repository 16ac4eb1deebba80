"""Search benchmark (issue 8): vectorlog next to bare faiss HNSW and Milvus Lite, on the same
GloVe-6B-50d rows, in one run. Writes search.json and search.md (default: benchmarks/results/).

    python -m benchmarks.search_bench [--rows 400000] [--queries 1000] [--skip-milvus-lite]
        [--skip-memory] [--lite-queries 200] [--index-timeout 600] [--out DIR]

`--rows` GloVe rows are loaded and `--queries` of them held out as queries; COSINE; ground
truth by exact search (faiss IndexFlatIP on normalized vectors). Bare faiss HNSW (search_data.
HNSW_PARAMS, faiss's thread count) picks ef: the smallest of a sweep with recall@10 >= 0.95;
everything searches at that ef. vectorlog (embedded, a fresh temp dir, HNSW COSINE index):
ingest, seconds from the last insert to describe_index's state Finished, ingest of a second
collection while the index builds, one-query-per-call QPS and recall (Bounded, Strong), all
queries in one call, a filtered search keeping 10 % of rows; QPS ratios to bare faiss measured
just before and after (their mean). Memory: child processes (benchmarks/search_memory.py).
Milvus Lite: a child process with a time cap, on its first `--lite-queries` queries.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import faiss

from benchmarks import save, search_faiss, search_memory, search_peers, search_reads
from benchmarks.search_data import BATCH, HNSW_PARAMS, METRIC, Data, K, load, row_batches
from benchmarks.search_product import build
from benchmarks.search_report import GOALS, markdown, num, ratios
from vectorlog import Client

NAME = "glove"
OVERLAP = {
    True: "the build was still unfinished when that ingest ended",
    False: "NOT overlapped, the build had finished before that ingest ended",
    None: "overlap unknown (the index was not built, or its state not reported)",
}


def anchor_mean(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Returns the bare faiss figures averaged over the runs before and after vectorlog's."""
    return {k: (v + after[k]) / 2 if isinstance(v, float) else v for k, v in before.items()}


def bare_and_vectorlog(data: Data, args: argparse.Namespace) -> tuple[dict, dict]:
    """Returns (bare faiss's figures, vectorlog's), measured in this process."""
    index, anchor = search_faiss.run(data)
    ef = anchor["ef"]
    batches = list(row_batches(data.base))
    with tempfile.TemporaryDirectory() as tmp, Client(tmp) as client:
        built = build(client, NAME, data, batches, args.index_timeout)
        del batches
        before = search_faiss.measure(index, data, ef)
        reads = search_reads.run(client, NAME, data, ef)
        after = search_faiss.measure(index, data, ef)
    anchor.update(anchor_mean(before, after), before=before, after=after)
    return anchor, {"build": built, "reads": reads}


def memory(args: argparse.Namespace) -> dict[str, Any]:
    """Returns the memory phases' figures (child processes), {"skipped"} with --skip-memory."""
    if args.skip_memory:
        return {"skipped": True}
    with tempfile.TemporaryDirectory() as tmp:
        phases = {
            p: search_memory.measure(p, args.rows, args.queries, tmp, args.index_timeout)
            for p in ("baseline", "hold", "reopen")
        }
    return {
        "baseline_rss_mb": phases["baseline"].get("rss_mb", {}).get("data_loaded"),
        "hold_peak_rss_mb": phases["hold"].get("peak_rss_mb"),
        "hold_rss_mb": phases["hold"].get("rss_mb", {}).get("searched"),
        "reopen_rss_mb": phases["reopen"].get("rss_mb", {}).get("searched"),
        "reopen_peak_rss_mb": phases["reopen"].get("peak_rss_mb"),
        "phases": phases,
    }


def lite(args: argparse.Namespace, ef: int) -> dict[str, Any]:
    if args.skip_milvus_lite:
        return {"skipped": True}
    with tempfile.TemporaryDirectory() as tmp:
        return search_peers.milvus_lite(
            args.rows, args.queries, args.lite_queries, ef, tmp, args.lite_timeout
        )


def notes(res: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Returns the caveats a reader of the table needs."""
    v, mem = res["vectorlog"]["build"], res["memory"]
    reopen = mem.get("phases", {}).get("reopen", {})
    out = [
        "bare faiss searches pre-normalized queries; vectorlog gets the raw ones (it "
        "normalizes for COSINE). Ratios use bare faiss's mean of runs just before and after "
        "vectorlog's searches. Batch and filtered searches run at Bounded.",
        f"last insert -> index built includes flush ({v['flush_s']:.1f} s) and the second "
        "collection's ingest (same rows, no index, dropped after), which runs while the index "
        f"builds: {OVERLAP[v['ingest_while_index_builds']['overlapped']]}.",
        f"describe_index: {v['index_described']}",
        "peak RSS: a child process that loads the rows, ingests them into a fresh cluster, "
        "flushes, waits for the index and searches (its copy of the rows is dropped after "
        f"the insert); baseline (imports + rows loaded) {num(mem.get('baseline_rss_mb'))} MB; "
        f"after reopen: the cluster reopened in a fresh child, first result in "
        f"{num(reopen.get('open_to_first_result_s'), '.1f')} s. Milvus Lite's peak includes "
        "its copy of the data and the ground truth.",
    ]
    auto = res["params"]["product_autoindex"]
    if auto != ["HNSW", HNSW_PARAMS]:
        out.append(f"the product's AUTOINDEX builds {auto}, not HNSW {HNSW_PARAMS}")
    if not args.skip_milvus_lite:
        out.append(
            f"Milvus Lite: capped at {args.lite_queries} one-per-call queries (~6 QPS at "
            f"400k rows), child process killed after {args.lite_timeout:.0f} s; "
            f"{res['milvus_lite'].get('index_wait', res['milvus_lite'].get('error'))}."
        )
    return out


def autoindex() -> Any:
    """Returns what the product's AUTOINDEX builds ([type, params]), to check HNSW_PARAMS
    against; "not found" if the index node does not say."""
    try:
        from vectorlog.processors.indexnode.builder import AUTOINDEX_BUILD
    except ImportError:
        return "not found"
    return list(AUTOINDEX_BUILD)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Runs every part; returns the results."""
    load_before = save.loadavg()
    data = load(args.rows, args.queries)
    anchor, ours = bare_and_vectorlog(data, args)
    res: dict[str, Any] = {
        "benchmark": "search",
        "params": {
            "rows": args.rows,
            "base_rows": data.rows,
            "queries": args.queries,
            "dim": data.dim,
            "metric": METRIC,
            "k": K,
            "hnsw": HNSW_PARAMS,
            "ef": anchor["ef"],
            "insert_batch": BATCH,
            "threads": faiss.omp_get_max_threads(),
            "product_autoindex": autoindex(),
        },
        "faiss": anchor,
        "vectorlog": ours,
        "ratios": ratios(anchor, ours["reads"]),
        "goals": GOALS,
        "memory": memory(args),
        "milvus_lite": lite(args, anchor["ef"]),
        "machine": {**save.machine(), "loadavg_at_start": load_before},
    }
    res["notes"] = notes(res, args)
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=400_000, help="GloVe rows, queries included")
    ap.add_argument("--queries", type=int, default=1000, help="rows held out as queries")
    ap.add_argument("--skip-milvus-lite", action="store_true")
    ap.add_argument("--skip-memory", action="store_true", help="no memory child processes")
    ap.add_argument("--lite-queries", type=int, default=200, help="Milvus Lite's query cap")
    ap.add_argument("--lite-timeout", type=float, default=900.0, help="Milvus Lite's time cap")
    ap.add_argument("--index-timeout", type=float, default=600.0, help="wait for Finished")
    ap.add_argument("--out", type=Path, default=save.RESULTS, help="dir for search.json/.md")
    args = ap.parse_args(argv)
    res = run(args)
    table = markdown(res)
    save.write("search", res, table, out=args.out)
    print(table)


if __name__ == "__main__":
    main()
