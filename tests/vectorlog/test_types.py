"""Scalar types INT8, INT16, INT32, FLOAT and ARRAY (issue 8), on both log backends: they
round-trip through insert -> log -> query/get/search and a restart, filters on them agree
with Python on the same rows, bad values and schemas are refused before anything is written,
and the binlogs carry them with Milvus's payload types."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory, data_events, ddl_changes
from tests.support import stored_files
from tests.vectorlog.storage import milvus_reader as mr
from tests.vectorlog.test_flush import segment_rows, storage
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.core.model import CollectionSchema, FieldSchema
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


N = 60
TYPED = ("id", "i8", "i16", "i32", "f", "ints", "tags", "fs", "bs")


def f32(x: float) -> float:
    """`x` as Milvus returns a FLOAT: rounded to float32."""
    return float(np.float32(x))


def make_typed(client: Client) -> list[dict[str, Any]]:
    """Creates "typed" (2 shards) with one field of each new type, inserts N rows (range
    edges included) in two batches; returns the rows as Milvus returns them."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vec", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("i8", DataType.INT8)
    s.add_field("i16", DataType.INT16)
    s.add_field("i32", DataType.INT32)
    s.add_field("f", DataType.FLOAT)
    s.add_field("ints", DataType.ARRAY, element_type=DataType.INT32, max_capacity=4)
    s.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=3, max_length=5)
    s.add_field("fs", DataType.ARRAY, element_type=DataType.FLOAT, max_capacity=2)
    s.add_field("bs", DataType.ARRAY, element_type=DataType.BOOL, max_capacity=2)
    client.create_collection("typed", schema=s, metric_type="L2", num_shards=2)
    rng = np.random.default_rng(8)
    rows: list[dict[str, Any]] = []
    for k in range(N):
        edge = k % 3 == 0
        rows.append(
            {
                "id": k,
                "vec": [float(k), 1.0],
                "i8": (-128 if k % 2 else 127) if edge else int(rng.integers(-128, 128)),
                "i16": (-(2**15) if k % 2 else 2**15 - 1) if edge else int(rng.integers(-99, 99)),
                "i32": (-(2**31) if k % 2 else 2**31 - 1) if edge else k * 1000,
                "f": float(rng.normal()) * 10,
                "ints": [int(v) for v in rng.integers(-5, 5, size=k % 5)],
                "tags": ["t" + str(j) for j in range(k % 4)],
                "fs": [k / 3] * (k % 3),
                "bs": [k % 2 == 0] * (k % 3),
            }
        )
    client.insert("typed", rows[:25])
    client.insert("typed", rows[25:])
    return [{**r, "f": f32(r["f"]), "fs": [f32(x) for x in r["fs"]]} for r in rows]


FILTERS: list[tuple[str, Any]] = [
    ("i8 > 100", lambda r: r["i8"] > 100),
    ("i8 == -128", lambda r: r["i8"] == -128),
    ("i16 < 0 and i32 <= -2147483648", lambda r: r["i16"] < 0 and r["i32"] <= -(2**31)),
    ("i32 in [2000, 4000, -2147483648]", lambda r: r["i32"] in (2000, 4000, -(2**31))),
    ("i8 + i16 > 10", lambda r: r["i8"] + r["i16"] > 10),
    ("f > 1.5", lambda r: r["f"] > 1.5),
    ("-3 < f < 3", lambda r: -3 < r["f"] < 3),
    ("array_contains(ints, 3)", lambda r: 3 in r["ints"]),
    ("array_contains_all(ints, [1, -1])", lambda r: {1, -1} <= set(r["ints"])),
    ("array_contains_any(tags, ['t2', 'zz'])", lambda r: "t2" in r["tags"]),
    ("array_length(ints) == 3", lambda r: len(r["ints"]) == 3),
    ("array_length(tags) >= 2", lambda r: len(r["tags"]) >= 2),
    ("ints[0] > 0", lambda r: len(r["ints"]) > 0 and r["ints"][0] > 0),
    ('tags[1] == "t1"', lambda r: len(r["tags"]) > 1 and r["tags"][1] == "t1"),
    ("fs[0] > 5", lambda r: len(r["fs"]) > 0 and r["fs"][0] > 5),
    ("bs[0] == true", lambda r: len(r["bs"]) > 0 and r["bs"][0]),
    ("array_length(fs) == 0 or i8 < -100", lambda r: not r["fs"] or r["i8"] < -100),
]


def check_typed(client: Client, rows: list[dict[str, Any]]) -> None:
    """Output (query, get, search) and every filter against Python on `rows`."""
    scalars = [{k: v for k, v in r.items() if k != "vec"} for r in rows]
    got = client.query("typed", filter="id >= 0")  # every field, in key order
    assert [{k: v for k, v in r.items() if k != "vec"} for r in got] == scalars
    assert [r.keys() for r in got] == [r.keys() for r in rows]
    assert client.get("typed", [7, 3], output_fields=[*TYPED]) == [scalars[7], scalars[3]]
    (hits,) = client.search("typed", [[5.0, 1.0]], limit=1, output_fields=["i8", "f", "tags"])
    assert hits[0]["id"] == 5
    assert hits[0]["entity"] == {k: rows[5][k] for k in ("i8", "f", "tags")}
    (grouped,) = client.search("typed", [[0.0, 1.0]], limit=4, group_by_field="i8")
    nearest: dict[int, int] = {}  # L2 from (0, 1): the smallest key of each i8 value is nearest
    for r in rows:
        nearest.setdefault(r["i8"], r["id"])
    assert [h["id"] for h in grouped] == sorted(nearest.values())[:4]
    for text, keep in FILTERS:
        got = client.query("typed", filter=text, output_fields=["id"])
        assert [r["id"] for r in got] == [r["id"] for r in rows if keep(r)], text
        assert any(keep(r) for r in rows), f"{text} selects nothing: a weak check"
        (hits,) = client.search("typed", [[0.0, 1.0]], limit=N, filter=text)
        assert sorted(h["id"] for h in hits) == [r["id"] for r in rows if keep(r)], text


def test_new_types_round_trip_filter_and_survive_a_restart(open_client: ClientFactory):
    first = open_client()
    rows = make_typed(first)
    check_typed(first, rows)
    first.close()
    check_typed(open_client(), rows)


def test_new_types_survive_a_restart_from_their_binlogs(open_client: ClientFactory):
    first = open_client()
    rows = make_typed(first)
    first.flush("typed", timeout=60)
    first.close()
    second = open_client()
    assert probes.loaded_rows(second) == N
    check_typed(second, rows)


def good_row(**over: Any) -> dict[str, Any]:
    row = {
        "id": 1,
        "vec": [0.0, 1.0],
        "i8": 1,
        "i16": 1,
        "i32": 1,
        "f": 1.0,
        "ints": [1],
        "tags": ["a"],
        "fs": [],
        "bs": [True],
    }
    return {**row, **over}


BAD_VALUES = [
    (good_row(i8=128), r"row 1: field 'i8' value 128 is outside INT8 \(-128..127\)"),
    (good_row(i8=-129), r"field 'i8' value -129 is outside INT8"),
    (good_row(i16=2**15), r"field 'i16' value 32768 is outside INT16"),
    (good_row(i32=-(2**31) - 1), r"field 'i32' value -2147483649 is outside INT32"),
    (good_row(i8=1.5), r"field 'i8' must be an INT8, got 1.5"),
    (good_row(i32=True), r"field 'i32' must be an INT32, got True"),
    (good_row(f=1e39), r"field 'f' must be a finite FLOAT \(float32\), got 1e\+39"),
    (good_row(f=math.nan), r"field 'f' must be a finite FLOAT"),
    (good_row(f="1"), r"field 'f' must be a finite FLOAT"),
    (good_row(ints=[1, 2, 3, 4, 5]), r"ARRAY field 'ints' has 5 elements, max_capacity 4"),
    (good_row(ints=[2**31]), r"ARRAY field 'ints' holds INT32 integers .*got 2147483648"),
    (good_row(ints=["1"]), r"ARRAY field 'ints' holds INT32 integers .*got '1'"),
    (good_row(ints=5), r"ARRAY field 'ints' must be a list, got 5"),
    (good_row(tags=["toolong"]), r"ARRAY field 'tags' holds strings of at most 5 bytes"),
    (good_row(tags=[1]), r"ARRAY field 'tags' holds strings"),
    (good_row(fs=[1e39]), r"ARRAY field 'fs' holds finite FLOAT \(float32\) numbers"),
    (good_row(bs=[1]), r"ARRAY field 'bs' holds bools, got 1"),
    (good_row(extra=1), r"row 1: unknown field\(s\) \['extra'\]"),  # no dynamic field
]


@pytest.mark.parametrize(("bad", "message"), BAD_VALUES)
def test_bad_values_are_refused_naming_the_field_before_anything_is_written(
    client: Client, bad: dict[str, Any], message: str
):
    make_typed(client)
    before = len(data_events(client))
    with pytest.raises(SchemaMismatch, match=message):
        client.insert("typed", [good_row(id=100), bad])
    assert len(data_events(client)) == before
    assert client.query("typed", output_fields=["count(*)"]) == [{"count(*)": N}]


def array_schema(client: Client, **field: Any) -> Any:
    s = client.create_schema().add_field("id", DataType.INT64, is_primary=True)
    return s.add_field("v", DataType.FLOAT_VECTOR, dim=2).add_field("a", **field)


BAD_FIELDS = [
    ({"datatype": DataType.ARRAY, "max_capacity": 3}, "element_type None is not one of"),
    (
        {"datatype": DataType.ARRAY, "element_type": DataType.JSON, "max_capacity": 3},
        "element_type <DataType.JSON: 'JSON'> is not one of",
    ),
    ({"datatype": DataType.ARRAY, "element_type": DataType.INT8}, "max_capacity must be 1..4096"),
    (
        {"datatype": DataType.ARRAY, "element_type": DataType.INT8, "max_capacity": 4097},
        "max_capacity must be 1..4096, not 4097",
    ),
    (
        {"datatype": DataType.ARRAY, "element_type": DataType.VARCHAR, "max_capacity": 2},
        "VARCHAR elements need max_length",
    ),
    (
        {"datatype": DataType.INT8, "element_type": DataType.INT8},
        "element_type and max_capacity are for ARRAY fields only",
    ),
]


@pytest.mark.parametrize(("field", "message"), BAD_FIELDS)
def test_bad_array_fields_are_refused_naming_the_field(
    client: Client, field: dict[str, Any], message: str
):
    with pytest.raises(InvalidArgument, match=f"field 'a': {message}"):
        client.create_collection("c", schema=array_schema(client, **field))
    assert ddl_changes(client) == []


def test_describe_shows_element_type_and_max_capacity(client: Client):
    make_typed(client)
    fields = {f["name"]: f for f in client.describe_collection("typed")["fields"]}
    assert fields["i8"]["type"] is DataType.INT8 and fields["f"]["type"] is DataType.FLOAT
    assert fields["tags"]["element_type"] is DataType.VARCHAR
    assert fields["tags"]["params"] == {"max_capacity": 3, "max_length": 5}
    assert fields["ints"]["params"] == {"max_capacity": 4}
    assert "element_type" not in fields["i32"]


def decode_array_rows(rows: list[bytes]) -> list[list[Any]]:
    """Decodes Array binlog rows with Milvus's own schemapb (pymilvus's generated code)."""
    schema_pb2 = pytest.importorskip("pymilvus.grpc_gen.schema_pb2")
    out = []
    for row in rows:
        field = schema_pb2.ScalarField.FromString(row)
        kind = field.WhichOneof("data")
        out.append(list(getattr(field, kind).data))
    return out


def test_binlogs_carry_the_new_types_with_milvus_payload_types(client: Client):
    rows = make_typed(client)
    client.flush("typed")
    schema = {f["name"]: f["field_id"] for f in client.describe_collection("typed")["fields"]}
    types: dict[int, int] = {}
    values: dict[int, list[Any]] = {}
    for info in client.list_segments("typed"):
        for fid, (code, got) in segment_rows_typed(client, info).items():
            types[fid] = code
            values.setdefault(fid, []).extend(got)
    expected = {"i8": 2, "i16": 3, "i32": 4, "f": 10, "ints": 22, "tags": 22, "fs": 22, "bs": 22}
    assert {name: types[schema[name]] for name in expected} == expected
    by_id = {r["id"]: r for r in rows}
    keys = values[schema["id"]]
    for name in ("i8", "i16", "i32", "f"):
        assert list(values[schema[name]]) == [by_id[k][name] for k in keys], name
    for name in ("ints", "tags", "fs", "bs"):
        assert decode_array_rows(values[schema[name]]) == [by_id[k][name] for k in keys], name
    assert segment_rows(client, client.list_segments("typed")[0])  # the shared reader agrees


def segment_rows_typed(client: Client, info: dict[str, Any]) -> dict[int, tuple[int, list[Any]]]:
    """Returns {field id: (payload data type, values)} of a segment's insert logs."""
    seg = f"{info['collection_id']}/{info['partition_id']}/{info['segment_id']}"
    out: dict[int, tuple[int, list[Any]]] = {}
    for path in stored_files(storage(client) / "insert_log" / seg):
        binlog = mr.read_binlog(path.read_bytes())
        code = binlog.descriptor["payload_data_type"]
        got = [v for e in binlog.events for v in list(mr.decode_values(code, e.payload))]
        fid = binlog.descriptor["field_id"]
        out[fid] = (code, [*out.get(fid, (code, []))[1], *got])
    return out


def test_schemas_round_trip_through_avro_and_revalidate_to_the_same() -> None:
    fields = (
        FieldSchema("id", DataType.INT64, is_primary=True),
        FieldSchema("v", DataType.FLOAT_VECTOR, dim=2, metric_type="L2"),
        FieldSchema(
            "tags", DataType.ARRAY, max_length=5, element_type=DataType.VARCHAR, max_capacity=3
        ),
        FieldSchema("i8", DataType.INT8),
    )
    schema = CollectionSchema(fields, name="c", enable_dynamic_field=True).validated()
    assert [(f.name, f.field_id, f.is_dynamic) for f in schema.fields][-1] == ("$meta", 104, True)
    assert schema.validated() == schema  # $meta is not added twice
    assert CollectionSchema.from_avro(schema.to_avro()) == schema
    with pytest.raises(InvalidArgument, match="needs enable_dynamic_field"):
        CollectionSchema((*fields, schema.fields[-1])).validated()
