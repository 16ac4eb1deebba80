"""Partition keys over Milvus's protocols (issue 26): an unmodified pymilvus creates a
collection with `is_partition_key` and `num_partitions`, describe_collection reports them,
rows are found by key, and partition DDL or partition names are refused with Milvus's
messages; REST v2 takes `isPartitionKey` and `params.partitionsNum`."""

from __future__ import annotations

import uuid

import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

NAMED = "not support manually specifying the partition names if partition key mode is used"
rest = rest_fixture()


@pytest.fixture
def name(served: Served) -> str:
    name = f"pkey_{uuid.uuid4().hex[:8]}"
    schema = MilvusClient.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    schema.add_field("tenant", DataType.VARCHAR, max_length=32, is_partition_key=True)
    served.milvus.create_collection(
        name, schema=schema, num_partitions=8, consistency_level="Strong"
    )
    rows = [{"id": i, "vector": [1.0, float(i)], "tenant": f"t{i % 4}"} for i in range(40)]
    served.milvus.insert(name, rows)
    return name


def test_pymilvus_creates_describes_and_reads_by_key(served: Served, name: str) -> None:
    d = served.milvus.describe_collection(name)
    tenant = next(f for f in d["fields"] if f["name"] == "tenant")
    assert tenant.get("is_partition_key") is True and d["num_partitions"] == 8
    assert served.milvus.list_partitions(name) == [f"_default_{i}" for i in range(8)]
    got = served.milvus.query(name, 'tenant == "t1"', output_fields=["id"])
    assert sorted(r["id"] for r in got) == list(range(1, 40, 4))
    (hits,) = served.milvus.search(name, [[1.0, 0.0]], limit=40, filter='tenant in ["t2"]')
    assert sorted(h["id"] for h in hits) == list(range(2, 40, 4))


def test_partition_ddl_and_names_are_refused(served: Served, name: str) -> None:
    calls = [
        ("disable create partition", lambda: served.milvus.create_partition(name, "p")),
        ("disable drop partition", lambda: served.milvus.drop_partition(name, "_default_0")),
        (NAMED, lambda: served.milvus.query(name, "id > 0", partition_names=["_default_1"])),
    ]
    for message, call in calls:
        with pytest.raises(MilvusException) as err:
            call()
        assert message in err.value.message and err.value.code == 1100
    assert len(served.milvus.list_partitions(name)) == 8


def test_rest_creates_a_partition_key_collection(rest: Rest) -> None:
    name = unique("pkey")
    fields = [
        {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
        {"fieldName": "vector", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
        {"fieldName": "tenant", "dataType": "Int64", "isPartitionKey": True},
    ]
    rest.ok(
        "collections/create",
        collectionName=name,
        schema={"fields": fields},
        params={"partitionsNum": 5},
    )
    described = rest.ok("collections/describe", collectionName=name)
    assert described["partitionsNum"] == 5
    assert [f["partitionKey"] for f in described["fields"]] == [False, False, True]
