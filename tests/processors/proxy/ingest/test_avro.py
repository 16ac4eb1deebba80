"""Confluent-framed Avro on the ingest topics, on both backends: records serialized by
confluent-kafka's own AvroSerializer against a schema registry (rows with `bytes` or
`array<float>` vectors, a Debezium stream, Avro keys) become searchable; a record whose
schema id the registry lacks is dead-lettered with its position."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from confluent_kafka.serialization import MessageField

from tests.clients import ClientFactory
from tests.processors.proxy.ingest.avro_support import serializer
from tests.processors.proxy.ingest.producer import Raw, produce, wait_consumed
from tests.support import unique_topic
from vectorlog import Client
from vectorlog.streams.deadletter import read_dead_letters


def row_schema(vector: Any) -> str:
    fields = [
        {"name": "id", "type": "long"},
        {"name": "vector", "type": vector},
        {"name": "title", "type": ["null", "string"], "default": None},
    ]
    return json.dumps({"type": "record", "name": "Row", "namespace": "shop", "fields": fields})


DEBEZIUM = json.dumps(
    {
        "type": "record",
        "name": "Envelope",
        "namespace": "cdc.docs",
        "fields": [
            {"name": "before", "type": ["null", json.loads(row_schema("bytes"))], "default": None},
            {"name": "after", "type": ["null", "shop.Row"], "default": None},
            {"name": "op", "type": "string"},
        ],
    }
)
KEY = json.dumps({"type": "record", "name": "Key", "namespace": "cdc.docs", "fields": [
    {"name": "id", "type": "long"}]})  # fmt: skip


def vec(*xs: float) -> bytes:
    return np.array(xs, dtype="<f4").tobytes()


def visible(client: Client) -> dict[int, tuple[list[float], str | None]]:
    found = client.query("c", filter="id >= 0", output_fields=["id", "vector", "title"])
    return {r["id"]: ([float(x) for x in r["vector"]], r.get("title")) for r in found}


def test_avro_rows_and_a_debezium_stream_become_searchable(
    open_client: ClientFactory, schema_registry_url: str
):
    rows_b, rows_a, cdc = unique_topic("rb"), unique_topic("ra"), unique_topic("cdc")
    client = open_client(
        schema_registry_url=schema_registry_url,
        ingest_topics=f"{rows_b}=c,{rows_a}=c:avro,{cdc}=c:debezium",
    )
    client.create_collection("c", dimension=2, metric_type="L2")
    as_bytes = serializer(schema_registry_url, row_schema("bytes"))
    as_array = serializer(schema_registry_url, row_schema({"type": "array", "items": "float"}))
    change, key = serializer(schema_registry_url, DEBEZIUM), serializer(schema_registry_url, KEY)
    for topic in (rows_b, rows_a, cdc):
        client.cluster.log.create_topic(topic, 1)
    wait_consumed(client, rows_b, produce(client, rows_b, [
        (None, as_bytes(rows_b, {"id": 1, "vector": vec(1, 0), "title": "one"})),
        (None, as_bytes(rows_b, {"id": 2, "vector": vec(2, 0), "title": None})),
    ]))  # fmt: skip
    wait_consumed(client, rows_a, produce(client, rows_a, [
        (None, as_array(rows_a, {"id": 3, "vector": [3.0, 0.5], "title": "three"})),
    ]))  # fmt: skip
    k = lambda i: key(cdc, {"id": i}, MessageField.KEY)  # noqa: E731
    stream: list[Raw] = [
        (k(10), change(cdc, {"before": None, "after": {"id": 10, "vector": vec(0, 9)}, "op": "c"})),
        (k(1), change(cdc, {"before": {"id": 1, "vector": vec(1, 0)}, "after": None, "op": "d"})),
        (k(1), None),  # the tombstone after a delete, its key in Avro
        (k(2), None),  # a tombstone alone deletes key 2
    ]
    wait_consumed(client, cdc, produce(client, cdc, stream))
    assert visible(client) == {3: ([3.0, 0.5], "three"), 10: ([0.0, 9.0], None)}
    hits = client.search("c", [[0.0, 8.0]], limit=1, output_fields=["id"])
    assert hits[0][0]["id"] == 10
    assert read_dead_letters(client.cluster.log, client.cluster.topics.dlq) == []


def test_an_unknown_schema_id_and_a_wrong_format_are_dead_lettered(
    open_client: ClientFactory, schema_registry_url: str
):
    strict = unique_topic("json")
    client = open_client(schema_registry_url=schema_registry_url, ingest_topics=f"{strict}=c:json")
    client.create_collection("c", dimension=2, metric_type="L2")
    framed = serializer(schema_registry_url, row_schema("bytes"))(
        strict, {"id": 1, "vector": vec(1, 1), "title": None}
    )
    ingest = client.cluster.topics.ingest
    unknown = b"\x00\x7f\xff\xff\xf0" + framed[5:]
    offsets = produce(client, ingest, [(b"c", unknown), (b"c", framed)])
    client.cluster.log.create_topic(strict, 1)
    wait_consumed(client, strict, produce(client, strict, [(None, framed)]))
    wait_consumed(client, ingest, offsets)
    letters = sorted(
        read_dead_letters(client.cluster.log, client.cluster.topics.dlq),
        key=lambda d: (d.topic, d.offset),
    )
    assert [(d.topic, d.offset) for d in letters] == sorted([(ingest, offsets[0]), (strict, 0)])
    reasons = {d.topic: d.reason for d in letters}
    assert "not in the registry" in reasons[ingest]
    assert "format is json" in reasons[strict]
    assert visible(client) == {1: ([1.0, 1.0], None)}  # the framed row on the default topic
