"""vectorlog.producer's Confluent-framed Avro: the record schema derived from a collection
schema, registered under `{topic}-value`; the framed bytes decode with fastavro and the
registered schema, and through the ingest consumer's decoder, to the row; bad rows raise
InvalidArgument naming the field."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator
from typing import Any

import fastavro
import numpy as np
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.processors.proxy.ingest.avro import WriterSchemas
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.formats import UPSERT, decode
from vectorlog.processors.proxy.ingest.rows import fit_row
from vectorlog.producer import AvroRows, IngestRecord, IngestTopic, avro_schema
from vectorlog.streams.log.base import Record

F = FieldSchema
SCHEMA = CollectionSchema(
    (
        F("pk", DataType.VARCHAR, is_primary=True, max_length=16),
        F("emb", DataType.FLOAT_VECTOR, dim=4, metric_type="L2", description="the embedding"),
        F("flag", DataType.BOOL),
        F("small", DataType.INT8),
        F("count", DataType.INT64),
        F("ratio", DataType.FLOAT),
        F("score", DataType.DOUBLE),
        F("title", DataType.VARCHAR, max_length=32),
        F("doc", DataType.JSON),
        F("tags", DataType.ARRAY, element_type=DataType.INT32, max_capacity=8),
    ),
    name="items",
).validated()
ROW = {
    "pk": "a1",
    "emb": [1.0, 2.5, -3.0, 0.0],
    "flag": True,
    "small": -5,
    "count": np.int64(2**40),
    "ratio": 0.5,
    "score": 1e300,
    "title": "héllo",
    "doc": {"k": [1, {"x": None}]},
    "tags": [1, 2, 3],
}


@pytest.fixture
def registry(request: pytest.FixtureRequest) -> Iterator[tuple[str, SchemaRegistryClient]]:
    """(URL, client) of a Schema Registry: the test registry server if the session has one,
    else a `mock://` registry (its state lives in the one client)."""
    try:
        url = str(request.getfixturevalue("schema_registry_url"))
    except pytest.FixtureLookupError:
        url = "mock://producer-tests"
    yield url, SchemaRegistryClient.new_client({"url": url})


def topic(name: str = "items.avro") -> IngestTopic:
    """A mapped topic of its own (AvroRows takes the key fields from the collection schema)."""
    return IngestTopic.mapped(f"{name}-{np.random.default_rng().integers(1 << 30)}")


def writer_schemas(url: str, client: SchemaRegistryClient) -> WriterSchemas:
    """The ingest consumer's view of the registry (a mock:// one shares the test's client)."""
    schemas = WriterSchemas(url)
    if url.startswith("mock://"):
        schemas._client = client  # a mock registry's schemas live in one client object
    return schemas


def unframed(record: IngestRecord, client: SchemaRegistryClient) -> tuple[int, Any]:
    """Decodes a framed value by hand: (schema id, the datum read with the registered schema)."""
    raw = record.value or b""
    assert raw[:1] == b"\x00"
    (schema_id,) = struct.unpack(">I", raw[1:5])
    writer = fastavro.parse_schema(json.loads(client.get_schema(schema_id).schema_str or ""))
    buf = io.BytesIO(raw[5:])
    datum = fastavro.schemaless_reader(buf, writer, None)
    assert buf.tell() == len(raw) - 5  # nothing after the datum
    return schema_id, datum


@pytest.mark.parametrize("vectors", ["bytes", "array"])
def test_framed_rows_decode_with_the_registered_schema(registry: Any, vectors: str):
    url, client = registry
    rows = AvroRows(topic(), SCHEMA, client, vectors=vectors)
    record = rows.row(ROW)
    schema_id, datum = unframed(record, client)
    assert schema_id == rows.schema_id and record.key == b'"a1"' and record.headers == ()
    assert client.get_latest_version(f"{rows.topic.name}-value").schema_id == schema_id
    emb = datum.pop("emb")
    got = np.frombuffer(emb, "<f4") if vectors == "bytes" else np.asarray(emb, np.float32)
    assert got.tolist() == ROW["emb"]
    want = {**ROW, "count": 2**40, "doc": json.dumps(ROW["doc"])}
    assert datum == {k: v for k, v in want.items() if k != "emb"}


@pytest.mark.parametrize("vectors", ["bytes", "array"])
def test_framed_rows_decode_through_the_ingest_consumers_decoder(registry: Any, vectors: str):
    url, client = registry
    rows = AvroRows(topic(), SCHEMA, client, vectors=vectors)
    record = rows.row(ROW)
    raw = Record(rows.topic.name, 0, 0, record.value or b"", record.key)
    (change,) = decode(raw, IngestRoute(raw.topic, "items", "avro"), writer_schemas(url, client))
    assert (change.kind, change.collection) == (UPSERT, "items")
    fitted = fit_row(SCHEMA, change.item)
    assert np.asarray(fitted["emb"], np.float32).tolist() == ROW["emb"]
    assert fitted["count"] == 2**40 and fitted["title"] == "héllo" and fitted["tags"] == [1, 2, 3]


def test_the_default_topic_names_the_collection_in_a_header_the_key_is_the_pk(registry: Any):
    _, client = registry
    target = IngestTopic.default("items", cluster=f"c{np.random.default_rng().integers(99999)}")
    rows = AvroRows(target, SCHEMA, client)
    record = rows.row(ROW)
    assert record.key == b'"a1"' and record.headers == (("collection", b"items"),)
    assert rows.subject == f"{target.name}-value"


def test_the_schema_maps_each_type_with_docs_and_nullable_unions():
    schema = avro_schema(SCHEMA, vectors="array", nullable=["title"])
    fastavro.parse_schema(schema)  # a valid Avro schema
    types = {f["name"]: f["type"] for f in schema["fields"]}
    assert types == {
        "pk": "string",
        "emb": {"type": "array", "items": "float"},
        "flag": "boolean",
        "small": "int",
        "count": "long",
        "ratio": "float",
        "score": "double",
        "title": ["null", "string"],
        "doc": "string",
        "tags": {"type": "array", "items": "int"},
    }
    title = next(f for f in schema["fields"] if f["name"] == "title")
    assert title["default"] is None
    assert schema["name"] == "items" and all(f["doc"] for f in schema["fields"])
    assert next(f for f in schema["fields"] if f["name"] == "emb")["doc"] == "the embedding"
    assert avro_schema(SCHEMA)["fields"][1]["type"] == "bytes"


def test_registering_again_keeps_the_id_and_a_nullable_field_may_be_left_out(registry: Any):
    _, client = registry
    target = topic()
    first = AvroRows(target, SCHEMA, client)
    assert AvroRows(target, SCHEMA, client).schema_id == first.schema_id
    nullable = AvroRows(target, SCHEMA, client, nullable=["title"])
    _, datum = unframed(nullable.row({k: v for k, v in ROW.items() if k != "title"}), client)
    assert datum["title"] is None


BAD = [
    ({"pk": None}, "'pk'", "missing"),
    ({"emb": [1, 2, 3]}, "'emb'", "dim 3 != 4"),
    ({"emb": "x"}, "'emb'", "numbers"),
    ({"small": 128}, "'small'", "outside INT8"),
    ({"count": "7"}, "'count'", "not a INT64"),
    ({"count": True}, "'count'", "not a INT64"),
    ({"flag": 1}, "'flag'", "not a BOOL"),
    ({"score": "1"}, "'score'", "not a DOUBLE"),
    ({"tags": ["a"]}, "'tags'", "not a INT32"),
    ({"tags": [2**40]}, "'tags'", "outside INT32"),
    ({"tags": list(range(9))}, "'tags'", "max_capacity 8"),
    ({"tags": 3}, "'tags'", "not an ARRAY"),
    ({"doc": {"x": float("nan")}}, "'doc'", "not JSON"),
    ({"pk": 5}, "'pk'", "not a VARCHAR"),
    ({"extra": 1}, "'extra'", "not in the Avro schema"),
]


@pytest.mark.parametrize(("change", "field", "why"), BAD)
def test_a_bad_row_raises_invalid_argument_naming_the_field(
    registry: Any, change: dict[str, Any], field: str, why: str
):
    rows = AvroRows(topic(), SCHEMA, registry[1])
    with pytest.raises(InvalidArgument, match=f"{field}.*{why}"):
        rows.row({**ROW, **change})


def test_bad_options_raise_invalid_argument():
    with pytest.raises(InvalidArgument, match="schema does not contain vector field"):
        avro_schema(CollectionSchema((F("pk", DataType.INT64, is_primary=True),)))
    with pytest.raises(InvalidArgument, match="vectors must be one of"):
        avro_schema(SCHEMA, vectors="double")
    with pytest.raises(InvalidArgument, match=r"nullable fields \['nope'\]"):
        avro_schema(SCHEMA, nullable=["nope"])


def test_a_json_field_arrives_as_its_json_document(registry: Any):
    url, client = registry
    rows = AvroRows(topic(), SCHEMA, client)
    record = rows.row(ROW)
    raw = Record(rows.topic.name, 0, 0, record.value or b"", record.key)
    (change,) = decode(raw, IngestRoute(raw.topic, "items", "avro"), writer_schemas(url, client))
    assert change.json_text and fit_row(SCHEMA, change.item, change.json_text)["doc"] == ROW["doc"]
