"""Exact top-k for any metric over stored vectors and their norms, whether the stored
vectors are L2-normalized (`unit`) or as inserted: with v = norm x unit vector, COSINE is
unit . q/|q|, IP is norm (unit . q), L2 is norm^2 - 2 (v . q) + |q|^2 (squared, as Milvus
returns). Used for growing segments and for the selected rows of selective filters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import faiss
import numpy as np

from vectorlog.core.types import LARGER_IS_NEARER as LARGER_IS_NEARER

SCORES_PER_CHUNK = 1 << 22  # query x row scores computed at once (16 MB of float32)


def row_norms(vectors: np.ndarray) -> np.ndarray:
    """Returns the L2 norm of each row of `vectors` (float32, summed in float64)."""
    v = np.asarray(vectors, dtype=np.float32)
    return np.sqrt(np.einsum("ij,ij->i", v, v, dtype=np.float64)).astype(np.float32)


def normalized(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (the rows of `vectors` divided by their L2 norm, the float32 norms); a zero
    vector stays zero with norm 0. Dividing by the stored norm means normalized x norm gives
    the input back within float32 rounding (rtol ~1e-7)."""
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = row_norms(v)
    safe = np.where(norms > 0, norms, np.float32(1))
    return np.ascontiguousarray(v / safe[:, None]), norms


#: faiss untyped (its stubs lack fvec_renorm_L2)
_FAISS: Any = faiss
_PTR = _FAISS.swigfaiss._swigfaiss.swig_ptr  # faiss.swig_ptr without its Python wrapper


def unit_queries(q: np.ndarray) -> np.ndarray:
    """Returns L2-normalized copies of the float32 query rows `q` (faiss's, ~10x faster
    than numpy on one query; a zero query stays zero)."""
    qn = np.array(q, dtype=np.float32, order="C", copy=True)
    if qn.ndim == 2 and qn.size:  # faiss.normalize_L2's own call, without its wrapper
        _FAISS.fvec_renorm_L2(qn.shape[1], qn.shape[0], _PTR(qn))
    else:
        faiss.normalize_L2(qn)
    return qn


def one_query(
    x: np.ndarray, v: np.ndarray, l2: bool, want: int, metric: str, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Returns (distances, row positions), 1 x `want`, of the exact top `want` rows of `v`
    (set in `mask`, if given) for the one query `x` (1 x dim, as `v` is stored): squared
    L2 or inner product, scored by `metric`'s order; empty slots are -1 with the worst
    distance. Uses faiss's single-threaded SIMD kernels and its top-k heap (3-4 ns a row of
    50 floats, a quarter of it the heap where numpy's argpartition took half as long as
    the distances): faiss's flat search of one query, multi-threaded, costs 20x more on a
    busy machine, numpy's BLAS too."""
    n, dim = v.shape
    d = np.empty(n, dtype=np.float32)
    kernel = faiss.fvec_L2sqr_ny if l2 else faiss.fvec_inner_products_ny  # type: ignore[attr-defined]
    kernel(faiss.swig_ptr(d), faiss.swig_ptr(x), faiss.swig_ptr(v), dim, n)
    if mask is not None:
        d[~mask] = worst(metric)
    return heap_top(d, want, metric)


#: bytes of stored rows a query scans before the next query scans the same rows (half the
#: L2 cache of this machine's cores): `few_queries` reads each row from memory once
CHUNK_BYTES = 512 * 1024
#: `few_queries` cuts the stored rows into chunks of a multiple of this many rows, so each
#: row goes through the same path of faiss's kernel as in `one_query` (a multiple of every
#: SIMD level's block: 8 rows with AVX2, 16 with AVX-512)
KERNEL_BLOCK = 64
#: at most this many queries are scanned by `few_queries` (beyond, faiss's flat search: its
#: BLAS blocks serve many queries better)
FEW_QUERIES = 16


def few_queries(
    x: np.ndarray, v: np.ndarray, l2: bool, want: int, metric: str, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Returns (distances, row positions), nq x `want`, of `one_query` for each query row of
    `x` (the same kernel and heap: each query's answer is the one it gets alone), scanning
    `v` in chunks of CHUNK_BYTES that every query reads while the chunk is in cache: one
    pass over memory for the nq queries (faiss's flat search of a few queries made one
    pass per query: 2 queries over 250k x 128 floats 17.6 ms, chunked 13.6; 4: 34 -> 20)."""
    n, dim = v.shape
    d = np.empty((len(x), n), dtype=np.float32)
    kernel = faiss.fvec_L2sqr_ny if l2 else faiss.fvec_inner_products_ny  # type: ignore[attr-defined]
    # whole blocks of KERNEL_BLOCK rows: faiss's kernels of small dimensions take 8 (AVX2) or
    # 16 (AVX-512) rows at a time and the rest one by one, which rounds the last bit
    # otherwise (one_query's blocks start at 0)
    block = KERNEL_BLOCK
    ptr, step = faiss.swig_ptr, max(CHUNK_BYTES // (4 * dim) // block * block, block)
    for lo in range(0, n, step):
        rows = v[lo : lo + step]
        for i in range(len(x)):
            kernel(ptr(d[i, lo : lo + len(rows)]), ptr(x[i]), ptr(rows), dim, len(rows))
    if mask is not None:
        d[:, ~mask] = worst(metric)
    tops = [heap_top(row, want, metric) for row in d]
    return np.concatenate([t[0] for t in tops]), np.concatenate([t[1] for t in tops])


def heap_top(d: np.ndarray, want: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Returns (distances, columns), 1 x `want`, of the best `want` of the float32 distances
    `d` (nearest first, ties in any order), by faiss's heap on this thread alone; slots past
    the finite entries are -1 with the worst distance."""
    dist = np.empty((1, want), dtype=np.float32)
    cols = np.empty((1, want), dtype=np.int64)
    larger = metric in LARGER_IS_NEARER
    heap = faiss.float_minheap_array_t() if larger else faiss.float_maxheap_array_t()
    heap.nh, heap.k = 1, want
    heap.val, heap.ids = faiss.swig_ptr(dist), faiss.swig_ptr(cols)
    with one_thread():
        heap.heapify()
        heap.addn(len(d), faiss.swig_ptr(d))
        heap.reorder()
    empty = (cols < 0) | ~np.isfinite(dist)
    if empty.any():
        cols[empty], dist[empty] = -1, worst(metric)
    return dist, cols


@contextmanager
def one_thread() -> Iterator[None]:
    """Runs faiss's OpenMP loops entered by this thread on this thread alone while inside
    (OpenMP's thread count is per thread: other threads' searches and builds keep theirs)."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def worst(metric: str) -> float:
    """Returns the distance of an empty slot: sorts after every real hit."""
    return -np.inf if metric in LARGER_IS_NEARER else np.inf


def scores(
    q: np.ndarray, qn: np.ndarray, v: np.ndarray, norms: np.ndarray, metric: str, unit: bool
) -> np.ndarray:
    """Returns the (queries x rows) distances of `metric` (q raw, qn normalized queries;
    `v` normalized if `unit`, else as inserted)."""
    if metric == "COSINE":
        return qn @ v.T if unit else (qn @ v.T) / np.where(norms > 0, norms, np.float32(1))
    ip = (q @ v.T) * norms if unit else q @ v.T
    if metric == "IP":
        return ip
    d = norms * norms - 2 * ip + np.einsum("ij,ij->i", q, q)[:, None]
    return np.maximum(d, 0, out=d)


def top_k(d: np.ndarray, want: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Returns (distances, columns) of the best `want` per row of `d` (nearest first),
    padded with empty slots (column -1) where a row has fewer finite entries."""
    key = -d if metric in LARGER_IS_NEARER else d
    n = key.shape[1]
    if n > want:
        part = np.argpartition(key, want - 1, axis=1)[:, :want]
    else:
        part = np.broadcast_to(np.arange(n), (len(key), n))
    order = np.take_along_axis(part, np.argsort(np.take_along_axis(key, part, 1), 1), 1)
    dist = np.take_along_axis(d, order, 1)
    cols = np.where(np.isfinite(dist), order, -1)
    pad = want - cols.shape[1]
    if pad > 0:
        cols = np.pad(cols, ((0, 0), (0, pad)), constant_values=-1)
        dist = np.pad(dist, ((0, 0), (0, pad)), constant_values=worst(metric))
    return dist.astype(np.float32), cols.astype(np.int64)


def exact_search(
    q: np.ndarray,
    qn: np.ndarray,
    v: np.ndarray,
    norms: np.ndarray,
    metric: str,
    want: int,
    mask: np.ndarray | None = None,
    unit: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Returns (distances, row positions) of the exact top `want` per query among the rows
    of `v` (set in `mask`, if given), nearest first; empty slots are -1."""
    rows = max(len(v), 1)
    step = max(1, SCORES_PER_CHUNK // rows)
    out_d, out_i = [], []
    for lo in range(0, len(q), step):
        d = scores(q[lo : lo + step], qn[lo : lo + step], v, norms, metric, unit)
        if mask is not None:
            d[:, ~mask] = worst(metric)
        dist, cols = top_k(d, want, metric)
        out_d.append(dist)
        out_i.append(cols)
    if not out_d:
        return np.zeros((0, want), np.float32), np.zeros((0, want), np.int64)
    return np.concatenate(out_d), np.concatenate(out_i)
