"""Answers Milvus gives that vectorlog once did not (issue 33), through an unmodified pymilvus
on a served cluster: idempotent re-creation of a collection, query pagination without a limit,
VARCHAR primary keys with leading spaces on upsert."""

from __future__ import annotations

import uuid

import pytest
from pymilvus import CollectionSchema, DataType, MilvusClient, MilvusException

from tests.vectorlog.server.conftest import Served


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def schema(dim: int = 2) -> CollectionSchema:
    s = MilvusClient.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=dim)
    s.add_field("n", DataType.INT64, nullable=True)
    return s


def test_an_identical_create_is_a_no_op(served: Served) -> None:
    name = unique("again")
    served.milvus.create_collection(name, schema=schema(), consistency_level="Strong")
    served.milvus.insert(name, [{"id": 1, "v": [1.0, 0.0], "n": 3}])
    served.milvus.create_collection(name, schema=schema(), consistency_level="Strong")
    assert served.milvus.query(name, "id > 0", output_fields=["n"]) == [{"id": 1, "n": 3}]
    quick = unique("quick")
    for _ in range(2):  # quick setup: the collection, its index, its load, twice
        served.milvus.create_collection(quick, dimension=4, consistency_level="Strong")
    assert served.milvus.list_indexes(quick) == ["vector"]


@pytest.mark.parametrize(
    "change",
    [
        {"schema": schema(dim=3), "consistency_level": "Strong"},
        {"schema": schema(), "consistency_level": "Bounded"},
        {"schema": schema(), "consistency_level": "Strong", "num_shards": 2},
    ],
    ids=["dim", "level", "shards"],
)
def test_a_create_with_other_parameters_is_refused_as_milvus_does(
    served: Served, change: dict
) -> None:
    name = unique("other")
    served.milvus.create_collection(name, schema=schema(), consistency_level="Strong")
    with pytest.raises(MilvusException) as info:
        served.milvus.create_collection(name, **change)
    assert info.value.code == 65535
    assert info.value.message == (
        f"create duplicate collection with different parameters, collection: {name}"
    )
    assert served.milvus.describe_collection(name)["fields"][1]["params"]["dim"] == 2


def test_an_offset_without_a_limit_is_ignored_as_milvus_does(served: Served) -> None:
    name = unique("page")
    served.milvus.create_collection(name, schema=schema(), consistency_level="Strong")
    served.milvus.insert(name, [{"id": i, "v": [1.0, float(i)]} for i in range(10)])
    every = served.milvus.query(name, "id >= 0", offset=3)  # Milvus: no limit, no offset
    assert sorted(r["id"] for r in every) == list(range(10))
    page = served.milvus.query(name, "id >= 0", offset=3, limit=4)
    assert [r["id"] for r in page] == [3, 4, 5, 6]


@pytest.mark.parametrize("flushed", [False, True])
def test_upsert_of_varchar_keys_with_leading_spaces(served: Served, flushed: bool) -> None:
    name = unique("space")
    s = MilvusClient.create_schema()
    s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=16)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("n", DataType.INT64)
    served.milvus.create_collection(name, schema=s, consistency_level="Strong", num_shards=2)
    rows = [{"id": f"{pad}{i}", "v": [1.0, float(i)], "n": i} for pad in ("", " ", "  ")
            for i in range(4)]  # fmt: skip
    served.milvus.insert(name, rows)
    if flushed:
        served.milvus.flush(name)
    served.milvus.upsert(name, [{"id": f" {i}", "v": [0.0, 1.0], "n": -i} for i in range(4)])
    got = {r["id"]: r["n"] for r in served.milvus.query(name, "n > -100", output_fields=["n"])}
    assert got == {f"{pad}{i}": (-i if pad == " " else i) for pad in ("", " ", "  ")
                   for i in range(4)}  # fmt: skip
    assert served.milvus.get(name, ids=[" 1"], output_fields=["n"]) == [{"id": " 1", "n": -1}]


def test_partition_stats_count_the_partitions_rows(served: Served) -> None:
    name = unique("pstats")
    served.milvus.create_collection(name, schema=schema(), consistency_level="Strong")
    served.milvus.create_partition(name, "p")
    served.milvus.insert(name, [{"id": i, "v": [1.0, 0.0]} for i in range(3)], partition_name="p")
    served.milvus.insert(name, [{"id": 9, "v": [1.0, 0.0]}])
    assert served.milvus.get_partition_stats(name, "p") == {"row_count": 3}
    assert served.milvus.get_partition_stats(name, "_default") == {"row_count": 1}
    assert served.milvus.get_collection_stats(name) == {"row_count": 4}


@pytest.mark.parametrize("name", ["12-s", "a b", "x" * 256])
def test_has_collection_on_an_invalid_name_is_refused(served: Served, name: str) -> None:
    with pytest.raises(MilvusException) as info:
        served.milvus.has_collection(name)
    assert info.value.code == 1100 and "Invalid collection name" in info.value.message


def test_has_partition_checks_names_as_milvus(served: Served) -> None:
    name = unique("haspart")
    served.milvus.create_collection(name, schema=schema(), consistency_level="Strong")
    assert served.milvus.has_partition(name, "12-s") is False  # a valid partition tag
    for bad in ("a b", "p!", "x" * 256):
        with pytest.raises(MilvusException) as info:
            served.milvus.has_partition(name, bad)
        assert info.value.code == 1100, bad
    with pytest.raises(MilvusException) as info:
        served.milvus.has_partition("12-s", "p")
    assert info.value.code == 1100


KEYWORDS = ["and", "OR", "Not", "like", "in", "NULL", "exists", "true", "FALSE", "json_contains"]


@pytest.mark.parametrize("word", [*KEYWORDS, "ARRAY_LENGTH", "text_match"])
def test_a_keyword_of_milvus_filters_is_refused_as_a_field_name(served: Served, word: str) -> None:
    s = schema()
    s.add_field(word, DataType.INT64)
    name = unique("kw")
    with pytest.raises(MilvusException) as info:
        served.milvus.create_collection(name, schema=s)
    assert info.value.code == 1701
    reason = f"{word} is keyword in milvus.: field name invalid[field={word}]"
    assert info.value.message == f"Invalid field name: {word}. {reason}"
    assert not served.milvus.has_collection(name)


def test_words_that_are_keywords_only_in_other_casings_are_field_names(served: Served) -> None:
    s = schema()
    for word in ("Exists", "True_", "iso", "interval", "andy"):
        s.add_field(word, DataType.INT64, nullable=True)
    name = unique("kwok")
    served.milvus.create_collection(name, schema=s, consistency_level="Strong")
    served.milvus.insert(name, [{"id": 1, "v": [1.0, 0.0], "Exists": 4}])
    assert served.milvus.query(name, "id == 1", output_fields=["Exists"]) == [
        {"id": 1, "Exists": 4}
    ]
