"""vectorlog.producer's JSON formats (rows, Kafka Connect envelopes, Debezium change events,
tombstones) round-trip through the ingest consumer's own decoder (`formats.decode`) to the
changes and rows the proxy applies; bad rows raise InvalidArgument naming the field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import quick_schema
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.formats import DELETE, UPSERT, Change, decode
from vectorlog.processors.proxy.ingest.rows import fit_row, primary_key
from vectorlog.producer import (
    IngestRecord,
    IngestTopic,
    connect_row,
    debezium_change,
    json_row,
    tombstone,
)

MAPPED = IngestTopic.mapped("shop.products")
DEFAULT = IngestTopic.default("products", cluster="vc")
SCHEMA = quick_schema(3, "L2", enable_dynamic_field=True).validated()
VEC = np.array([0.5, -1.25, 3.0], dtype=np.float32)


def decoded(record: IngestRecord, route_format: str = "auto") -> list[Change]:
    """Returns what the ingest consumer decodes from `record`, as it reads it off the log."""
    from vectorlog.streams.log.base import Record

    collection = None if record.topic == DEFAULT.name else "products"
    route = IngestRoute(record.topic, collection, route_format)
    raw = Record(record.topic, 0, 7, record.value or b"", record.key, record.headers)
    return decode(raw, route)


def upserted(record: IngestRecord) -> dict[str, Any]:
    """Returns the one row `record` upserts, fitted to the schema as the consumer fits it."""
    (change,) = decoded(record)
    assert (change.kind, change.collection) == (UPSERT, "products")
    row = fit_row(SCHEMA, change.item)
    row["vector"] = np.asarray(row["vector"], dtype=np.float32).tolist()
    return row


@pytest.mark.parametrize("vectors", ["array", "base64"])
@pytest.mark.parametrize("topic", [MAPPED, DEFAULT], ids=["mapped", "default"])
def test_json_rows_and_connect_envelopes_decode_to_the_row(topic: IngestTopic, vectors: str):
    row = {"id": np.int64(7), "vector": VEC, "title": "seven", "tags": ["a"], "n": np.int32(2)}
    want = {"id": 7, "vector": VEC.tolist(), "title": "seven", "tags": ["a"], "n": 2}
    for record in (json_row(topic, row, vectors), connect_row(topic, row, vectors)):
        assert upserted(record) == want
        assert record.key == b"7"
        named = () if topic is MAPPED else (("collection", b"products"),)
        assert record.headers == named


def test_the_connect_envelope_carries_a_struct_schema_of_the_row():
    import json

    doc = json.loads(connect_row(MAPPED, {"id": "k", "vector": [1, 2, 3]}, "base64").value or b"")
    assert doc["schema"]["type"] == "struct"
    assert [(f["field"], f["type"]) for f in doc["schema"]["fields"]] == [
        ("id", "string"),
        ("vector", "bytes"),
    ]
    assert doc["payload"]["id"] == "k"


@pytest.mark.parametrize("topic", [MAPPED, DEFAULT], ids=["mapped", "default"])
def test_debezium_creates_updates_and_deletes_decode_to_upserts_and_deletes(topic: IngestTopic):
    old, new = {"id": "a", "vector": [1, 2, 3]}, {"id": "a", "vector": VEC}
    create = debezium_change(topic, "c", after=old)
    update = debezium_change(topic, "u", before=old, after=new, vectors="base64")
    delete = debezium_change(topic, "d", before=new)
    assert upserted(create)["vector"] == [1.0, 2.0, 3.0]
    assert upserted(update)["vector"] == VEC.tolist()
    (gone,) = decoded(delete, "debezium")
    assert gone.kind == DELETE and primary_key(SCHEMA, gone.item) == "a"
    if topic is MAPPED:
        assert {create.key, update.key, delete.key} == {b'"a"'}


@pytest.mark.parametrize("topic", [MAPPED, DEFAULT], ids=["mapped", "default"])
@pytest.mark.parametrize("key", [42, "sku-1"])
def test_a_tombstone_deletes_its_primary_key(topic: IngestTopic, key: Any):
    record = tombstone(topic, key)
    assert record.value is None
    assert decoded(record) == [Change(DELETE, "products", key)]


def test_produce_kwargs_are_confluent_kafkas():
    record = json_row(DEFAULT, {"id": 1, "vector": [1, 2, 3]})
    assert record.produce_kwargs() == {
        "topic": "vc.ingest",
        "key": b"1",
        "value": b'{"id":1,"vector":[1.0,2.0,3.0]}',
        "headers": [("collection", b"products")],
    }
    assert json_row(MAPPED, {"id": 1, "vector": [1]}).produce_kwargs()["headers"] is None


BAD_ROWS = [
    ({"vector": [1, 2, 3]}, "'id'", "missing"),
    ({"id": True, "vector": [1, 2, 3]}, "'id'", "integer or a non-empty string"),
    ({"id": 2**63, "vector": [1, 2, 3]}, "'id'", "outside int64"),
    ({"id": 1, "vector": "oops"}, "'vector'", "numbers"),
    ({"id": 1, "vector": [1, float("nan"), 3]}, "'vector'", "NaN"),
    ({"id": 1, "vector": []}, "'vector'", "non-empty"),
    ({"id": 1, "vector": b"\x00\x00\x80"}, "'vector'", "not float32"),
    ({"id": 1, "vector": [1, 2, 3], "score": float("inf")}, "'score'", "not JSON"),
    ({"id": 1, "vector": [1, 2, 3], "blob": object()}, "'blob'", "not JSON"),
    ({"id": 1, "vector": [1, 2, 3], 5: "x"}, "5", "strings"),
]


@pytest.mark.parametrize(("row", "field", "why"), BAD_ROWS)
def test_a_bad_row_raises_invalid_argument_naming_the_field(row: Any, field: str, why: str):
    for serialize in (json_row, connect_row):
        with pytest.raises(InvalidArgument, match=f"field {field}.*{why}"):
            serialize(MAPPED, row)
    if "id" in row:  # the change event names the same field
        with pytest.raises(InvalidArgument, match=f"field {field}.*{why}"):
            debezium_change(MAPPED, "c", after=row)


def test_bad_arguments_raise_invalid_argument():
    with pytest.raises(InvalidArgument, match="vectors must be one of"):
        json_row(MAPPED, {"id": 1, "vector": [1]}, vectors="hex")
    with pytest.raises(InvalidArgument, match="op must be one of"):
        debezium_change(MAPPED, "x", after={"id": 1, "vector": [1]})
    with pytest.raises(InvalidArgument, match="needs the 'before' row"):
        debezium_change(MAPPED, "d", after={"id": 1, "vector": [1]})
    with pytest.raises(InvalidArgument, match="not list"):
        json_row(MAPPED, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="needs a collection"):
        IngestTopic.default("")
    with pytest.raises(InvalidArgument, match="field 'id'"):
        tombstone(MAPPED, None)


def test_the_orjson_and_json_paths_decode_to_the_same_float32_vectors(
    monkeypatch: pytest.MonkeyPatch,
):
    from vectorlog.producer import json_rows

    x = np.random.default_rng(0).standard_normal((20, 3)).astype(np.float32)
    fast = [upserted(json_row(MAPPED, {"id": i, "vector": v})) for i, v in enumerate(x)]
    monkeypatch.setattr(json_rows, "_PLAIN", ())  # every row takes the json module's path
    slow = [upserted(json_row(MAPPED, {"id": i, "vector": v})) for i, v in enumerate(x)]
    assert fast == slow and [r["vector"] for r in slow] == x.tolist()
