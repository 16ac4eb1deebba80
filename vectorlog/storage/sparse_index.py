"""The sparse inverted index of one segment's SPARSE_FLOAT_VECTOR field (SPARSE_INVERTED_INDEX,
SPARSE_WAND) and its file, and the inner-product search over it.

faiss has no sparse index; the index is a scipy CSC matrix, rows x dims: column t is the
posting list of dimension t (the rows holding it and their values). `drop_ratio_build` drops
the smallest fraction of all the segment's values before it is built (Milvus / knowhere: the
small values of the whole index); a search's `drop_ratio_search` drops the smallest fraction of
each query's values. Both types answer the same exact inner product over what is left (WAND
is a faster traversal of the same postings in knowhere, not another result). A row scores
only through the dimensions it shares with the query: a row sharing none is no hit.

The file is an `.npz` (numpy's zip of arrays, no pickle) of the CSC's data, indices, indptr
and shape.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.sparse import to_csr

#: build parameters: name -> (default, lowest, highest exclusive) (Milvus: drop_ratio_build
#: in [0, 1))
BUILD_PARAMS = {"drop_ratio_build": (0.0, 0.0, 1.0)}
SEARCH_PARAMS = {"drop_ratio_search": (0.0, 0.0, 1.0)}


def ratio(params: dict[str, Any], name: str) -> float:
    """Returns the drop ratio `name` of `params` (default 0). Raises InvalidArgument unless
    it is a number in [0, 1)."""
    default, lo, hi = (BUILD_PARAMS | SEARCH_PARAMS)[name]
    value = params.get(name, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or not lo <= number < hi:
        raise InvalidArgument(f"{name} must be a number in [0, 1), not {value!r}")
    return number


def build(rows: Sequence[bytes], drop_ratio_build: float = 0.0) -> sp.csc_array:
    """Returns the inverted index (CSC, rows x dims) of a segment's rows (Milvus's row
    format), its smallest `drop_ratio_build` of values dropped."""
    csr = to_csr(rows)
    if drop_ratio_build > 0 and csr.nnz:
        cut = np.quantile(np.abs(csr.data), drop_ratio_build)
        csr.data[np.abs(csr.data) < cut] = 0
        csr.eliminate_zeros()
    return sp.csc_array(csr)


def serialize(index: sp.csc_array) -> bytes:
    """Returns the index file's bytes."""
    out = io.BytesIO()
    np.savez(
        out,
        data=index.data.astype(np.float32),
        indices=index.indices.astype(np.int64),
        indptr=index.indptr.astype(np.int64),
        shape=np.asarray(index.shape, dtype=np.int64),
    )
    return out.getvalue()


def deserialize(data: bytes) -> sp.csc_array:
    """Returns the index of a file's bytes. Raises InvalidArgument if they are not one."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            shape = tuple(int(x) for x in z["shape"])
            return sp.csc_array((z["data"], z["indices"], z["indptr"]), shape=shape)
    except (ValueError, KeyError, OSError) as exc:
        raise InvalidArgument(f"not a sparse inverted index file: {exc}") from None


def queries_matrix(queries: Sequence[bytes], drop_ratio_search: float = 0.0) -> sp.csr_array:
    """Returns the queries as CSR, each with its smallest `drop_ratio_search` values
    dropped (at least one value kept)."""
    q = to_csr(queries)
    if drop_ratio_search <= 0:
        return q
    for i in range(q.shape[0]):
        a, b = q.indptr[i], q.indptr[i + 1]
        drop = int((b - a) * drop_ratio_search)
        if drop:
            values = q.data[a:b]
            values[np.argsort(np.abs(values), kind="stable")[:drop]] = 0
    q.eliminate_zeros()
    return q


def scores(matrix: sp.csr_array | sp.csc_array, q: sp.csr_array) -> tuple[np.ndarray, np.ndarray]:
    """Returns (scores, touched): the inner products of every row of `matrix` with each
    query, (nq, rows), and whether the row shares a dimension with the query."""
    width = max(matrix.shape[1], q.shape[1])
    m = _widened(matrix, width)
    qq = _widened(q, width)
    product = (qq @ m.T).toarray().astype(np.float32)
    touched = ((qq != 0).astype(np.float32) @ (m != 0).astype(np.float32).T).toarray() > 0
    return product, touched


def _widened(x: Any, width: int) -> Any:
    """Returns `x` with `width` columns (the extra ones empty)."""
    if x.shape[1] == width:
        return x
    x = sp.csr_array(x)
    return sp.csr_array((x.data, x.indices, x.indptr), shape=(x.shape[0], width))


def top_k(score: np.ndarray, ok: np.ndarray, want: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (distances, positions), (nq, want), the largest scores among `ok` per query
    (`ok`: (nq, rows) bools), largest first, empty slots -1 with score -inf."""
    nq, n = score.shape
    dist = np.full((nq, want), -np.inf, dtype=np.float32)
    pos = np.full((nq, want), -1, dtype=np.int64)
    masked = np.where(ok, score, -np.inf)
    for i in range(nq):
        cand = np.flatnonzero(ok[i])
        if not len(cand):
            continue
        if len(cand) > want:
            part = np.argpartition(-masked[i, cand], want - 1)[:want]
            cand = cand[part]
        order = cand[np.lexsort((cand, -masked[i, cand]))]
        dist[i, : len(order)], pos[i, : len(order)] = masked[i, order], order
    return dist, pos
