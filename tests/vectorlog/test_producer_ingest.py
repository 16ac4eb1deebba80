"""vectorlog.producer end to end, on both backends: the SDK's records of each format (JSON rows,
Connect envelopes, Debezium events, tombstones, Confluent-framed Avro), on a mapped topic and
on the default ingest topic, produced with `IngestProducer` (Kafka) or appended to the
embedded log, become the collection's rows; nothing is dead-lettered."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.processors.proxy.ingest.producer import wait_consumed
from tests.support import unique_topic
from vectorlog import Client
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import quick_schema
from vectorlog.producer import (
    AvroRows,
    IngestProducer,
    IngestRecord,
    IngestTopic,
    ProduceFailed,
    connect_row,
    debezium_change,
    json_row,
    tombstone,
)
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.log.base import Append


def send(client: Client, records: Sequence[IngestRecord]) -> list[int]:
    """Produces `records` (all to one topic, partition 0) as a user would; returns offsets."""
    if not client.cfg.is_kafka:
        appends = [Append(0, r.value or b"", r.key, r.headers) for r in records]
        return client.cluster.log.append(records[0].topic, appends)
    offsets: dict[int, int] = {}
    with IngestProducer(client.cfg.bootstrap) as producer:
        for i, record in enumerate(records):
            producer.produce(record, partial(_note_offset, offsets, i))
        producer.flush()
    assert producer.delivered == len(records)
    return [offsets[i] for i in range(len(records))]


def _note_offset(offsets: dict[int, int], i: int, _err: Any, msg: Any) -> None:
    offsets[i] = msg.offset()


def visible(client: Client) -> dict[int, list[float]]:
    found = client.query("c", filter="id >= 0", output_fields=["id", "vector"])
    return {r["id"]: [float(x) for x in r["vector"]] for r in found}


def test_each_json_format_from_the_sdk_becomes_the_collections_rows(open_client: ClientFactory):
    mapped = unique_topic("shop")
    client = open_client(ingest_topics=f"{mapped}=c")
    client.create_collection("c", dimension=2, metric_type="L2")
    client.cluster.log.create_topic(mapped, 1)
    to, default = IngestTopic.mapped(mapped), IngestTopic.default("c", client.cfg.cluster)
    v = np.array([[1, 0], [2, 0], [3, 0], [4, 0], [5, 0]], dtype=np.float32)
    on_mapped = [
        json_row(to, {"id": 1, "vector": v[0]}),
        json_row(to, {"id": 2, "vector": v[1]}, vectors="base64"),
        connect_row(to, {"id": 3, "vector": v[2], "title": "three"}, vectors="base64"),
        debezium_change(to, "c", after={"id": 4, "vector": [9, 9]}),
        debezium_change(
            to, "u", before={"id": 4, "vector": [9, 9]}, after={"id": 4, "vector": v[3]}
        ),
        debezium_change(to, "d", before={"id": 1, "vector": v[0]}),
        tombstone(to, 2),
    ]
    wait_consumed(client, mapped, send(client, on_mapped))
    on_default = [
        json_row(default, {"id": 5, "vector": v[4]}, vectors="base64"),
        connect_row(default, {"id": 6, "vector": [6, 0]}),
        tombstone(default, 3),
    ]
    wait_consumed(client, default.name, send(client, on_default))
    assert visible(client) == {4: [4.0, 0.0], 5: [5.0, 0.0], 6: [6.0, 0.0]}
    assert read_dead_letters(client.cluster.log, client.cluster.topics.dlq) == []


def test_a_record_not_delivered_raises_produce_failed():
    producer = IngestProducer("127.0.0.1:9", {"message.timeout.ms": 300})  # nothing listens
    producer.produce(tombstone(IngestTopic.mapped("t"), 1))
    with pytest.raises(ProduceFailed, match="1 records were not delivered"):
        producer.close()
    assert producer.delivered == 0


@pytest.fixture
def registry_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A Schema Registry for the cluster and the test's producer: the test registry server if
    the session has one, else one `mock://` client shared by every `new_client` of its URL
    (confluent-kafka's mock keeps its schemas per client object)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    try:
        return str(request.getfixturevalue("schema_registry_url"))
    except pytest.FixtureLookupError:
        pass
    url, original = "mock://producer-ingest", SchemaRegistryClient.new_client
    shared = original({"url": url})
    monkeypatch.setattr(
        SchemaRegistryClient,
        "new_client",
        staticmethod(lambda conf: shared if conf.get("url") == url else original(conf)),
    )
    return url


@pytest.mark.parametrize("vectors", ["bytes", "array"])
def test_avro_rows_from_the_sdk_become_the_collections_rows(
    open_client: ClientFactory, registry_url: str, vectors: str
):
    mapped = unique_topic("avro")
    client = open_client(schema_registry_url=registry_url, ingest_topics=f"{mapped}=c:avro")
    schema = quick_schema(2, "L2")
    client.create_collection("c", schema=schema)
    client.cluster.log.create_topic(mapped, 1)
    on_mapped = AvroRows(IngestTopic.mapped(mapped), schema, registry_url, vectors=vectors)
    on_default = AvroRows(IngestTopic.default("c", client.cfg.cluster), schema, registry_url)
    wait_consumed(client, mapped, send(client, [
        on_mapped.row({"id": 1, "vector": [1, 0]}),
        on_mapped.row({"id": 2, "vector": np.array([2, 0], np.float32)}),
        tombstone(IngestTopic.mapped(mapped), 1),
    ]))  # fmt: skip
    wait_consumed(client, on_default.topic.name, send(client, [
        on_default.row({"id": 3, "vector": [3, 0]}),
    ]))  # fmt: skip
    assert visible(client) == {2: [2.0, 0.0], 3: [3.0, 0.0]}
    assert read_dead_letters(client.cluster.log, client.cluster.topics.dlq) == []


def typed_schema() -> Any:
    """A collection of the issue-27 types: sparse `sp`, binary `bv` (dim 16), float16 `hv`
    (dim 2), and `text` -> BM25 -> `bm` (derived: no field of the records)."""
    from pymilvus import Function, FunctionType

    from vectorlog import DataType
    from vectorlog.sdk.client import SchemaBuilder

    s = SchemaBuilder()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("sp", DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("bv", DataType.BINARY_VECTOR, dim=16)
    s.add_field("hv", DataType.FLOAT16_VECTOR, dim=2)
    s.add_field("text", DataType.VARCHAR, max_length=50, enable_analyzer=True)
    s.add_field("bm", DataType.SPARSE_FLOAT_VECTOR)
    s.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                            input_field_names=["text"], output_field_names=["bm"]))  # fmt: skip
    return s.build("IP")


def typed(i: int) -> dict[str, Any]:
    hv = np.array([1.0, i], dtype="<f2")
    return {"id": i, "sp": {i + 1: 0.5}, "bv": bytes([i, 1]), "hv": hv, "text": f"fox {i}"}


def test_sparse_binary_half_and_bm25_rows_from_the_sdk_in_json_and_avro(
    open_client: ClientFactory, registry_url: str
):
    mapped = unique_topic("typed")
    client = open_client(schema_registry_url=registry_url, ingest_topics=f"{mapped}=t")
    schema = typed_schema()
    client.create_collection("t", schema=schema)
    client.cluster.log.create_topic(mapped, 1)
    topic = IngestTopic.mapped(mapped, vector_field="")
    avro = AvroRows(topic, schema, registry_url)
    records = [json_row(topic, typed(0)), connect_row(topic, typed(1)), avro.row(typed(2))]
    records.append(debezium_change(topic, "c", after=typed(3)))
    wait_consumed(client, mapped, send(client, records))
    got = client.query("t", "id >= 0", output_fields=["sp", "bv", "hv"])
    want = {i: ({i + 1: 0.5}, bytes([i, 1]), typed(i)["hv"].tobytes()) for i in range(4)}
    assert {r["id"]: (r["sp"], r["bv"], r["hv"]) for r in got} == want
    hits = client.search("t", ["fox"], anns_field="bm", limit=10)[0]
    assert sorted(h["id"] for h in hits) == [0, 1, 2, 3]
    assert read_dead_letters(client.cluster.log, client.cluster.topics.dlq) == []
    with pytest.raises(InvalidArgument, match="field 'bv'.*expected 2"):
        avro.row({**typed(4), "bv": b"\x01"})
