"""Event encoding: single-object encoding by default, Confluent wire format with a registry."""

import json

import numpy as np
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.support import unique_topic
from vectorlog.core.model import DataType
from vectorlog.schemas.columns import decode_column, encode_column
from vectorlog.schemas.errors import IncompatibleSchema, MalformedEvent
from vectorlog.schemas.registry import AVRO_DIR, SchemaRegistry, default_registry
from vectorlog.schemas.serde import SINGLE_OBJECT_MAGIC, Event, EventSerde


def rows_inserted(n: int = 3, dim: int = 4) -> Event:
    vecs = np.arange(n * dim, dtype=np.float32).reshape(n, dim)
    cols = [
        {
            "field_id": 100,
            "field_name": "id",
            "column": encode_column(DataType.INT64, np.arange(n, dtype=np.int64)),
        },
        {
            "field_id": 101,
            "field_name": "vector",
            "column": encode_column(DataType.FLOAT_VECTOR, vecs, dim),
        },
        {
            "field_id": 102,
            "field_name": "meta",
            "column": encode_column(DataType.JSON, [{"k": i} for i in range(n)]),
        },
    ]
    body = {
        "collection_id": 7,
        "partition_id": 8,
        "segment_id": 9,
        "num_rows": n,
        "first_row_id": 1000,
        "columns": cols,
    }
    return Event("RowsInserted", 123 << 18, body, 7, "c-dml_0_7v0")


def test_single_object_encoding_has_magic_and_fingerprint():
    data = EventSerde().encode(rows_inserted())
    assert data[:2] == SINGLE_OBJECT_MAGIC
    assert data[2:10] == default_registry().current.fingerprint


def test_rows_inserted_round_trip_keeps_columns_typed():
    serde = EventSerde()
    ev = serde.decode(serde.encode(rows_inserted()))
    assert (ev.type, ev.ts, ev.collection_id, ev.vchannel) == (
        "RowsInserted",
        123 << 18,
        7,
        "c-dml_0_7v0",
    )
    cols = {c["field_name"]: decode_column(c["column"], 3) for c in ev.body["columns"]}
    assert cols["id"].tolist() == [0, 1, 2]
    assert cols["vector"].shape == (3, 4) and cols["vector"][2, 3] == 11.0
    assert cols["meta"] == ['{"k":0}', '{"k":1}', '{"k":2}']


def test_confluent_wire_format_with_a_registry(schema_registry_url: str):
    serde = EventSerde(schema_registry_url=schema_registry_url, topic=unique_topic("t"))
    data = serde.encode(rows_inserted())
    assert data[0] == 0 and len(data) > 5
    assert serde.decode(data).body["num_rows"] == 3
    # single-object encoded events stay readable by a registry-configured serde
    assert serde.decode(EventSerde().encode(rows_inserted())).type == "RowsInserted"


def test_the_registry_gets_the_full_schema_with_docs_and_defaults(schema_registry_url: str):
    topic = unique_topic("t")
    EventSerde(schema_registry_url=schema_registry_url, topic=topic)
    client = SchemaRegistryClient({"url": schema_registry_url})
    registered = json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str or "")
    assert registered == json.loads(default_registry().current.full)
    (vchannel,) = [f for f in registered["fields"] if f["name"] == "vchannel"]
    assert vchannel["default"] == "" and vchannel["doc"]


def test_each_published_version_then_the_current_one_registers_backward_compatibly(
    schema_registry_url: str,
):
    topic = unique_topic("t")
    for version in ("v1", "v2", "v3"):
        EventSerde(SchemaRegistry(AVRO_DIR / version), schema_registry_url, topic)
    current = EventSerde(schema_registry_url=schema_registry_url, topic=topic)
    client = SchemaRegistryClient({"url": schema_registry_url})
    assert client.get_versions(f"{topic}-value") == [1, 2, 3, 4]
    assert current.decode(current.encode(rows_inserted())).body["num_rows"] == 3


def test_an_incompatible_subject_is_refused_naming_it(schema_registry_url: str):
    topic = unique_topic("t")
    other = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]}
    client = SchemaRegistryClient({"url": schema_registry_url})
    client.register_schema(f"{topic}-value", Schema(json.dumps(other), "AVRO"))
    with pytest.raises(IncompatibleSchema, match=f"{topic}-value"):
        EventSerde(schema_registry_url=schema_registry_url, topic=topic)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "unknown magic"),
        (b"garbage!", "unknown magic"),
        (SINGLE_OBJECT_MAGIC + b"\x00" * 8 + b"\x02", "no known schema"),
        (b"\x00\x00\x00\x00\x01", "no schema registry"),
    ],
)
def test_malformed_bytes_raise_with_reason(data, reason):
    with pytest.raises(MalformedEvent, match=reason):
        EventSerde().decode(data)


def test_truncated_body_is_malformed():
    data = EventSerde().encode(rows_inserted())
    with pytest.raises(MalformedEvent, match="undecodable"):
        EventSerde().decode(data[: len(data) // 2])


def test_mismatched_event_type_is_malformed():
    ev = Event("TimeTick", 5, {"source": "x"})
    rec = ev.to_avro()
    rec["event_type"] = "RowsInserted"
    import io

    import fastavro

    buf = io.BytesIO()
    buf.write(SINGLE_OBJECT_MAGIC + default_registry().current.fingerprint)
    fastavro.schemaless_writer(buf, default_registry().current.parsed, rec)
    with pytest.raises(MalformedEvent, match="event_type"):
        EventSerde().decode(buf.getvalue())
