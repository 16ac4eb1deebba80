"""The search benchmark's anchor: bare faiss HNSW (METRIC_INNER_PRODUCT on normalized vectors,
as the product builds COSINE) in this process, with faiss's own thread count."""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np

from benchmarks.search_data import FILTER_BUCKET, HNSW_PARAMS, Data, K, recall
from benchmarks.search_timing import one_call, per_call, timed

#: ef values swept; the smallest whose recall@10 reaches TARGET_RECALL is used everywhere
EFS = (16, 24, 32, 48, 64, 80, 96, 128, 160, 192, 256, 384, 512)
TARGET_RECALL = 0.95
#: faiss untyped (its stubs lack SearchParametersHNSW)
FAISS: Any = faiss


def build(data: Data) -> tuple[faiss.IndexHNSWFlat, float]:
    """Returns (an HNSW index of the normalized base rows, seconds to build it)."""
    index = faiss.IndexHNSWFlat(data.dim, HNSW_PARAMS["M"], faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_PARAMS["efConstruction"]
    seconds, _ = timed(lambda: index.add(data.base_n))
    return index, seconds


def sweep(index: faiss.IndexHNSWFlat, data: Data) -> tuple[int, list[dict[str, float]]]:
    """Returns (the smallest ef of EFS reaching TARGET_RECALL, or the largest, and every
    {ef, recall} tried); searches all queries in one call per ef."""
    tried = []
    for ef in EFS:
        index.hnsw.efSearch = ef
        r = recall(index.search(data.queries_n, K)[1], data.gt)
        tried.append({"ef": ef, "recall": r})
        if r >= TARGET_RECALL:
            return ef, tried
    return EFS[-1], tried


def measure(index: faiss.IndexHNSWFlat, data: Data, ef: int) -> dict[str, Any]:
    """Returns one-query-per-call QPS and recall, all-queries-in-one-call QPS, and filtered
    (faiss IDSelectorBitmap of the rows the filter keeps) QPS and recall, all at `ef`."""
    index.hnsw.efSearch = ef
    qps, found = per_call(lambda q: index.search(q[None], K)[1][0].tolist(), data.queries_n)
    batch_qps, _ = one_call(lambda qs: index.search(qs, K)[1].tolist(), data.queries_n)
    bits = np.packbits(data.buckets == FILTER_BUCKET, bitorder="little")
    selector = faiss.IDSelectorBitmap(data.rows, faiss.swig_ptr(bits))
    params = FAISS.SearchParametersHNSW(sel=selector, efSearch=ef)
    f_qps, f_found = per_call(
        lambda q: index.search(q[None], K, params=params)[1][0].tolist(), data.queries_n
    )
    return {
        "ef": ef,
        "single_qps": qps,
        "single_recall": recall(found, data.gt),
        "batch_qps": batch_qps,
        "filtered_qps": f_qps,
        "filtered_recall": recall(f_found, data.gt_filtered),
    }


def run(data: Data) -> tuple[faiss.IndexHNSWFlat, dict[str, Any]]:
    """Builds and sweeps ef; returns (the index, {threads, build_s, ef_sweep, ef})."""
    index, build_s = build(data)
    ef, tried = sweep(index, data)
    figures = {"threads": faiss.omp_get_max_threads(), "build_s": build_s, "ef_sweep": tried}
    return index, {**figures, "ef": ef, "queries_one_per_call": len(data.queries_n)}
