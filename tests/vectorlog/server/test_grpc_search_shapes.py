"""Search shapes over Milvus's gRPC protocol (issue 26), an unmodified pymilvus against a
served cluster, each answer checked against a numpy brute force: range search (`radius`,
`range_filter`, per metric) on sealed indexed segments (HNSW, IVF_FLAT, FLAT) and growing
ones, filtered or not; group-by with `group_size`; the search iterator (v2) and the query
iterator; Milvus's refusals (range bounds on the wrong side, group-by on a vector or JSON
field, group_size out of range, nq above 16,384)."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from pymilvus import DataType, Function, FunctionType, MilvusClient
from pymilvus.exceptions import MilvusException

from tests.support import wait_until
from tests.vectorlog.server.conftest import Served

DIM, SEALED, GROWING = 8, 1200, 800
#: (metric, index type, build params) of the three collections
KINDS = [
    ("L2", "HNSW", {"M": 8, "efConstruction": 64}),
    ("IP", "IVF_FLAT", {"nlist": 16}),
    ("COSINE", "FLAT", {}),
]
FILTER = "g in [1, 2, 3]"


def vectors() -> np.ndarray:
    return np.random.default_rng(5).standard_normal((SEALED + GROWING, DIM)).astype(np.float32)


def groups() -> np.ndarray:
    return np.arange(SEALED + GROWING) % 7


def create(m: MilvusClient, metric: str, kind: str, build: dict[str, Any]) -> str:
    """A collection of SEALED flushed rows (indexed) and GROWING unflushed ones."""
    name = f"s_{metric}_{uuid.uuid4().hex[:6]}"
    s = m.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    s.add_field("g", DataType.INT64)
    s.add_field("doc", DataType.JSON)
    index = m.prepare_index_params()
    index.add_index("v", index_type=kind, metric_type=metric, params=build)
    m.create_collection(name, schema=s, index_params=index, consistency_level="Strong")
    x, g = vectors(), groups()
    rows = [{"id": i, "v": x[i].tolist(), "g": int(g[i]), "doc": {"i": i}} for i in range(len(x))]
    m.insert(name, rows[:SEALED])
    m.flush(name)
    indexed = lambda: m.describe_index(name, "v")["indexed_rows"] >= SEALED  # noqa: E731
    wait_until(indexed, 60, "the sealed segment indexed", interval=0.1)
    m.insert(name, rows[SEALED:])
    return name


@pytest.fixture(scope="module")
def collections(served: Served) -> dict[str, str]:
    return {metric: create(served.milvus, metric, kind, build) for metric, kind, build in KINDS}


def brute(q: np.ndarray, metric: str) -> np.ndarray:
    """Distances of every row to `q` as Milvus reports them (squared L2, IP, cosine)."""
    x, q64 = vectors().astype(np.float64), q.astype(np.float64)
    if metric == "L2":
        return ((x - q64) ** 2).sum(1)
    if metric == "COSINE":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        q64 = q64 / np.linalg.norm(q64)
    return x @ q64


def nearest_first(d: np.ndarray, metric: str) -> np.ndarray:
    return np.argsort(d if metric == "L2" else -d, kind="stable")


def between(d: np.ndarray, order: np.ndarray, rank: int) -> float:
    """A bound halfway between the rank-th and the next distance (no ties at the bound)."""
    return float((d[order[rank]] + d[order[rank + 1]]) / 2)


def queries() -> np.ndarray:
    return vectors()[[3, 1500, 777]] + np.float32(0.05)


def test_a_function_ranker_vectorlog_does_not_serve_is_refused_not_ignored(
    served: Served, collections: dict[str, str]
) -> None:
    """The boost ranker (a weight for the rows a filter matches, applied on Milvus's query
    nodes) is not served: refused, never ignored (test_grpc_function_rankers.py: the others)."""
    ranker = Function(
        name="boost",
        input_field_names=[],
        function_type=FunctionType.RERANK,
        params={"reranker": "boost", "filter": "g == 1", "weight": 2.0},
    )
    with pytest.raises(MilvusException) as err:
        served.milvus.search(collections["L2"], [queries()[0].tolist()], limit=3, ranker=ranker)
    assert err.value.code == 65535
    assert "vectorlog does not serve the boost ranker" in err.value.message


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
@pytest.mark.parametrize("filtered", [False, True])
def test_range_search_returns_every_row_in_range_nearest_first(
    served: Served, collections: dict[str, str], metric: str, filtered: bool
) -> None:
    keep = np.isin(groups(), [1, 2, 3]) if filtered else np.ones(SEALED + GROWING, bool)
    for q in queries():
        d = brute(q, metric)
        order = nearest_first(d, metric)
        order = order[keep[order]]
        near, far = between(d, order, 20), between(d, order, 140)
        for limit, with_near in ((500, True), (50, True), (500, False)):
            params: dict[str, Any] = {"radius": far}
            if with_near:
                params["range_filter"] = near
            (hits,) = served.milvus.search(
                collections[metric],
                [q.tolist()],
                limit=limit,
                filter=FILTER if filtered else "",
                search_params={"metric_type": metric, "params": params},
            )
            lo = 21 if with_near else 0
            want = order[lo:141][:limit]
            assert [h["id"] for h in hits] == want.tolist(), (metric, limit, with_near)
            got = [h["distance"] for h in hits]
            np.testing.assert_allclose(got, d[want], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("metric", ["L2", "IP"])
def test_a_radius_on_the_wrong_side_of_range_filter_is_refused(
    served: Served, collections: dict[str, str], metric: str
) -> None:
    near, far = (1.0, 5.0) if metric == "L2" else (5.0, 1.0)
    with pytest.raises(MilvusException) as err:
        served.milvus.search(
            collections[metric],
            [queries()[0].tolist()],
            search_params={"params": {"radius": near, "range_filter": far}},
        )
    side = "less than radius for L2" if metric == "L2" else "greater than radius for IP/COSINE"
    assert err.value.code == 1100 and f"range_filter must be {side}" in err.value.message


@pytest.mark.parametrize("metric", ["L2", "COSINE"])
def test_group_by_returns_group_size_hits_of_each_of_limit_groups(
    served: Served, collections: dict[str, str], metric: str
) -> None:
    q = queries()[1]
    order = nearest_first(brute(q, metric), metric)
    g = groups()
    ranked_groups = list(dict.fromkeys(g[order].tolist()))[:3]
    want = [i for grp in ranked_groups for i in order[g[order] == grp][:2].tolist()]
    for strict in (True, False):
        (hits,) = served.milvus.search(
            collections[metric],
            [q.tolist()],
            limit=3,
            group_by_field="g",
            group_size=2,
            strict_group_size=strict,
            output_fields=["g"],
        )
        assert [h["id"] for h in hits] == want
        assert [h["entity"]["g"] for h in hits] == [int(g[i]) for i in want]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_by_field": "v"}, "group_by_field 'v'"),
        ({"group_by_field": "doc"}, "group_by_field 'doc'"),
        ({"group_by_field": "g", "group_size": 11}, "exceeds configured max group size:10"),
        ({"group_by_field": "g", "group_size": 0}, "input group size:0 is negative"),
    ],
)
def test_bad_group_by_is_refused(
    served: Served, collections: dict[str, str], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(MilvusException) as err:
        served.milvus.search(collections["L2"], [queries()[0].tolist()], limit=3, **kwargs)
    assert err.value.code == 1100 and message in err.value.message


def test_more_than_16384_query_vectors_are_refused(
    served: Served, collections: dict[str, str]
) -> None:
    many = np.zeros((16_385, DIM), np.float32) + 0.5
    with pytest.raises(MilvusException) as err:
        served.milvus.search(collections["L2"], many.tolist(), limit=1)
    assert err.value.code == 1100
    assert "should be in range [1, 16384], but got 16385" in err.value.message


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_search_iterator_pages_every_row_once_in_brute_force_order(
    served: Served, collections: dict[str, str], metric: str
) -> None:
    q = queries()[2]
    d = brute(q, metric)
    for filtered in (False, True):
        it = served.milvus.search_iterator(
            collections[metric],
            [q.tolist()],
            batch_size=100,
            filter=FILTER if filtered else "",
            search_params={"metric_type": metric},
        )
        ids: list[int] = []
        dist: list[float] = []
        pages = 0
        while page := it.next():
            pages += 1
            assert len(page) <= 100
            ids += [h["id"] for h in page]
            dist += [h["distance"] for h in page]
        it.close()
        order = nearest_first(d, metric)
        if filtered:
            order = order[np.isin(groups()[order], [1, 2, 3])]
        assert type(it).__name__ == "SearchIteratorV2"
        assert ids == order.tolist() and len(set(ids)) == len(ids)
        assert pages == -(-len(order) // 100)
        steps = np.diff(dist) if metric == "L2" else -np.diff(dist)
        assert (steps >= 0).all()


def test_query_iterator_pages_every_row_once_in_key_order(
    served: Served, collections: dict[str, str]
) -> None:
    it = served.milvus.query_iterator(
        collections["IP"], batch_size=300, filter="g != 4", output_fields=["g"]
    )
    got: list[dict[str, Any]] = []
    while page := it.next():
        got += page
    it.close()
    want = [i for i in range(SEALED + GROWING) if i % 7 != 4]
    assert [r["id"] for r in got] == want
    assert all(r["g"] == r["id"] % 7 for r in got)


def test_search_iterator_v1_pages_every_row_once_in_brute_force_order(
    served: Served, collections: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pymilvus's v1 iterator (its fallback for servers without v2, built on range search):
    the client is made to fall back, the server is unchanged."""
    import pymilvus.milvus_client.milvus_client as mc
    from pymilvus.exceptions import ServerVersionIncompatibleException

    def no_v2(**_: Any) -> Any:
        raise ServerVersionIncompatibleException(message="v2 off for this test")

    monkeypatch.setattr(mc, "SearchIteratorV2", no_v2)
    for metric in ("L2", "IP"):
        q = queries()[0]
        it = served.milvus.search_iterator(
            collections[metric], [q.tolist()], batch_size=100, search_params={"metric_type": metric}
        )
        assert type(it).__name__ == "SearchIterator"
        ids: list[int] = []
        while page := it.next():
            ids += [h["id"] for h in page]
        it.close()
        assert ids == nearest_first(brute(q, metric), metric).tolist()
