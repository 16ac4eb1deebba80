"""Producer SDK: serializes rows for vectorlog's ingest topics, for users who produce with
confluent-kafka themselves (or through `IngestProducer`).

Every serializer returns an `IngestRecord` (topic, key, value, headers), ready for
`confluent_kafka.Producer.produce(**record.produce_kwargs())`, and raises InvalidArgument naming
the field of a bad row. Formats, all detected by the ingest consumer from the bytes:

- `json_row`: a JSON object (vectors as JSON arrays, or base64 little-endian float32);
- `connect_row`: the same inside Kafka Connect's `{schema, payload}` envelope;
- `debezium_change`: a Debezium change event (op c/r/u: upsert of `after`; d: delete);
- `tombstone`: a null value deleting the record key's primary key (every record is keyed
  by its row's primary key as JSON text);
- `AvroRows`: Confluent-framed Avro (magic 0, 4-byte big-endian schema id, Avro binary), its
  record schema derived from a CollectionSchema (`avro_schema`) and registered under
  `{topic}-value`.

Where a record goes is an `IngestTopic`: a mapped topic (`IngestTopic.mapped`) or the
cluster's default ingest topic
(`IngestTopic.default`: a `collection` header names the collection).
"""

from vectorlog.producer.avro import AvroRows, avro_schema
from vectorlog.producer.json_rows import connect_row, debezium_change, json_row, tombstone
from vectorlog.producer.kafka import IngestProducer, ProduceFailed
from vectorlog.producer.records import IngestRecord, IngestTopic

__all__ = [
    "AvroRows",
    "IngestProducer",
    "IngestRecord",
    "IngestTopic",
    "ProduceFailed",
    "avro_schema",
    "connect_row",
    "debezium_change",
    "json_row",
    "tombstone",
]
