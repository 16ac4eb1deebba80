"""Encodes and decodes log events: Avro single-object encoding, or the Confluent wire format.

Single-object encoding (the default): `C3 01` + the envelope schema's 8-byte CRC-64-AVRO
fingerprint + the Avro binary body; a reader needs no registry, only the schemas this package
ships (every published version, by fingerprint). When a Schema Registry URL is configured, the
Confluent wire format is written instead: `00` + 4-byte big-endian schema id + body, the schema
registered under the subject `{topic}-value`. Both formats are always readable.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field, replace
from typing import Any

import fastavro

from vectorlog.schemas.errors import IncompatibleSchema, MalformedEvent
from vectorlog.schemas.registry import NAMESPACE, SchemaRegistry, default_registry
from vectorlog.schemas.rowsreader import RowsInsertedReader
from vectorlog.schemas.rowswriter import RowsInsertedWriter, listed
from vectorlog.schemas.shared_decodes import SharedDecodes

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"
#: events of at least this many bytes are first tried by the RowsInserted reader (smaller ones
#: are ticks, DDL, single rows: fastavro reads them at once)
READ_ROWS_FROM = 2048


@dataclass(slots=True)
class Event:
    """A decoded event: the envelope's fields and the payload as a dict (Avro's native form)."""

    type: str
    ts: int
    body: dict[str, Any]
    collection_id: int = 0
    vchannel: str = ""
    source: Any = field(default=None, compare=False)  # the log position it was read from

    def to_avro(self) -> dict[str, Any]:
        return {
            "event_type": self.type,
            "ts": self.ts,
            "collection_id": self.collection_id,
            "vchannel": self.vchannel,
            "payload": (f"{NAMESPACE}.{self.type}", self.body),
        }


def _from_avro(rec: dict[str, Any]) -> Event:
    name, body = rec["payload"]
    short = name.rsplit(".", 1)[-1]
    if short != rec["event_type"]:
        raise MalformedEvent(f"event_type {rec['event_type']!r} but payload is {short}")
    return Event(short, rec["ts"], body, rec["collection_id"], rec["vchannel"])


class EventSerde:
    """Turns `Event`s into bytes for one topic and back; thread-safe."""

    def __init__(
        self,
        registry: SchemaRegistry | None = None,
        schema_registry_url: str | None = None,
        topic: str = "",
        keyed: bool = False,
    ) -> None:
        self.registry = registry or default_registry()
        self.keyed = keyed
        self._sr = (
            _ConfluentSchemas(schema_registry_url, topic, self.registry)
            if (schema_registry_url)
            else None
        )
        self._header = SINGLE_OBJECT_MAGIC + self.registry.current.fingerprint
        self.shared = SharedDecodes()
        #: writes RowsInserted events (fastavro's bytes, ~4 x faster); None: fastavro does
        self._rows = RowsInsertedWriter.of(self.registry.current.parsed)
        #: reads them back (fastavro's result, ~4 x faster); None: fastavro does
        self._read_rows = RowsInsertedReader.of(self.registry.current.parsed)

    def key(self, event: Event) -> bytes | None:
        """Returns the record key of `event` with `keyed` (else None), UTF-8 text so Kafka
        Connect's StringConverter reads it: its vchannel, for dml events (a record carries a
        batch of one vchannel's rows, so no primary key can key it; a vchannel's records share
        a partition already); else its collection id, for DDL events (ids survive renames and
        aliases); else its segment id; else its event type, for events about many segments or
        the whole cluster (seals, ticks without a vchannel, id reservations)."""
        if not self.keyed:
            return None
        if event.vchannel:
            return event.vchannel.encode()
        cid = event.collection_id or event.body.get("collection_id")
        if cid:
            return str(cid).encode()
        segment = event.body.get("segment_id")
        return str(segment).encode() if segment else event.type.encode()

    def vchannel_key(self, vchannel: str) -> bytes | None:
        """Returns the key of a dml record of `vchannel` with `keyed` (else None)."""
        return vchannel.encode() if self.keyed else None

    def encode(self, event: Event) -> bytes:
        """Returns the event's bytes in the configured wire format. A RowsInserted column
        may hold numpy arrays (`encode_column(..., arrays=True)`)."""
        header = self._sr.header if self._sr else self._header
        if event.type == "RowsInserted":
            if self._rows is not None:
                b = event.body
                return self._rows.write(header, event.ts, event.collection_id, event.vchannel, b)
            event = replace(event, body=listed(event.body))
        buf = io.BytesIO()
        buf.write(header)
        fastavro.schemaless_writer(buf, self.registry.current.parsed, event.to_avro())
        return buf.getvalue()

    def decode(self, data: bytes) -> Event:
        """Returns the event in `data`. Raises MalformedEvent naming what was wrong."""
        writer = self._writer_schema(data)
        start = 10 if data[:2] == SINGLE_OBJECT_MAGIC else 5
        current = writer is self.registry.current.parsed
        if current and type(data) is bytes and len(data) >= READ_ROWS_FROM:
            got = self._read_rows.read(data, start) if self._read_rows else None
            if got is not None:  # a RowsInserted: what fastavro would return, faster
                record, end = got
                if end != len(data):
                    raise MalformedEvent(f"{len(data) - end} trailing bytes after the event")
                return _from_avro(record)
        buf = io.BytesIO(data)
        buf.seek(start)
        try:
            rec = fastavro.schemaless_reader(
                buf, writer, self.registry.current.parsed, return_record_name=True
            )
        except Exception as exc:  # fastavro raises many types on corrupt bodies
            raise MalformedEvent(f"undecodable Avro body ({type(exc).__name__}: {exc})") from exc
        if buf.tell() != len(data):
            raise MalformedEvent(f"{len(data) - buf.tell()} trailing bytes after the event")
        return _from_avro(rec)  # type: ignore[arg-type]

    def decode_at(self, where: tuple[str, int, int], data: bytes) -> Event:
        """Returns `decode(data)` for the record at log position `where` (topic, partition,
        offset), decoded once for the readers of that topic joined to `shared` that read
        those same bytes there (shared_decodes.py). Raises MalformedEvent."""
        return self.shared.decoded(where, data, self.decode)

    def stamp(self, data: bytes) -> int | None:
        """Returns the ts of the event in `data`; None if it does not decode (a poison
        record: callers that only order or filter by time skip or keep it)."""
        try:
            return self.decode(data).ts
        except Exception:
            return None

    def _writer_schema(self, data: bytes) -> Any:
        if data[:2] == SINGLE_OBJECT_MAGIC and len(data) >= 10:
            try:
                return self.registry.by_fingerprint(data[2:10]).parsed
            except Exception as exc:
                raise MalformedEvent(str(exc)) from exc
        if data[:1] == CONFLUENT_MAGIC and len(data) >= 5:
            if self._sr is None:
                raise MalformedEvent("Confluent wire format but no schema registry configured")
            return self._sr.schema(struct.unpack(">I", data[1:5])[0])
        raise MalformedEvent(f"unknown magic bytes {data[:2].hex() or '(empty)'}")


class _ConfluentSchemas:
    """Registers the envelope (its full JSON, docs and defaults included) under the
    TopicNameStrategy subject `{topic}-value`, after the registry confirmed it is compatible
    with the subject's latest version, and resolves schema ids to schemas.

    Raises IncompatibleSchema if the registry refuses it (nothing is written before)."""

    def __init__(self, url: str, topic: str, registry: SchemaRegistry) -> None:
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        self.client = SchemaRegistryClient.new_client({"url": url})
        subject, schema = f"{topic}-value", Schema(registry.current.full, "AVRO")
        _check_compatible(self.client, subject, schema, url)
        try:
            sid = self.client.register_schema(subject, schema)
        except Exception as exc:  # SchemaRegistryError: 409 if it became incompatible since
            raise IncompatibleSchema(subject, url, str(exc)) from exc
        self.header = CONFLUENT_MAGIC + struct.pack(">I", sid)
        self._cache: dict[int, Any] = {sid: registry.current.parsed}

    def schema(self, sid: int) -> Any:
        if sid not in self._cache:
            try:
                text = self.client.get_schema(sid).schema_str or ""
            except Exception as exc:
                raise MalformedEvent(f"schema id {sid} not in the registry ({exc})") from exc
            self._cache[sid] = fastavro.parse_schema(json.loads(text))
        return self._cache[sid]


def _check_compatible(client: Any, subject: str, schema: Any, url: str) -> None:
    """Raises IncompatibleSchema unless the subject is new or `schema` passes its level
    (confluent-kafka's in-process `mock://` registry has no compatibility API: not asked)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    if url.startswith("mock://"):
        return
    try:
        ok = client.test_compatibility(subject, schema)
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:  # no such subject (or version) yet: the first one
            return
        raise IncompatibleSchema(subject, url, str(exc)) from exc
    if not ok:
        raise IncompatibleSchema(subject, url, "not compatible with the latest version")
