"""REST v2 entities over a real cluster (both backends): insert, search, query, get, delete."""

from __future__ import annotations

import pytest

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

rest = rest_fixture()


@pytest.fixture
def filled(rest: Rest) -> str:
    """A quick-setup L2 collection with rows id 0..9, vector [id, 0], color red/blue."""
    name = unique("e")
    strong = {"consistencyLevel": "Strong"}  # reads see the rows just written (Milvus: Bounded)
    rest.ok("collections/create", collectionName=name, dimension=2, metricType="L2", params=strong)
    rows = [
        {"id": i, "vector": [float(i), 0.0], "color": "red" if i % 2 else "blue"} for i in range(10)
    ]
    assert rest.ok("entities/insert", collectionName=name, data=rows) == {
        "insertCount": 10,
        "insertIds": list(range(10)),
    }
    return name


def test_search_nearest_first_with_filter_and_offset(rest: Rest, filled: str) -> None:
    hits = rest.ok(
        "entities/search",
        collectionName=filled,
        data=[[3.2, 0.0]],
        annsField="vector",
        filter='color == "red"',
        limit=2,
        offset=1,
        outputFields=["color"],
        searchParams={"metricType": "L2", "params": {}},
    )
    assert [h["id"] for h in hits] == [5, 1]  # red ids by distance: 3, 5, 1; offset 1
    assert all(h["color"] == "red" for h in hits)
    assert hits[0]["distance"] == pytest.approx(1.8**2, rel=1e-5)


def test_search_two_vectors_flattened(rest: Rest, filled: str) -> None:
    hits = rest.ok("entities/search", collectionName=filled, data=[[0, 0], [9, 0]], limit=1)
    assert [h["id"] for h in hits] == [0, 9]


def test_query_get_delete(rest: Rest, filled: str) -> None:
    rows = rest.ok(
        "entities/query", collectionName=filled, filter="id >= 7", outputFields=["color"]
    )
    assert rows == [
        {"id": 7, "color": "red"},
        {"id": 8, "color": "blue"},
        {"id": 9, "color": "red"},
    ]
    count = rest.ok("entities/query", collectionName=filled, outputFields=["count(*)"])
    assert count == [{"count(*)": 10}]
    got = rest.ok("entities/get", collectionName=filled, id=[2, 4])
    assert [r["id"] for r in got] == [2, 4] and got[0]["vector"] == [2.0, 0.0]
    deleted = rest.ok("entities/delete", collectionName=filled, filter="id in [2, 4]")
    assert deleted == {"deleteCount": 2}
    assert rest.ok("entities/get", collectionName=filled, id=[2, 4]) == []
    assert rest.ok("collections/get_stats", collectionName=filled) == {"rowCount": 8}


def test_output_vectors_are_the_inserted_ones_bit_for_bit(rest: Rest) -> None:
    name = unique("ov")  # COSINE (the default): [7.0, 0.5] once came back [7.0, 0.49999997]
    strong = {"consistencyLevel": "Strong"}
    rest.ok("collections/create", collectionName=name, dimension=2, params=strong)
    rows = [{"id": i, "vector": [float(i), 0.5]} for i in range(12)]
    rest.ok("entities/insert", collectionName=name, data=rows)
    got = rest.ok("entities/query", collectionName=name, filter="id >= 0", outputFields=["vector"])
    assert sorted(got, key=lambda r: r["id"]) == rows
    got = rest.ok("entities/get", collectionName=name, id=[7], outputFields=["vector"])
    assert got == [rows[7]]
    hits = rest.ok(
        "entities/search", collectionName=name, data=[[7.0, 0.5]], limit=3, outputFields=["vector"]
    )
    assert all(h["vector"] == rows[h["id"]]["vector"] for h in hits) and len(hits) == 3
