"""REST v2 search shapes (issue 26) over a real cluster (both backends): a range search from
`searchParams.params` and group-by with `groupSize`, checked against the rows' known
distances, and a radius on the wrong side of range_filter refused with Milvus's code."""

from __future__ import annotations

import pytest

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique
from vectorlog import DataType

rest = rest_fixture()


@pytest.fixture(scope="module")
def line(rest: Rest) -> str:
    """An L2 collection (created in-process: REST's quick setup has no typed scalar field
    to group by) with rows id 0..29 at [id, 0] (squared distance to [0, 0]: id^2),
    tag id % 3."""
    name = unique("r")
    s = rest.client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("tag", DataType.INT64)
    rest.client.create_collection(name, schema=s, metric_type="L2", consistency_level="Strong")
    rows = [{"id": i, "vector": [float(i), 0.0], "tag": i % 3} for i in range(30)]
    rest.ok("entities/insert", collectionName=name, data=rows)
    return name


def test_range_search_over_rest(rest: Rest, line: str) -> None:
    hits = rest.ok(
        "entities/search",
        collectionName=line,
        data=[[0.0, 0.0]],
        limit=100,
        searchParams={"params": {"radius": 50.0, "range_filter": 4.0}},
    )
    assert [h["id"] for h in hits] == [2, 3, 4, 5, 6, 7]  # 4 <= id^2 < 50
    assert [h["distance"] for h in hits] == [4.0, 9.0, 16.0, 25.0, 36.0, 49.0]


def test_range_bounds_on_the_wrong_side_are_refused_over_rest(rest: Rest, line: str) -> None:
    envelope = rest.call(
        "entities/search",
        collectionName=line,
        data=[[0.0, 0.0]],
        searchParams={"params": {"radius": 4.0, "range_filter": 50.0}},
    )
    assert envelope["code"] == 1100
    assert "range_filter must be less than radius for L2" in envelope["message"]


def test_group_size_over_rest(rest: Rest, line: str) -> None:
    hits = rest.ok(
        "entities/search",
        collectionName=line,
        data=[[0.0, 0.0]],
        limit=2,
        groupingField="tag",
        groupSize=3,
        outputFields=["tag"],
    )
    assert [(h["id"], h["tag"]) for h in hits] == [(0, 0), (3, 0), (6, 0), (1, 1), (4, 1), (7, 1)]
