"""A plain consumer reads vectorlog's dml with confluent-kafka's AvroDeserializer and a Schema
Registry (examples/consume_dml.py), on both backends: the rows inserted and keys deleted."""

from __future__ import annotations

from typing import Any

from examples.consume_dml import changes, consume, decoder
from tests.clients import ClientFactory
from vectorlog.streams.scan import read_all


def test_avro_deserializer_reads_inserts_and_deletes_from_dml(
    open_client: ClientFactory, schema_registry_url: str
):
    client = open_client(schema_registry_url=schema_registry_url)
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": i, "vector": [float(i), 0.5]} for i in range(3)])
    client.delete("c", ids=[1])
    dml = client.cluster.topics.dml
    decode = decoder(schema_registry_url)
    if client.cfg.is_kafka:
        found: list[Any] = list(consume(client.cfg.bootstrap, dml, decode, idle_s=1.0))
    else:  # no broker: the same decoder over the records as stored
        found = [
            change
            for rec in read_all(client.cluster.log, dml)
            if (event := decode(dml, rec.value)) is not None
            for change in changes(event)
        ]
    inserted = {c["row"]["id"]: c["row"]["vector"] for c in found if c["op"] == "insert"}
    assert inserted == {i: [float(i), 0.5] for i in range(3)}
    assert [c["key"] for c in found if c["op"] == "delete"] == [1]
