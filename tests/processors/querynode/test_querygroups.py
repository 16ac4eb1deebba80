"""A large batch of queries on an HNSW segment is searched with similar queries together
(querygroups.py) and answers exactly as each query searched alone: the same ids, distances,
order and ties, through the general search and the one-call path."""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np
import pytest

from tests.processors.querynode.test_replica import P1
from tests.processors.querynode.test_replica_indexes import SEALED, fill, load
from vectorlog.demo.datasets import glove
from vectorlog.processors.querynode.querygroups import GROUPED_FROM, grouped, order_of, pivots
from vectorlog.processors.querynode.replica import Replica

K, TS = 10, 10**6
PARAMS = {"ef": "128"}


@pytest.fixture(scope="module")
def replica() -> tuple[Replica, np.ndarray]:
    """A replica of 12,000 GloVe rows and 2,000 exact copies of some of them (ties), all in
    one sealed HNSW segment; and 300 queries, a third of them copied rows."""
    x, _ = glove(12_300)
    base = np.vstack([x[:12_000], x[:2_000]])
    queries = np.vstack([x[12_000:12_200], x[:1_000:10]])
    r = fill("COSINE", base, len(base))
    load(r, "HNSW", base, len(base), "COSINE")
    return r, queries


def answers(found: Any) -> tuple[list[int], list[float], list[int]]:
    """Returns a SearchResult's ids, distances and hits per query as lists."""
    return found.ids.tolist(), found.distances.tolist(), found.topks()


def one_by_one(r: Replica, queries: np.ndarray) -> tuple[list[int], list[float], list[int]]:
    """Returns the answers of each query searched alone, concatenated."""
    ids: list[int] = []
    dist: list[float] = []
    topks: list[int] = []
    for q in queries:
        i, d, t = answers(r.search(q[None], K, TS, params=PARAMS, metric="COSINE"))
        ids, dist, topks = ids + i, dist + d, topks + t
    return ids, dist, topks


def test_the_batch_is_searched_in_another_order_than_asked(replica) -> None:
    r, queries = replica
    seg = r.segments[P1, SEALED]
    assert seg.index is not None and seg.index.hnsw and len(queries) >= GROUPED_FROM
    qn = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    order = order_of(qn.astype(np.float32), pivots(seg.index.index, seg.index.index.ntotal))
    assert not np.array_equal(order, np.arange(len(queries)))
    assert sorted(order.tolist()) == list(range(len(queries)))


def test_a_grouped_batch_answers_as_each_query_alone(replica) -> None:
    r, queries = replica
    alone = one_by_one(r, queries)
    assert any(a == b for a, b in zip(alone[1], alone[1][1:], strict=False))  # ties exist
    assert answers(r.search(queries, K, TS, params=PARAMS, metric="COSINE")) == alone
    common = r.search_common(queries, K, TS, {"ef": 128}, "COSINE", "vec")
    assert common is not None and answers(common) == alone


def test_a_grouped_batch_answers_the_same_on_one_or_two_threads(replica) -> None:
    r, queries = replica
    before = faiss.omp_get_max_threads()
    got = []
    try:
        for threads in (1, 2):
            faiss.omp_set_num_threads(threads)
            got.append(answers(r.search(queries, K, TS, params=PARAMS, metric="COSINE")))
    finally:
        faiss.omp_set_num_threads(before)
    assert got[0] == got[1]


class NoReconstruct:
    """An index that cannot give its vectors back (faiss raises RuntimeError)."""

    def reconstruct_batch(self, at: np.ndarray) -> np.ndarray:
        raise RuntimeError("reconstruct not implemented for this type of index")


def test_an_index_without_its_vectors_searches_the_batch_in_the_order_asked() -> None:
    piv = pivots(NoReconstruct(), 1000)
    assert piv.size == 0
    x = np.arange(200, dtype=np.float32).reshape(100, 2)
    seen = []

    def search(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen.append(y)
        return y[:, :1], y[:, 1:].astype(np.int64)

    dist, labels = grouped(search, x, piv)
    assert seen[0] is x and np.array_equal(dist, x[:, :1])
