"""`Replica` serving sealed segments from faiss indexes (issue 8): results of indexed and
growing segments merge into one top-k; deletes and upserts after a load clear bits of the
same alive bitmap (no rebuild); one copy of the vectors; metric mismatch refused; unloading
falls back to exact search; a load waits for the rows it indexes. Recall on real GloVe rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.processors.querynode.index_support import (
    FACTORIES,
    DictFiles,
    exact_top,
    forced_branch,
    inserted_body,
    recall,
    segment_indexed,
)
from tests.processors.querynode.test_replica import P1, P2, brute_force, schema
from vectorlog.core.errors import InvalidArgument
from vectorlog.demo.datasets import glove
from vectorlog.expr import parse
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.sealed import read_index

DIM, K = 50, 10
SEALED, GROWING = 1, 2  # segment ids
#: recall@10 floors on 20k GloVe rows (COSINE), default search params (ef 64, nprobe 8)
#: (measured: 1.0, 0.97, 0.96, 0.42 with PQ10x4, 0.9975)
FLOORS = {"FLAT": 1.0, "IVF_FLAT": 0.9, "IVF_SQ8": 0.9, "IVF_PQ": 0.35, "HNSW": 0.95}


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    x, _ = glove(20_400)
    return {"x": x[:20_000], "queries": x[20_000:20_200]}


def fill(metric: str, x: np.ndarray, sealed: int, ts: int = 100, **values: list[Any]) -> Replica:
    """A replica: rows [0, sealed) in segment SEALED (row ids 1000 + i), the rest growing."""
    r = Replica(7, schema(metric, DIM))
    ids = list(range(len(x)))
    for seg, lo, hi in ((SEALED, 0, sealed), (GROWING, sealed, len(x))):
        extra = {k: v[lo:hi] for k, v in values.items()}
        r.insert(ts, inserted_body(r.schema, ids[lo:hi], x[lo:hi], seg, 1000 + lo, P1, **extra))
    return r


def load(r: Replica, kind: str, x: np.ndarray, sealed: int, metric: str) -> dict[str, Any]:
    """Builds and loads the SEALED segment's index; returns its SegmentIndexed body."""
    files = DictFiles()
    body = segment_indexed(files, kind, x[:sealed], 1000 + np.arange(sealed), metric, SEALED, P1)
    assert r.load_index(P1, SEALED, read_index(body, files))
    return body


def truth(x: np.ndarray, queries: np.ndarray, metric: str, rows: np.ndarray) -> list[list[int]]:
    """The exact top-k keys among `rows` (numpy brute force in float64: for equality)."""
    return [rows[brute_force(x[rows], q, K, metric)[0]].tolist() for q in queries]


def approx_truth(
    x: np.ndarray, queries: np.ndarray, metric: str, rows: np.ndarray
) -> list[list[int]]:
    """The exact top-k keys among `rows` (faiss flat: for recall)."""
    return [rows[top].tolist() for top in exact_top(x[rows], queries, K, metric)]


def found(r: Replica, queries: np.ndarray, ts: int = 10**6, **kw: Any) -> list[list[int]]:
    return [[h["id"] for h in hits] for hits in r.search(queries, K, ts, **kw)]


@pytest.mark.parametrize("kind", list(FACTORIES))
def test_each_index_type_merges_sealed_and_growing_results_above_its_recall_floor(data, kind):
    x, queries = data["x"], data["queries"]
    r = fill("COSINE", x, 18_000)
    load(r, kind, x, 18_000, "COSINE")
    seg = r.segments[P1, SEALED]
    assert seg.index is not None and (seg.flat is None) == (kind in ("FLAT", "HNSW", "IVF_FLAT"))
    got = found(r, queries, metric="COSINE")
    want = approx_truth(x, queries, "COSINE", np.arange(len(x)))
    assert recall(got, want) >= FLOORS[kind], recall(got, want)
    assert any(i >= 18_000 for g in got for i in g)  # growing rows are in the merged top-k
    hits = r.search(queries[:5], K, 10**6, metric="COSINE", params={"ef": "128", "nprobe": 64})
    assert all(len(h) == K for h in hits)


def test_a_filter_searched_in_the_index_recalls_as_much_as_the_unfiltered_search(data, monkeypatch):
    """10 % and 50 % of the rows kept, the HNSW index searched with the filter's bitmap at
    the default ef: recall@10 within the kept rows as high as the unfiltered search's (the
    ef raised for the filter buys back what the bitmap costs; both are near 1.0 on 20k
    rows, so within 10 of the 2,000 hits)."""
    x, queries = data["x"], data["queries"]
    n = [i % 10 for i in range(len(x))]
    r = fill("COSINE", x, len(x), n=n)
    load(r, "HNSW", x, len(x), "COSINE")
    everything = approx_truth(x, queries, "COSINE", np.arange(len(x)))
    unfiltered = recall(found(r, queries, metric="COSINE"), everything)
    chosen = forced_branch(monkeypatch, "index")
    for kept in (1, 5):
        got = found(r, queries, expr=parse(f"n < {kept}", r.schema), metric="COSINE")
        assert all(i % 10 < kept for g in got for i in g)
        keep = np.flatnonzero(np.asarray(n) < kept)
        assert recall(got, approx_truth(x, queries, "COSINE", keep)) >= unfiltered - 0.005
    assert set(chosen) == {"index"}


def test_deletes_and_upserts_after_a_load_clear_bits_of_the_same_bitmap(data):
    x = data["x"][:3000]
    r = fill("L2", x, 2000)
    load(r, "HNSW", x, 2000, "L2")
    seg = r.segments[P1, SEALED]
    bitmap, bits, index = seg.alive, seg.alive.array, seg.index
    assert bitmap.dead == 0
    q = x[[5, 6]]
    assert [g[0] for g in found(r, q, metric="L2")] == [5, 6]
    r.delete(200, [5])
    r.insert(300, inserted_body(r.schema, [6], x[[100]], GROWING, 9000, P1))  # upsert
    assert seg.alive is bitmap and seg.alive.array is bits and seg.index is index
    assert bitmap.dead == 2 and not bitmap.alive(np.array([5, 6])).any()
    got = r.search(q, K, 10**6, output_fields=["vec"], metric="L2")
    assert 5 not in [h["id"] for h in got[0]]
    assert all(h["entity"]["vec"] == x[100].tolist() for h in got[1] if h["id"] == 6)
    assert found(r, q, ts=150, metric="L2")[0][0] == 5  # time travel: the slow path


def test_a_search_with_another_metric_than_the_index_is_refused(data):
    x = data["x"][:1000]
    r = fill("L2", x, 1000)
    load(r, "FLAT", x, 1000, "L2")
    with pytest.raises(InvalidArgument, match=r"'IP'.*'L2'"):
        r.search(x[:1], K, 10**6, metric="IP")
    with pytest.raises(InvalidArgument, match="ef"):
        r.search(x[:1], K, 10**6, metric="L2", params={"ef": "many"})
    assert len(r.search(x[:1], K, 10**6, metric="l2", params={"ef": "16"})[0]) == K


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_growing_search_serves_any_metric_whatever_the_field_says(data, metric):
    x, queries = data["x"][:2000], data["queries"][:20]
    for field_metric in ("L2", "COSINE"):
        r = fill(field_metric, x, 0)
        got = found(r, queries, metric=metric)
        assert got == truth(x, queries, metric, np.arange(len(x))), (field_metric, metric)


def test_dropping_the_index_falls_back_to_exact_search(data):
    x, queries = data["x"][:3000], data["queries"][:30]
    for kind in ("HNSW", "IVF_PQ"):
        r = fill("COSINE", x, 2000)
        load(r, kind, x, 2000, "COSINE")
        r.delete(200, [7])
        r.unload_indexes(-1)
        seg = r.segments[P1, SEALED]
        assert seg.index is None and seg.flat is not None and seg.flat.ntotal == 2000
        rows = np.setdiff1d(np.arange(len(x)), [7])
        assert found(r, queries, metric="COSINE") == truth(x, queries, "COSINE", rows)


def test_a_load_waits_until_the_replica_holds_every_indexed_row(data):
    x = data["x"][:1000]
    files = DictFiles()
    body = segment_indexed(files, "HNSW", x, 1000 + np.arange(1000), "L2", SEALED, P2)
    index = read_index(body, files)
    r = Replica(7, schema("L2", DIM))
    assert not r.load_index(P2, SEALED, index)  # nothing applied yet
    r.insert(100, inserted_body(r.schema, list(range(600)), x[:600], SEALED, 1000, P2))
    assert not r.load_index(P2, SEALED, index) and r.serving(P2, SEALED) is None
    r.insert(110, inserted_body(r.schema, list(range(600, 1000)), x[600:], SEALED, 1600, P2))
    assert r.load_index(P2, SEALED, index) and r.serving(P2, SEALED) == body["index_id"]
    assert r.load_index(P2, SEALED, read_index(body, files))  # the same index again: kept
    assert r.segments[P2, SEALED].index is index
    assert found(r, x[[3, 700]], metric="L2", partitions=[P2]) == [
        truth(x, x[[3]], "L2", np.arange(1000))[0],
        truth(x, x[[700]], "L2", np.arange(1000))[0],
    ]
    assert found(r, x[[3]], metric="L2", partitions=[P1]) == [[]]


@pytest.mark.parametrize("kind", ["HNSW", "IVF_SQ8"])
def test_cosine_output_vectors_equal_the_inserted_ones_from_one_copy(data, kind):
    x = data["x"][:1500] * 3.0  # not unit vectors
    r = fill("COSINE", x, 1000)
    growing = r.segments[P1, GROWING]
    stored = growing.stored()
    assert stored is not None and np.allclose(np.linalg.norm(stored, axis=1), 1, rtol=1e-5)
    load(r, kind, x, 1000, "COSINE")
    sealed = r.segments[P1, SEALED]
    assert (sealed.flat is None) == (kind == "HNSW")  # HNSW's own storage is the one copy
    rows = r.get(list(range(1500)), 10**6, ["vec"])
    np.testing.assert_allclose([e["vec"] for e in rows], x, rtol=1e-6, atol=1e-7)
    (hits,) = r.search(x[[1200]], 1, 10**6, output_fields=["vec"], metric="COSINE")
    np.testing.assert_allclose(hits[0]["entity"]["vec"], x[1200], rtol=1e-6)


def test_offset_and_group_by_span_sealed_and_growing_segments(data):
    x, queries = data["x"][:3000], data["queries"][:5]
    n = [i % 4 for i in range(len(x))]
    r = fill("L2", x, 2000, n=n)
    load(r, "FLAT", x, 2000, "L2")
    full = found(r, queries, metric="L2")
    paged = [[h["id"] for h in hits] for hits in r.search(queries, 5, 10**6, offset=5)]
    assert paged == [f[5:10] for f in full]
    grouped = r.search(queries, 3, 10**6, group_by="n", output_fields=["n"])
    assert all(len({h["entity"]["n"] for h in g}) == 3 for g in grouped)
