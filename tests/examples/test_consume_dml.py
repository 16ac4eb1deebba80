"""A plain consumer reads vectorlog's dml with confluent-kafka's AvroDeserializer and a Schema
Registry (examples/consume_dml.py), on both backends: the rows inserted and keys deleted."""

from __future__ import annotations

from typing import Any

from examples.consume_dml import changes, consume, decoder
from tests.clients import ClientFactory
from vectorlog.streams.scan import read_all


def found_changes(client: Any, schema_registry_url: str) -> list[Any]:
    """Returns the changes examples.consume_dml finds on `client`'s dml topic."""
    dml = client.cluster.topics.dml
    decode = decoder(schema_registry_url)
    if client.cfg.is_kafka:
        return list(consume(client.cfg.bootstrap, dml, decode, idle_s=1.0))
    return [  # no broker: the same decoder over the records as stored
        change
        for rec in read_all(client.cluster.log, dml)
        if (event := decode(dml, rec.value)) is not None
        for change in changes(event)
    ]


def test_avro_deserializer_reads_inserts_and_deletes_from_dml(
    open_client: ClientFactory, schema_registry_url: str
):
    client = open_client(schema_registry_url=schema_registry_url)
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": i, "vector": [float(i), 0.5]} for i in range(3)])
    client.delete("c", ids=[1])
    found = found_changes(client, schema_registry_url)
    inserted = {c["row"]["id"]: c["row"]["vector"] for c in found if c["op"] == "insert"}
    assert inserted == {i: [float(i), 0.5] for i in range(3)}
    assert [c["key"] for c in found if c["op"] == "delete"] == [1]


def test_half_vectors_and_nulls_come_out_as_base64_and_none(
    open_client: ClientFactory, schema_registry_url: str
):
    import base64

    import numpy as np

    from vectorlog import DataType

    client = open_client(schema_registry_url=schema_registry_url)
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("n", DataType.INT64, nullable=True)
    schema.add_field("hv", DataType.FLOAT16_VECTOR, dim=4)
    client.create_collection("h", schema=schema)
    halves = [np.array([i, 0.5, -1, 2], dtype="<f2").tobytes() for i in range(2)]
    client.insert("h", [{"id": i, "n": None if i else 7, "hv": halves[i]} for i in range(2)])
    rows = {c["row"]["id"]: c["row"] for c in found_changes(client, schema_registry_url)}
    assert [rows[i]["n"] for i in range(2)] == [7, None]
    assert [base64.b64decode(rows[i]["hv"]) for i in range(2)] == halves
