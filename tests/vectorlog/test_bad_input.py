"""Invalid requests are refused with an error naming what was wrong, and nothing is appended."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.clients import ClientFactory, data_events, ddl_changes
from vectorlog import Client, DataType
from vectorlog.core.errors import (
    CollectionConflict,
    CollectionNotFound,
    InvalidArgument,
    InvalidName,
    LimitExceeded,
    PartitionNotFound,
    SchemaMismatch,
    VectorlogError,
)


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


@pytest.fixture
def books(client: Client) -> Client:
    return create_books(client)


def create_books(client: Client) -> Client:
    """Creates "books" (id, vector dim 3, title VARCHAR(5), year) on `client`; returns it."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("title", DataType.VARCHAR, max_length=5)
    s.add_field("year", DataType.INT64)
    client.create_collection("books", schema=s)
    return client


def row(**over):
    return {"id": 1, "vector": [0.1, 0.2, 0.3], "title": "abc", "year": 1999, **over}


BAD_ROWS = [
    ([row(vector=[0.1, 0.2])], r"row 0: vector field 'vector' has dim 2, expected 3"),
    ([row(), row(id=2, vector=[1, 2, 3, 4])], r"row 1: vector field 'vector' has dim 4"),
    ([row(vector=[0.1, math.nan, 0.3])], r"row 0: vector field 'vector' has a NaN"),
    ([row(vector="abc")], r"row 0: vector field 'vector' must be a list of 3 floats"),
    ([{"id": 1, "vector": [0, 0, 0], "title": "x"}], r"row 0: missing field\(s\) \['year'\]"),
    ([row(extra=1)], r"row 0: unknown field\(s\) \['extra'\]"),
    ([row(year="1999")], r"row 0: field 'year' must be an INT64, got '1999'"),
    ([row(year=True)], r"row 0: field 'year' must be an INT64, got True"),
    ([row(year=2**64)], r"field 'year' value 18446744073709551616 is outside INT64"),
    ([row(title=5)], r"row 0: field 'title' must be a string, got 5"),
    (
        [row(title="too long")],
        "length of varchar field title exceeds max length, row number: 0, length: 8, max length: 5",
    ),
    ([row(), row()], r"row 1: primary key 'id' value 1 repeats"),
    ([], r"non-empty list of rows"),
    (["not a dict"], r"row 0 is a str, not a dict"),
]


@pytest.mark.parametrize("rows, message", BAD_ROWS)
def test_bad_rows_are_refused_and_nothing_is_appended(books: Client, rows, message):
    with pytest.raises(SchemaMismatch, match=message):
        books.insert("books", rows)
    assert data_events(books) == []


def test_unknown_collection_and_partition(books: Client):
    with pytest.raises(CollectionNotFound, match="collection=nope\\]"):
        books.insert("nope", [row()])
    with pytest.raises(PartitionNotFound, match=r"partition not found\[partition=p9\]"):
        books.insert("books", [row()], partition_name="p9")
    with pytest.raises(CollectionNotFound, match="collection=nope\\]"):
        books.delete("nope", ids=[1])
    assert data_events(books) == []


def test_bad_delete_keys(books: Client):
    with pytest.raises(SchemaMismatch, match="field 'id' must be an INT64, got 'x'"):
        books.delete("books", ids=["x"])
    with pytest.raises(SchemaMismatch, match="no primary keys"):
        books.delete("books", ids=[])
    assert data_events(books) == []


def test_auto_id_key_must_not_be_supplied(client: Client):
    client.create_collection("auto", dimension=2, auto_id=True)
    with pytest.raises(SchemaMismatch, match="primary key 'id' is auto_id"):
        client.insert("auto", [{"id": 3, "vector": [1.0, 2.0]}])
    assert data_events(client) == []


@pytest.mark.parametrize("name", ["1abc", "a-b", "", "a" * 256, "名前", None])
def test_bad_collection_names_are_refused(client: Client, name):
    with pytest.raises(InvalidName, match="Invalid collection name"):
        client.create_collection(name, dimension=4)
    assert ddl_changes(client) == []


def test_bad_schemas_are_refused_before_anything_is_appended(client: Client):
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=4)
    s.add_field("v", DataType.INT64)
    with pytest.raises(InvalidArgument, match="duplicated field name v found"):
        client.create_collection("c", schema=s)
    bad_field = client.create_schema().add_field("id", DataType.INT64, is_primary=True)
    bad_field.add_field("bad-name", DataType.FLOAT_VECTOR, dim=4)
    with pytest.raises(InvalidName, match="Invalid field name: bad-name"):
        client.create_collection("c", schema=bad_field)
    with pytest.raises(InvalidArgument, match="dim must be 1..32768"):
        client.create_collection("c", dimension=0)
    with pytest.raises(InvalidArgument, match="metric_type 'HAMMING'"):
        client.create_collection("c", dimension=4, metric_type="HAMMING")
    no_pk = client.create_schema().add_field("v", DataType.FLOAT_VECTOR, dim=4)
    array = client.create_schema().add_field("id", DataType.INT64, is_primary=True)
    array.add_field("v", DataType.FLOAT_VECTOR, dim=4).add_field("a", DataType.ARRAY)
    with pytest.raises(InvalidArgument, match="ARRAY field 'a': element_type None"):
        client.create_collection("c", schema=array)
    with pytest.raises(InvalidArgument, match="exactly one primary key, got 0"):
        client.create_collection("c", schema=no_pk)
    assert not client.has_collection("c")
    assert ddl_changes(client) == []


def test_duplicate_collection_is_refused(client: Client):
    client.create_collection("c", dimension=4)
    with pytest.raises(CollectionConflict, match="different parameters, collection: c$"):
        client.create_collection("c", dimension=8)
    assert client.describe_collection("c")["fields"][1]["params"]["dim"] == 4


def test_an_identical_create_is_a_no_op_as_milvus(client: Client):
    client.create_collection("c", dimension=4)
    client.insert("c", [{"id": 1, "vector": [1.0, 0.0, 0.0, 0.0]}])
    client.create_collection("c", dimension=4)  # Milvus's rootcoord: idempotent
    assert [r["id"] for r in client.query("c", "id > 0")] == [1]
    client.create_partition("c", "p")  # no longer the collection a create would make
    with pytest.raises(CollectionConflict):
        client.create_collection("c", dimension=4)


def test_bad_search_requests(books: Client):
    with pytest.raises(
        InvalidArgument, match="search data: row 0: vector field 'vector' has dim 2"
    ):
        books.search("books", [[1.0, 2.0]])
    with pytest.raises(
        InvalidArgument,
        match=r"topk \[0\] is invalid, it should be in range \[1, 16384\], but got 0",
    ):
        books.search("books", [[1.0, 2.0, 3.0]], limit=0)
    with pytest.raises(InvalidArgument, match="field 'nope' does not exist"):
        books.search("books", [[1.0, 2.0, 3.0]], output_fields=["nope"])
    with pytest.raises(InvalidArgument, match="consistency_level 'Sometimes'"):
        books.search("books", [[1.0, 2.0, 3.0]], consistency_level="Sometimes")


def test_vectors_whose_distances_would_overflow_are_refused(books: Client):
    with pytest.raises(SchemaMismatch, match="row 0: vector field 'vector' is too large"):
        books.insert("books", [row(vector=[1e38, 1e38, 1e38])])
    assert data_events(books) == []


def test_varchar_length_counts_utf8_bytes_and_refuses_lone_surrogates(books: Client):
    with pytest.raises(SchemaMismatch, match="exceeds max length, row number: 0, length: 8"):
        books.insert("books", [row(title="😀😀")])
    with pytest.raises(SchemaMismatch, match="not valid Unicode text"):
        books.insert("books", [row(title="\ud800")])
    assert books.insert("books", [row(title="héll")])["insert_count"] == 1  # 5 bytes fits


def test_ddl_too_large_for_a_topic_it_goes_to_is_refused_before_anything_is_appended(
    open_client: ClientFactory,
):
    """The event fits on `ddl` but its broadcast copy (with the vchannel) would not fit on
    `dml`: refused up front, so nothing half-written can brick a reopen."""
    client = open_client()
    with pytest.raises(LimitExceeded, match="over the maximum message size") as err:
        client.create_collection("big", dimension=2, properties={"k": "x" * 1_048_397})
    assert "CollectionCreated" in str(err.value)
    assert ddl_changes(client) == []
    client.create_collection("small", dimension=2)  # the next DDL works
    client.close()
    again = open_client()
    assert again.list_collections() == ["small"]


@pytest.fixture
def rich(client: Client) -> Client:
    s = client.create_schema()
    s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=10)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("score", DataType.DOUBLE)
    s.add_field("meta", DataType.JSON)
    client.create_collection("rich", schema=s)
    return client


def rich_row(**over: Any) -> dict[str, Any]:
    return {"id": "a", "vector": [0.1, 0.2, 0.3], "score": 1.0, "meta": {"k": 1}, **over}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: c.create_collection("x", dimension=2, num_shards=True), "shards_num"),
        (lambda c: c.create_collection("x", dimension=2, id_type="float"), "id_type"),
        (
            lambda c: c.create_collection(
                "x",
                schema=c.create_schema()
                .add_field("RowID", DataType.INT64, is_primary=True)
                .add_field("v", DataType.FLOAT_VECTOR, dim=2),
            ),
            "reserved",
        ),
        (lambda c: c.insert("rich", [rich_row(vector=["1", "2", "3"])]), "vector"),
        (lambda c: c.insert("rich", [rich_row(vector=[True, False, True])]), "vector"),
        (lambda c: c.insert("rich", [rich_row(id="")]), "primary key 'id' is empty"),
        (lambda c: c.insert("rich", [rich_row(score=math.nan)]), "finite number"),
        (lambda c: c.insert("rich", [rich_row(meta={1: 2})]), "not a string"),
        (lambda c: c.insert("rich", [rich_row(meta="\udc00")]), "field 'meta'.*surrogate"),
        (lambda c: c.insert("rich", [rich_row(meta={"k": "\udc00"})]), "'meta'.*surrogate"),
        (lambda c: c.insert("rich", [rich_row(meta={"\udc00": 1})]), "'meta'.*surrogate"),
        (
            lambda c: c.insert("rich", [rich_row(meta={"a": [{"b": ["\udc00"]}]})]),
            "field 'meta' is not JSON: a string holds a lone surrogate",
        ),
        (lambda c: c.upsert("rich", [rich_row(meta=["\ud800"])]), "'meta'.*surrogate"),
        (
            lambda c: c.create_collection(
                "x",
                schema=c.create_schema(description=5)
                .add_field("id", DataType.INT64, is_primary=True)
                .add_field("v", DataType.FLOAT_VECTOR, dim=2),
            ),
            "description of the collection schema must be a string, not 5",
        ),
        (
            lambda c: c.create_collection(
                "x",
                schema=c.create_schema()
                .add_field("id", DataType.INT64, is_primary=True, description=["d"])
                .add_field("v", DataType.FLOAT_VECTOR, dim=2),
            ),
            "description of field 'id' must be a string",
        ),
        (lambda c: c.get("rich", None), "must be a key or a list"),
        (lambda c: c.search("rich", [[0.0] * 3], as_of=-1), "as_of"),
        (lambda c: c.search("rich", [[0.0] * 3], as_of=2**64 + 5), "as_of"),
        (lambda c: c.search("rich", [[0.0] * 3], timeout="x"), "timeout"),
        (lambda c: c.search("rich", [[0.0] * 3], as_of=2**62), "in the future"),
    ],
)
def test_every_invalid_request_is_a_vectorlog_error_naming_the_argument(
    rich: Client, call: Any, message: str
):
    before = len(data_events(rich)), len(ddl_changes(rich))
    with pytest.raises(VectorlogError, match=message):
        call(rich)
    assert (len(data_events(rich)), len(ddl_changes(rich))) == before  # nothing appended


def test_deeply_nested_json_is_refused_not_a_recursion_error(rich: Client):
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(SchemaMismatch, match="nested deeper"):
        rich.insert("rich", [rich_row(meta=deep)])


def test_dynamic_keys_and_values_with_a_lone_surrogate_are_refused(client: Client):
    client.create_collection("dyn", dimension=2)  # quick setup: the dynamic field is on
    good = {"id": 1, "vector": [0.0, 1.0]}
    for bad in ({"x": "\udc00"}, {"\udc00": 1}, {"x": {"y": ["\udfff"]}}):
        with pytest.raises(SchemaMismatch, match=r"row 0: .*'\$meta'.*lone surrogate"):
            client.insert("dyn", [{**good, **bad}])
    assert data_events(client) == []
    assert client.insert("dyn", [{**good, "x": "ok"}])["insert_count"] == 1
