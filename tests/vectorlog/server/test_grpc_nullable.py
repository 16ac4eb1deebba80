"""Nullable fields and default values over Milvus's gRPC protocol, as an unmodified pymilvus 3
sends them (a nullable column's valid values plus FieldData.valid_data) and reads them back
(None where valid_data says null)."""

from __future__ import annotations

import uuid

import pytest
from pymilvus import DataType, MilvusClient, MilvusException

from tests.vectorlog.server.conftest import Served

NULL_ROW = {"id": 1, "v": [1.0, 0.0], "n": None, "s": None, "f": None, "j": None, "a": None}
FULL_ROW = {"id": 2, "v": [0.0, 1.0], "n": 5, "s": "x", "f": 1.5, "j": {"k": 1}, "a": [1, 2]}
LEFT_OUT = {"id": 3, "v": [1.0, 1.0]}  # every nullable and defaulted field left out


def nullable_schema() -> object:
    s = MilvusClient.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("n", DataType.INT64, nullable=True)
    s.add_field("s", DataType.VARCHAR, max_length=20, nullable=True)
    s.add_field("f", DataType.FLOAT, nullable=True)
    s.add_field("j", DataType.JSON, nullable=True)
    s.add_field("a", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4, nullable=True)
    s.add_field("d", DataType.INT64, default_value=7)
    s.add_field("ds", DataType.VARCHAR, max_length=20, default_value="zz", nullable=True)
    return s


@pytest.fixture
def name(served: Served) -> str:
    name = f"nul_{uuid.uuid4().hex[:10]}"
    served.milvus.create_collection(name, schema=nullable_schema(), consistency_level="Strong")
    served.milvus.insert(name, [{**NULL_ROW, "d": None, "ds": None}, {**FULL_ROW, "d": 3}])
    served.milvus.insert(name, [LEFT_OUT])
    return name


def ids(rows: list) -> list[int]:
    return sorted(r["id"] for r in rows)


def test_describe_reports_nullable_and_default_values(served: Served, name: str) -> None:
    fields = {f["name"]: f for f in served.milvus.describe_collection(name)["fields"]}
    assert fields["n"].get("nullable") is True and "default_value" not in fields["n"]
    assert "nullable" not in fields["id"]
    assert fields["d"]["default_value"].long_data == 7
    assert fields["ds"]["default_value"].string_data == "zz" and fields["ds"]["nullable"]


def test_nulls_and_defaults_are_stored_and_read_back(served: Served, name: str) -> None:
    rows = {r["id"]: r for r in served.milvus.query(name, "id > 0", output_fields=["*"])}
    for i in (1, 3):  # None given, or the field left out: null, or the default
        assert {k: rows[i][k] for k in "nsfja"} == dict.fromkeys("nsfja")
        assert rows[i]["d"] == 7 and rows[i]["ds"] == "zz"
    assert {k: rows[2][k] for k in ("n", "s", "f", "j", "a", "d", "ds")} == {
        "n": 5, "s": "x", "f": 1.5, "j": {"k": 1}, "a": [1, 2], "d": 3, "ds": "zz"
    }  # fmt: skip


def test_search_outputs_none_for_nulls(served: Served, name: str) -> None:
    hits = served.milvus.search(name, [[1.0, 0.0]], limit=3, output_fields=["n", "s", "j", "a"])
    by_id = {h["id"]: h["entity"] for h in hits[0]}
    assert by_id[1] == {"n": None, "s": None, "j": None, "a": None}
    assert by_id[2] == {"n": 5, "s": "x", "j": {"k": 1}, "a": [1, 2]}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("n is null", [1, 3]),
        ("n is not null", [2]),
        ("s is null", [1, 3]),
        ("j is null", [1, 3]),
        ("a is not null", [2]),
        ("f is null", [1, 3]),
        ("n > 1", [2]),
        ("n != 5", []),  # a null compares false, != included (Milvus)
        ("s != 'x'", []),
        ("d == 7", [1, 3]),
    ],
)
def test_filters_on_nullable_fields(served: Served, name: str, expr: str, expected: list) -> None:
    assert ids(served.milvus.query(name, expr, output_fields=["id"])) == expected


@pytest.mark.parametrize(
    ("dtype", "value", "expected"),
    [
        (DataType.INT64, "a", "Int64) of field (x) is not equal to the type(DataType_VarChar"),
        (DataType.VARCHAR, 5, "VarChar) of field (x) is not equal to the type(DataType_Int64"),
        (DataType.BOOL, 1, "Bool) of field (x) is not equal to the type(DataType_Int64"),
        (DataType.INT32, True, "Int32) of field (x) is not equal to the type(DataType_Bool"),
    ],
)
def test_a_default_of_another_type_is_refused_as_milvus_does(
    served: Served, dtype: DataType, value: object, expected: str
) -> None:
    s = MilvusClient.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("x", dtype, default_value=value, max_length=10)
    name = f"bad_{uuid.uuid4().hex[:10]}"
    with pytest.raises(MilvusException) as info:
        served.milvus.create_collection(name, schema=s)
    assert info.value.code == 1100
    assert info.value.message == f"type ({expected}) of default_value: invalid parameter"
    assert not served.milvus.has_collection(name)


def test_a_nullable_primary_key_is_refused(served: Served) -> None:
    s = MilvusClient.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True, nullable=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    with pytest.raises(MilvusException, match="not support null"):
        served.milvus.create_collection(f"bad_{uuid.uuid4().hex[:10]}", schema=s)


def test_none_in_a_field_that_is_not_nullable_is_refused(served: Served, name: str) -> None:
    s = MilvusClient.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("n", DataType.INT64)
    other = f"nn_{uuid.uuid4().hex[:10]}"
    served.milvus.create_collection(other, schema=s, consistency_level="Strong")
    with pytest.raises((MilvusException, ValueError, TypeError)):  # pymilvus or the server
        served.milvus.insert(other, [{"id": 1, "v": [1.0, 0.0], "n": None}])
    assert served.milvus.query(other, "id > 0") == []
