"""Confluent-framed Avro ingest records: magic byte 0, a 4-byte big-endian schema id, then the
Avro binary body written with that schema, fetched once per id from the Schema Registry.

Fields map to the collection by name. A vector may be Avro `bytes` (little-endian float32) or
`array<float|double>`; Debezium change events written with Confluent's AvroConverter decode to
the same `{before, after, op}` shape as their JSON form.
"""

from __future__ import annotations

import io
import json
import struct
import threading
from typing import Any

import fastavro

from vectorlog.processors.proxy.ingest.errors import BadRecord

MAGIC = b"\x00"


def is_confluent(raw: bytes | None) -> bool:
    """Returns True if `raw` starts like a Confluent-framed record (magic 0 + schema id)."""
    return raw is not None and len(raw) >= 5 and raw[:1] == MAGIC


class WriterSchemas:
    """The writer schemas of a Schema Registry, by id, cached (ids are immutable); thread-safe."""

    def __init__(self, url: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = url
        self._client = SchemaRegistryClient.new_client({"url": url})
        self._cache: dict[int, Any] = {}
        self._lock = threading.Lock()

    def get(self, schema_id: int) -> Any:
        """Returns the parsed schema of `schema_id`. Raises BadRecord if the registry has no
        such Avro schema; other registry failures (unreachable) propagate, to be retried."""
        with self._lock:
            if schema_id in self._cache:
                return self._cache[schema_id]
        schema = self._fetch(schema_id)
        with self._lock:
            self._cache[schema_id] = schema
        return schema

    def _fetch(self, schema_id: int) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            found = self._client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise BadRecord(
                    f"schema id {schema_id} is not in the registry {self.url}"
                ) from None
            raise
        if (found.schema_type or "AVRO") != "AVRO":
            raise BadRecord(f"schema id {schema_id} is {found.schema_type}, not Avro")
        try:
            return fastavro.parse_schema(json.loads(found.schema_str or ""))
        except Exception as exc:  # fastavro raises several types for a bad schema
            raise BadRecord(f"schema id {schema_id} is not a valid Avro schema ({exc})") from None


def decode_avro(raw: bytes, schemas: WriterSchemas | None, what: str) -> Any:
    """Returns the decoded Avro datum of a Confluent-framed `raw` (`bytes` vectors stay bytes:
    `rows.fit_row` reads them by the field's type). Raises BadRecord naming what was wrong."""
    if schemas is None:
        raise BadRecord(f"{what} is Confluent-framed Avro but no schema registry is configured")
    (schema_id,) = struct.unpack(">I", raw[1:5])
    writer = schemas.get(schema_id)
    buf = io.BytesIO(raw[5:])
    try:
        datum = fastavro.schemaless_reader(buf, writer, None)
    except Exception as exc:  # fastavro raises many types on a corrupt body
        raise BadRecord(
            f"{what}: undecodable Avro body for schema id {schema_id} ({exc})"
        ) from None
    if buf.tell() != len(raw) - 5:
        raise BadRecord(f"{what}: {len(raw) - 5 - buf.tell()} bytes after the Avro datum")
    return datum
