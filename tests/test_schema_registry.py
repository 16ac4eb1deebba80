"""The tests' Schema Registry (tests/schema_registry.py) through confluent-kafka's own client:
registration, lookup, ids shared across clients, and Confluent's compatibility refusals."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError


def record(*fields: dict[str, object]) -> Schema:
    doc = {"type": "record", "name": "Row", "fields": [{"name": "id", "type": "long"}, *fields]}
    return Schema(json.dumps(doc), "AVRO")


def subject() -> str:
    return f"t{uuid.uuid4().hex[:8]}-value"


def test_a_schema_registered_once_is_found_by_id_and_lookup_from_another_client(
    schema_registry_url: str,
):
    name, schema = subject(), record()
    sid = SchemaRegistryClient({"url": schema_registry_url}).register_schema(name, schema)
    other = SchemaRegistryClient({"url": schema_registry_url})
    assert json.loads(other.get_schema(sid).schema_str or "") == json.loads(schema.schema_str or "")
    assert other.lookup_schema(name, schema).schema_id == sid
    assert other.register_schema(name, schema) == sid  # the same schema: the same id
    assert other.get_latest_version(name).version == 1


def test_backward_compatible_versions_are_accepted_and_others_refused(schema_registry_url: str):
    client = SchemaRegistryClient({"url": schema_registry_url})
    name = subject()
    client.register_schema(name, record())
    with_default = record({"name": "title", "type": "string", "default": ""})
    without_default = record({"name": "year", "type": "int"})
    assert client.test_compatibility(name, with_default)
    assert not client.test_compatibility(name, without_default)
    client.register_schema(name, with_default)
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(name, without_default)
    assert refused.value.http_status_code == 409
    assert client.get_versions(name) == [1, 2]


def test_the_level_can_be_lowered_per_subject(schema_registry_url: str):
    client = SchemaRegistryClient({"url": schema_registry_url})
    name = subject()
    client.register_schema(name, record())
    client.set_compatibility(name, "NONE")
    client.register_schema(name, record({"name": "year", "type": "int"}))
    assert client.get_compatibility(name) == "NONE"
