"""Reads a vectorlog cluster's dml topic as a plain Kafka consumer would, decoding each record
with confluent-kafka's AvroDeserializer and the cluster's Schema Registry, and prints every
inserted row and deleted key as a JSON line.

The cluster must run with a Schema Registry (`VECTORLOG_SCHEMA_REGISTRY_URL`): its records are
then in Confluent's wire format, the envelope registered under `{cluster}.dml-value`.

    python -m examples.consume_dml --bootstrap localhost:9092 --registry http://localhost:8081
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

Decoder = Callable[[str, bytes], dict[str, Any] | None]


def decoder(registry_url: str) -> Decoder:
    """Returns decode(topic, value) -> the event as a dict: the envelope's event_type, ts,
    collection_id, vchannel and the payload record; None for a record not in Confluent's wire
    format. Raises SerializationError on bad bytes."""
    avro = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))

    def decode(topic: str, value: bytes) -> dict[str, Any] | None:
        if value[:1] != b"\x00":  # not Confluent-framed: a tool's end marker (single-object)
            return None
        event: dict[str, Any] | None = avro(value, SerializationContext(topic, MessageField.VALUE))
        return event

    return decode


def changes(event: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yields {"op": "insert", "row": {...}} per row of a RowsInserted and {"op": "delete",
    "key": k} per key of a RowsDeleted; nothing for other events (ticks, DDL copies)."""
    body = event["payload"]
    if event["event_type"] == "RowsInserted":
        n = body["num_rows"]
        columns = {c["field_name"]: _values(c["column"], n) for c in body["columns"]}
        for i in range(n):
            yield {"op": "insert", "row": {name: v[i] for name, v in columns.items()}}
    elif event["event_type"] == "RowsDeleted":
        for key in body["primary_keys"]["values"]:
            yield {"op": "delete", "key": key}


def _values(column: dict[str, Any], num_rows: int) -> list[Any]:
    """Returns a column's value per row: float vectors as lists of floats; float16, bfloat16
    and binary vectors (PackedVectorColumn: the same fields, 2 x dim or dim / 8 bytes a row)
    and sparse rows as the base64 text of their bytes; a nullable field's nulls as None."""
    if "dim" in column:
        data, dim = bytes(column["data"]), int(column["dim"])
        if num_rows and len(data) == 4 * dim * num_rows:  # FloatVectorColumn: float32
            return np.frombuffer(data, dtype="<f4").reshape(-1, dim).tolist()
        width = len(data) // num_rows if num_rows else 0
        return [_b64(data[i * width : (i + 1) * width]) for i in range(num_rows)]
    if "rows" in column:  # SparseFloatVectorColumn
        return [_b64(row) for row in column["rows"]]
    values, valid = column["values"], column.get("valid")
    values = values.tolist() if isinstance(values, np.ndarray) else list(values)
    return (
        values
        if valid is None
        else [v if ok else None for v, ok in zip(values, valid, strict=True)]
    )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def consume(bootstrap: str, topic: str, decode: Decoder, idle_s: float = 2.0) -> Iterator[Any]:
    """Yields the changes of every record of `topic` from the start until it is idle."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "consume-dml-example"})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
        while (msg := consumer.poll(idle_s)) is not None:
            if msg.error() is None and (value := msg.value()):
                event = decode(topic, value)
                if event is not None:
                    yield from changes(event)
    finally:
        consumer.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--registry", required=True, help="the Schema Registry URL")
    p.add_argument("--cluster", default="vectorlog")
    args = p.parse_args()
    topic = f"{args.cluster}.dml"
    for change in consume(args.bootstrap, topic, decoder(args.registry)):
        print(json.dumps(change))


if __name__ == "__main__":
    main()
