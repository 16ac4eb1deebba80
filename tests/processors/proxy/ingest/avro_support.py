"""Confluent-framed Avro as a producer writes it, for the ingest tests: confluent-kafka's own
AvroSerializer against a schema registry."""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext


def serializer(url: str, schema: str) -> Any:
    """Returns a function (topic, datum, field) -> Confluent-framed bytes, as a producer's."""
    avro = AvroSerializer(SchemaRegistryClient({"url": url}), schema)
    return lambda topic, datum, field=MessageField.VALUE: avro(
        datum, SerializationContext(topic, field)
    )
