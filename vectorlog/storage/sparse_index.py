"""The sparse inverted index of one segment's SPARSE_FLOAT_VECTOR field (SPARSE_INVERTED_INDEX,
SPARSE_WAND), its file, and the inner-product and BM25 searches over it.

faiss has no sparse index. `Postings` is an inverted index: the segment's distinct dimensions
(`vocab`, sorted: sparse indices may be any uint32, e.g. a BM25 function's token hashes) and a
scipy CSC matrix rows x len(vocab) whose column j is the posting list of vocab[j] (the rows
holding it and their values), plus each row's length (the sum of its values: a BM25 document's
token count, taken before any value is dropped). `drop_ratio_build` drops the smallest fraction
of all the segment's values (knowhere: the small values of the whole index); a search's
`drop_ratio_search` drops the smallest fraction of each query's values. Both index types answer
the same exact scores over what is left (WAND is a faster traversal of the same postings in
knowhere, not another result). A row scores only through the dimensions it shares with the
query: a row sharing none is no hit. A growing segment is searched through the same structure,
built from its rows.

The file is an `.npz` (numpy's zip of arrays, no pickle): vocab, the CSC's data, indices and
indptr, the row count and the row lengths.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.sparse import PAIR, to_csr

if TYPE_CHECKING:  # imported where a matrix is made (core.sparse says why)
    import scipy.sparse as sp

#: drop ratios: name -> (default, lowest, highest exclusive) (Milvus: [0, 1))
RATIOS = {"drop_ratio_build": (0.0, 0.0, 1.0), "drop_ratio_search": (0.0, 0.0, 1.0)}


def _sparse() -> Any:
    """Returns scipy.sparse (imported at the first matrix made, not with this module)."""
    import scipy.sparse

    return scipy.sparse


def ratio(params: dict[str, Any], name: str) -> float:
    """Returns the drop ratio `name` of `params` (default 0). Raises InvalidArgument unless
    it is a number in [0, 1)."""
    default, lo, hi = RATIOS[name]
    value = params.get(name, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or not lo <= number < hi:
        raise InvalidArgument(f"{name} must be a number in [0, 1), not {value!r}")
    return number


@dataclass(frozen=True)
class Postings:
    """An inverted index: `matrix[:, j]` is the posting list of dimension `vocab[j]`."""

    vocab: np.ndarray  # int64, sorted, distinct
    matrix: sp.csc_array  # rows x len(vocab)
    lengths: np.ndarray  # float64 per row: the sum of its values before any drop

    @property
    def rows(self) -> int:
        return int(self.matrix.shape[0])

    def columns(self, terms: np.ndarray) -> sp.csc_array:
        """Returns the posting lists of `terms` (sorted, distinct) as rows x len(terms)
        (an empty column for a term no row holds)."""
        at = np.searchsorted(self.vocab, terms)
        known = (at < len(self.vocab)) & (self.vocab[np.minimum(at, len(self.vocab) - 1)] == terms)
        m = self.matrix
        starts = np.where(known, m.indptr[np.minimum(at, len(self.vocab))], 0)
        ends = np.where(known, m.indptr[np.minimum(at + 1, len(self.vocab))], 0)
        sizes = ends - starts
        spans = [np.arange(a, z, dtype=np.int64) for a, z in zip(starts, ends, strict=True)]
        take = np.concatenate(spans) if spans else np.zeros(0, dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(sizes)])
        return _sparse().csc_array(
            (m.data[take], m.indices[take], indptr), shape=(self.rows, len(terms))
        )


def build(rows: Sequence[bytes], drop_ratio_build: float = 0.0) -> Postings:
    """Returns the postings of a segment's rows (Milvus's row format), the smallest
    `drop_ratio_build` of their values dropped."""
    p = np.frombuffer(b"".join(rows), dtype=PAIR)
    counts = np.fromiter((len(r) // PAIR.itemsize for r in rows), np.int64, len(rows))
    row_of = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    values = p["value"].astype(np.float32)
    lengths = np.bincount(row_of, weights=values, minlength=len(rows)).astype(np.float64)
    keep = np.ones(len(values), dtype=bool)
    if drop_ratio_build > 0 and len(values):
        keep = np.abs(values) >= np.quantile(np.abs(values), drop_ratio_build)
    vocab, cols = np.unique(p["index"][keep].astype(np.int64), return_inverse=True)
    coo = _sparse().coo_array(
        (values[keep], (row_of[keep], cols.ravel())), shape=(len(rows), len(vocab))
    )
    return Postings(vocab, _sparse().csc_array(coo), lengths)


def serialize(index: Postings) -> bytes:
    """Returns the index file's bytes."""
    out = io.BytesIO()
    m = index.matrix
    np.savez(
        out,
        vocab=index.vocab.astype(np.int64),
        data=m.data.astype(np.float32),
        indices=m.indices.astype(np.int64),
        indptr=m.indptr.astype(np.int64),
        rows=np.asarray([index.rows], dtype=np.int64),
        lengths=index.lengths.astype(np.float64),
    )
    return out.getvalue()


def deserialize(data: bytes) -> Postings:
    """Returns the index of a file's bytes. Raises InvalidArgument if they are not one."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            vocab, rows = z["vocab"], int(z["rows"][0])
            m = _sparse().csc_array(
                (z["data"], z["indices"], z["indptr"]), shape=(rows, len(vocab))
            )
            return Postings(vocab, m, z["lengths"])
    except (ValueError, KeyError, OSError, IndexError) as exc:
        raise InvalidArgument(f"not a sparse inverted index file: {exc}") from None


def queries_matrix(queries: Sequence[bytes], drop_ratio_search: float = 0.0) -> sp.csr_array:
    """Returns the queries as CSR (columns: their raw dimensions), each with its smallest
    `drop_ratio_search` values dropped."""
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


def query_weights(q: sp.csr_array) -> tuple[np.ndarray, np.ndarray]:
    """Returns (terms, weights): the queries' distinct dimensions, sorted, and a dense
    (nq, len(terms)) matrix of their values."""
    terms = np.unique(q.indices).astype(np.int64)
    weights = np.zeros((q.shape[0], len(terms)), dtype=np.float64)
    rows = np.repeat(np.arange(q.shape[0]), np.diff(q.indptr))
    weights[rows, np.searchsorted(terms, q.indices)] = q.data
    return terms, weights


def scores(post: Postings, q: sp.csr_array) -> tuple[np.ndarray, np.ndarray]:
    """Returns (scores, touched): the inner products of every row with each query,
    (nq, rows), and whether the row shares a dimension with the query."""
    terms, weights = query_weights(q)
    return _scored(post.columns(terms), weights)


@dataclass(frozen=True)
class BM25Stats:
    """What BM25 scores need of the collection: its documents (rows), their average length
    (tokens), the document frequency of each query term, and k1 and b."""

    docs: int
    avgdl: float
    df: dict[int, int]
    k1: float = 1.2
    b: float = 0.75

    def idf(self, term: int) -> float:
        """Returns the term's inverse document frequency (Lucene's, Milvus's)."""
        n, df = self.docs, self.df.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def bm25_scores(post: Postings, q: sp.csr_array, stats: BM25Stats) -> tuple[np.ndarray, np.ndarray]:
    """Returns (scores, touched) as `scores` does, each row's BM25 score for each query (its
    terms' counts): the sum over the query's terms of count x idf x tf (k1 + 1) /
    (tf + k1 (1 - b + b dl / avgdl)), tf the row's count of the term, dl its length."""
    terms, weights = query_weights(q)
    sub = post.columns(terms)
    tf = sub.data.astype(np.float64)
    k1, b = stats.k1, stats.b
    norm = k1 * (1.0 - b + b * post.lengths[sub.indices] / max(stats.avgdl, 1e-9))
    sub = _sparse().csc_array(
        (tf * (k1 + 1.0) / (tf + norm), sub.indices, sub.indptr), shape=sub.shape
    )
    idf = np.asarray([stats.idf(int(t)) for t in terms], dtype=np.float64)
    return _scored(sub, weights * idf[None, :])


def _scored(sub: sp.csc_array, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (weights @ sub.T, whether each row holds a weighted term), (nq, rows)."""
    product = np.asarray(sub @ weights.T).T.astype(np.float32)
    held = _sparse().csc_array((np.ones_like(sub.data), sub.indices, sub.indptr), shape=sub.shape)
    touched = np.asarray(held @ (weights != 0).T.astype(np.float64)).T > 0
    return product, touched


def top_k(score: np.ndarray, ok: np.ndarray, want: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (distances, positions), (nq, want), the largest scores among `ok` per query
    (`ok`: (nq, rows) bools), largest first (ties: lower position first), empty slots -1
    with score -inf."""
    nq = score.shape[0]
    dist = np.full((nq, want), -np.inf, dtype=np.float32)
    pos = np.full((nq, want), -1, dtype=np.int64)
    for i in range(nq):
        cand = np.flatnonzero(ok[i])
        if not len(cand):
            continue
        if len(cand) > want:  # every candidate tied with the want-th too: lower ids win
            kth = np.partition(-score[i, cand], want - 1)[want - 1]
            cand = cand[-score[i, cand] <= kth]
        order = cand[np.lexsort((cand, -score[i, cand]))][:want]
        dist[i, : len(order)], pos[i, : len(order)] = score[i, order], order
    return dist, pos
