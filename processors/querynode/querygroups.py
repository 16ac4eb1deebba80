"""A batch of queries searched on an HNSW index in an order that keeps similar queries together.

faiss searches a batch's queries one after the other on each of its OpenMP threads. Queries
near each other in space walk the same part of the graph, so a query searched right after a
similar one finds much of that part still in the CPU's caches. A batch of at least
GROUPED_FROM queries is therefore searched ordered by each query's nearest of PIVOTS rows of
the index (spread evenly over its positions), and the answers are put back in the order asked.
Each query's search is independent of the others' (faiss resets its visited table and heaps
per query), so every answer is exactly what the batch in its own order gets: only the time
changes (1,000 GloVe queries in one call through pymilvus, servers on the same graph: answered
in 0.915 x the time with this and huge pages, 0.96 x with huge pages alone;
benchmarks/search_batch_ab).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: the fewest queries of a batch searched grouped (fewer: little to share, the order's cost)
GROUPED_FROM = 64
#: rows of the index a query's group is named by
PIVOTS = 256
#: multiply-adds of one product of queries by the pivots: OpenBLAS computes a product below
#: 65,536 x 4 on the calling thread, a larger one on its own threads, which then spin for a
#: while on the cores faiss searches on (one product of 1,000 queries made the search 1.01 x
#: the time of the ungrouped one, products of 15 queries 0.89 x, on bare faiss)
CHUNK_MACS = 200_000

Result = tuple[np.ndarray, np.ndarray]


def pivots(index: object, ntotal: int) -> np.ndarray:
    """Returns up to PIVOTS vectors of `index` (a faiss index reconstructing by position) at
    evenly spread positions as the columns of a float32 matrix, its last row their halved
    squared norms negated (a query with a 1 appended times it: the pivots by nearness);
    empty if the index cannot reconstruct its vectors."""
    at = np.unique(np.linspace(0, max(ntotal - 1, 0), min(PIVOTS, ntotal)).astype(np.int64))
    try:
        vectors = np.asarray(index.reconstruct_batch(at), dtype=np.float32)  # type: ignore[attr-defined]
    except RuntimeError:  # an index that cannot reconstruct: no pivots, no grouping
        return np.zeros((0, 0), np.float32)
    half = -0.5 * np.einsum("ij,ij->i", vectors, vectors)
    return np.ascontiguousarray(np.vstack([vectors.T, half[None, :]]), dtype=np.float32)


def order_of(x: np.ndarray, piv: np.ndarray) -> np.ndarray:
    """Returns the positions of queries `x` sorted by their nearest pivot (L2; ties: the
    first pivot), stable within a group. The products are of a few queries at a time
    (CHUNK_MACS): numpy's OpenBLAS computes those on the calling thread."""
    xa = np.ones((len(x), x.shape[1] + 1), np.float32)
    xa[:, :-1] = x
    nearest = np.empty(len(x), np.int64)
    step = max(1, CHUNK_MACS // piv.size)
    for lo in range(0, len(x), step):
        nearest[lo : lo + step] = np.argmax(xa[lo : lo + step] @ piv, axis=1)
    return np.argsort(nearest, kind="stable")


def grouped(search: Callable[[np.ndarray], Result], x: np.ndarray, piv: np.ndarray) -> Result:
    """Returns `search(x)` (faiss's (distances, labels), a row per query) computed on the
    queries in their grouped order, its rows put back in the order of `x` (`piv` empty: in
    the order of `x`)."""
    if not piv.size:
        return search(x)
    order = order_of(x, piv)
    dist, labels = search(np.ascontiguousarray(x[order]))
    out_d, out_l = np.empty_like(dist), np.empty_like(labels)
    out_d[order], out_l[order] = dist, labels
    return out_d, out_l
