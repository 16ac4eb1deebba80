"""add_collection_field over Milvus's protocols (issue 26): an unmodified pymilvus's
MilvusClient.add_collection_field (gRPC AlterCollectionSchema, which pymilvus tries first)
and REST v2's collections/fields/add; describe_collection reports the field, rows inserted
before read as its default or null in query, get and search, rows inserted after carry it,
and a bad field is refused with Milvus's code 1100 and message, nothing added. Milvus Lite
answers UNIMPLEMENTED for it, so there is no differential test."""

from __future__ import annotations

import uuid

import pytest
from pymilvus import DataType
from pymilvus.exceptions import MilvusException

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

rest = rest_fixture()


@pytest.fixture
def name(served: Served) -> str:
    name = f"addf_{uuid.uuid4().hex[:8]}"
    served.milvus.create_collection(name, dimension=2, consistency_level="Strong")
    served.milvus.insert(name, [{"id": i, "vector": [1.0, float(i)]} for i in range(3)])
    return name


def fields(served: Served, name: str) -> dict[str, dict]:
    return {f["name"]: f for f in served.milvus.describe_collection(name)["fields"]}


def test_pymilvus_adds_a_field_old_rows_read_default_new_rows_carry_it(
    served: Served, name: str
) -> None:
    m = served.milvus
    m.add_collection_field(name, "tag", DataType.VARCHAR, max_length=8, nullable=True)
    m.add_collection_field(name, "score", DataType.INT64, nullable=True, default_value=7)
    described = fields(served, name)
    assert described["score"]["default_value"].long_data == 7  # a ValueField, as Milvus
    assert described["tag"]["nullable"] is True
    m.insert(name, [{"id": 5, "vector": [1.0, 5.0], "tag": "x", "score": 1}])
    got = m.query(name, "id >= 0", output_fields=["tag", "score"])
    assert sorted((r["id"], r["tag"], r["score"]) for r in got) == [
        (0, None, 7),
        (1, None, 7),
        (2, None, 7),
        (5, "x", 1),
    ]
    assert [r["score"] for r in m.get(name, [1, 5], output_fields=["score"])] == [7, 1]
    (hits,) = m.search(name, [[1.0, 0.0]], limit=10, filter="tag is null", output_fields=["tag"])
    assert sorted(h["id"] for h in hits) == [0, 1, 2]
    assert all(h["entity"]["tag"] is None for h in hits)
    assert [r["id"] for r in m.query(name, "score == 1")] == [5]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data_type": DataType.FLOAT_VECTOR, "dim": 2, "nullable": True}, "vector field"),
        ({"data_type": DataType.INT64}, "added field must be nullable"),
        ({"data_type": DataType.INT64, "nullable": True, "is_primary": True}, "pk field"),
    ],
    ids=["vector", "not-nullable", "primary"],
)
def test_pymilvus_bad_field_is_refused_with_1100(
    served: Served, name: str, kwargs: dict, message: str
) -> None:
    with pytest.raises(MilvusException) as err:
        served.milvus.add_collection_field(name, "f", **kwargs)
    assert err.value.code == 1100 and message in err.value.message
    assert "f" not in fields(served, name)


def test_pymilvus_duplicate_name_and_unknown_collection_are_refused(
    served: Served, name: str
) -> None:
    with pytest.raises(MilvusException) as err:
        served.milvus.add_collection_field(name, "vector", DataType.INT64, nullable=True)
    assert err.value.code == 1100 and "duplicate field name: vector" in err.value.message
    with pytest.raises(MilvusException) as err:
        served.milvus.add_collection_field("no_such", "f", DataType.INT64, nullable=True)
    assert err.value.code == 100


def test_rest_adds_a_field(rest: Rest) -> None:
    name = unique("addf")
    rest.ok("collections/create", collectionName=name, dimension=2)
    rest.ok("entities/insert", collectionName=name, data=[{"id": 1, "vector": [1.0, 0.0]}])
    field = {"fieldName": "n", "dataType": "Int32", "nullable": True, "defaultValue": 4}
    rest.ok("collections/fields/add", collectionName=name, schema=field)
    described = rest.ok("collections/describe", collectionName=name)
    added = next(f for f in described["fields"] if f["name"] == "n")
    assert added["nullable"] is True and added["defaultValue"] == 4
    got = rest.ok("entities/query", collectionName=name, filter="id >= 0", outputFields=["n"])
    assert [(r["id"], r["n"]) for r in got] == [(1, 4)]
    bad = rest.call(
        "collections/fields/add",
        collectionName=name,
        schema={"fieldName": "m", "dataType": "Int32"},
    )
    assert bad["code"] == 1100 and "added field must be nullable" in bad["message"]


def test_other_schema_alterations_answer_unimplemented(served: Served, name: str) -> None:
    served.milvus.add_collection_field(name, "tag", DataType.INT64, nullable=True)
    with pytest.raises(MilvusException) as err:
        served.milvus.drop_collection_field(name, "tag")
    assert err.value.code == 10
    assert "tag" in fields(served, name)
