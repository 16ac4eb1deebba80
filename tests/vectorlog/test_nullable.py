"""Nullable fields and default values through the in-process Client: stored, filtered, kept in
binlogs as Milvus 2.5 keeps them (an optional Parquet column, `"nullable":true` in the
descriptor), and read back from them after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.support import stored_files
from tests.vectorlog.storage import milvus_reader as mr
from vectorlog import Client
from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.core.model import DataType


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


ROWS: list[dict[str, Any]] = [
    {"id": 1, "v": [1.0, 0.0], "n": None, "s": None, "f": None, "j": None, "a": None, "d": None},
    {"id": 2, "v": [0.0, 1.0], "n": 5, "s": "x", "f": 1.5, "j": {"k": 1}, "a": [1, 2], "d": 3},
    {"id": 3, "v": [1.0, 1.0]},  # every nullable and defaulted field left out
    {"id": 4, "v": [1.0, 2.0], "n": -1, "s": "", "f": 0.0, "j": None, "a": [], "d": 0},
]
EXPECTED = {
    1: {"n": None, "s": None, "f": None, "j": None, "a": None, "d": 7, "b": None},
    2: {"n": 5, "s": "x", "f": 1.5, "j": {"k": 1}, "a": [1, 2], "d": 3, "b": None},
    3: {"n": None, "s": None, "f": None, "j": None, "a": None, "d": 7, "b": None},
    4: {"n": -1, "s": "", "f": 0.0, "j": None, "a": [], "d": 0, "b": None},
}
FILTERS = {
    "n is null": [1, 3],
    "n is not null": [2, 4],
    "n < 10": [2, 4],
    "n != 5": [4],
    "s == ''": [4],
    "s is null": [1, 3],
    "f >= 0": [2, 4],
    "a is null": [1, 3],
    "j is null": [1, 3, 4],
    "d == 7": [1, 3],
    "b is null": [1, 2, 3, 4],
    # `not` of a comparison on a null is unknown, and a filter keeps true rows only (Milvus
    # Lite's answers; `in` and `is null` are never unknown there)
    "not (n < 10)": [],
    "not (s == 'x')": [4],
    "not (n > 0 and id > 1)": [1, 4],
    "not (n > 0 or id == 3)": [4],
    "not (n is null)": [2, 4],
    "not (n in [5])": [1, 3, 4],
    "not (f + 1 > 1)": [4],
    "not (s like 'x%')": [4],
    "not (not (n != 5))": [4],
    "(n > 0) == false": [4],
}


def create(client: Client, name: str = "nul") -> None:
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True).add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("n", DataType.INT64, nullable=True)
    s.add_field("s", DataType.VARCHAR, max_length=8, nullable=True)
    s.add_field("f", DataType.FLOAT, nullable=True)
    s.add_field("j", DataType.JSON, nullable=True)
    s.add_field("a", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4, nullable=True)
    s.add_field("d", DataType.INT16, default_value=7)
    s.add_field("b", DataType.BOOL, nullable=True)
    client.create_collection(name, schema=s)


def check_reads(client: Client) -> None:
    rows = client.query("nul", "id > 0", output_fields=list("nsfjadb"))
    assert {r.pop("id"): r for r in rows} == EXPECTED
    for expr, ids in FILTERS.items():
        assert sorted(r["id"] for r in client.query("nul", expr)) == ids, expr
    hits = client.search("nul", [[1.0, 0.0]], limit=4, output_fields=["n", "s", "d"])[0]
    assert {h["id"]: h["entity"] for h in hits}[1] == {"n": None, "s": None, "d": 7}


def test_nulls_and_defaults_are_stored_and_filtered(client: Client) -> None:
    create(client)
    client.insert("nul", ROWS)
    check_reads(client)
    fields = {f["name"]: f for f in client.describe_collection("nul")["fields"]}
    assert fields["n"]["nullable"] is True and "nullable" not in fields["id"]
    assert fields["d"]["default_value"] == 7 and "nullable" not in fields["d"]


def test_flushed_nulls_are_optional_parquet_columns_and_survive_a_restart(
    open_client: ClientFactory,
) -> None:
    first = open_client()
    create(first)
    first.insert("nul", ROWS)
    first.flush("nul")
    info = first.describe_collection("nul")
    by_id = {f["field_id"]: f["name"] for f in info["fields"]}
    storage = Path(first.cfg.storage_uri()) / "insert_log" / str(info["collection_id"])
    seen = {}
    for path in stored_files(storage):
        binlog = mr.read_binlog(path.read_bytes())
        name = by_id.get(binlog.descriptor["field_id"])
        if name in ("n", "s", "j", "a", "d"):
            facts = mr.parquet_facts(binlog.events[0].payload)
            column = mr.payload_table(binlog.events[0].payload).column("val")
            seen[name] = (binlog.descriptor["extras"].get("nullable"), facts, column.null_count)
    for name in ("n", "s", "j", "a"):  # an optional column, its nulls in definition levels
        nullable, facts, nulls = seen[name]
        assert nullable is True and facts["nullable"] and facts["max_definition_level"] == 1
        assert nulls == (3 if name == "j" else 2)
    nullable, facts, nulls = seen["d"]  # a default, not nullable: a required column
    assert nullable is None and not facts["nullable"] and nulls == 0
    first.close()
    again = open_client()  # the query node recovers the segment from its binlogs
    check_reads(again)


def test_upsert_replaces_a_value_by_null(client: Client) -> None:
    create(client)
    client.insert("nul", ROWS[1:2])
    client.upsert("nul", [{"id": 2, "v": [0.0, 1.0], "n": None, "s": "y"}])
    (row,) = client.query("nul", "id == 2", output_fields=["n", "s", "d"])
    assert row == {"id": 2, "n": None, "s": "y", "d": 7}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"datatype": DataType.INT64, "default_value": "a"},
            r"type \(Int64\) of field \(x\) is not equal to the type\(DataType_VarChar\)",
        ),
        (
            {"datatype": DataType.VARCHAR, "default_value": 1},
            r"the type\(DataType_Int64\) of default_value",
        ),
        (
            {"datatype": DataType.DOUBLE, "default_value": True},
            r"type \(Double\) of field \(x\) is not equal to the type\(DataType_Bool\)",
        ),
        ({"datatype": DataType.INT8, "default_value": 300}, "default value out of range"),
        ({"datatype": DataType.VARCHAR, "default_value": "abcdefghi"}, "exceeds max length"),
        (
            {"datatype": DataType.JSON, "default_value": "{}"},
            "type not support default_value, type:JSON, name:x",
        ),
        (
            {"datatype": DataType.INT64, "is_primary": True, "default_value": 1},
            "primary field not support default_value, type:Int64, name:x",
        ),
        ({"datatype": DataType.INT64, "is_primary": True, "nullable": True}, "not support null"),
    ],
)
def test_bad_nullable_or_default_settings_are_refused(
    client: Client, kwargs: dict[str, Any], message: str
) -> None:
    s = client.create_schema()
    if not kwargs.get("is_primary"):
        s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("x", max_length=8, **kwargs)
    with pytest.raises(InvalidArgument, match=message):
        client.create_collection("bad", schema=s)
    assert not client.has_collection("bad")


def test_none_in_a_field_without_null_or_default_is_refused(client: Client) -> None:
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True).add_field("v", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("n", DataType.INT64)
    client.create_collection("plain", schema=s)
    with pytest.raises(SchemaMismatch, match="'n'"):
        client.insert("plain", [{"id": 1, "v": [1.0, 0.0], "n": None}])
    with pytest.raises(SchemaMismatch, match="missing"):
        client.insert("plain", [{"id": 1, "v": [1.0, 0.0]}])
    assert client.query("plain", "id > 0") == []


def test_compaction_keeps_nulls_and_a_restart_reads_them(open_client: ClientFactory) -> None:
    first = open_client()
    create(first)
    first.insert("nul", ROWS[:2])  # a segment with nulls in every nullable field
    first.flush("nul")
    first.insert("nul", ROWS[2:])
    first.flush("nul")
    assert len(first.list_segments("nul")) == 2
    first.compact("nul", wait=True)
    assert len(first.list_segments("nul")) == 1  # merged: one binlog per field, nulls in it
    check_reads(first)
    first.close()
    check_reads(open_client())
