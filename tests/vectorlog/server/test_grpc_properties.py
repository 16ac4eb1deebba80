"""Collection properties over Milvus's protocols (issue 26): an unmodified pymilvus's
alter_collection_properties / drop_collection_properties (gRPC AlterCollection) and REST v2's
collections/alter_properties and drop_properties; describe_collection reports them, a bad
value is refused with Milvus's code 1100 and message, and `collection.ttl.seconds` hides
expired rows from reads."""

from __future__ import annotations

import uuid

import pytest
from pymilvus.exceptions import MilvusException

from tests.support import wait_until
from tests.vectorlog.server.conftest import Served
from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

TTL = "collection.ttl.seconds"
rest = rest_fixture()


@pytest.fixture
def name(served: Served) -> str:
    name = f"props_{uuid.uuid4().hex[:8]}"
    served.milvus.create_collection(name, dimension=2, consistency_level="Strong")
    served.milvus.insert(name, [{"id": i, "vector": [1.0, float(i)]} for i in range(5)])
    return name


def test_pymilvus_alters_drops_and_describes_properties(served: Served, name: str) -> None:
    served.milvus.alter_collection_properties(name, {TTL: 3600, "mmap.enabled": True})
    served.milvus.alter_collection_properties(name, {"k": "v"})
    props = served.milvus.describe_collection(name)["properties"]
    assert props == {TTL: "3600", "mmap.enabled": "True", "k": "v"}
    served.milvus.drop_collection_properties(name, ["k", "absent"])
    assert served.milvus.describe_collection(name)["properties"] == {
        TTL: "3600",
        "mmap.enabled": "True",
    }


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({TTL: "abc"}, "collection TTL is not a valid positive integer"),
        ({TTL: -5}, "collection TTL is out of range, expect [-1, 3155760000], got -5"),
        ({"mmap.enabled": "yes"}, "invalid mmap.enabled value: yes"),
    ],
)
def test_bad_values_are_refused_with_milvus_code(
    served: Served, name: str, props: dict, message: str
) -> None:
    with pytest.raises(MilvusException) as err:
        served.milvus.alter_collection_properties(name, props)
    assert err.value.code == 1100 and message in err.value.message
    assert served.milvus.describe_collection(name)["properties"] == {}


def test_a_missing_collection_is_refused_before_the_properties(served: Served) -> None:
    with pytest.raises(MilvusException) as err:
        served.milvus.drop_collection_properties("no_such_collection", [TTL])
    assert err.value.code == 100


def test_expired_rows_are_not_returned_over_grpc(served: Served, name: str) -> None:
    served.milvus.alter_collection_properties(name, {TTL: 1})

    def count() -> int:
        return int(served.milvus.query(name, output_fields=["count(*)"])[0]["count(*)"])

    wait_until(lambda: count() == 0, 20.0, "the rows to expire")
    served.milvus.insert(name, [{"id": 9, "vector": [1.0, 9.0]}])
    (hits,) = served.milvus.search(name, [[1.0, 0.0]], limit=10)
    assert [h["id"] for h in hits] == [9]
    assert [r["id"] for r in served.milvus.get(name, [0, 1, 9])] == [9]


def test_rest_alters_and_drops_properties(rest: Rest) -> None:
    name = unique("props")
    rest.ok("collections/create", collectionName=name, dimension=2)
    rest.ok("collections/alter_properties", collectionName=name, properties={TTL: 60})
    described = rest.ok("collections/describe", collectionName=name)
    assert {"key": TTL, "value": "60"} in described["properties"]
    rest.ok("collections/drop_properties", collectionName=name, propertyKeys=[TTL])
    described = rest.ok("collections/describe", collectionName=name)
    assert all(p["key"] != TTL for p in described["properties"])
    bad = rest.call("collections/alter_properties", collectionName=name, properties={TTL: "x"})
    assert bad["code"] == 1100 and "not a valid positive integer" in bad["message"]
