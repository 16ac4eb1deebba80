"""Decoding one ingest record into changes, the format detected from its bytes.

vectorlog's own RowsInserted / RowsDeleted events (see `events`); Confluent-framed Avro
(magic byte 0, decoded with the writer's schema from the registry); JSON rows (an object or
an array of objects), optionally in Kafka Connect's `{schema, payload}` envelope; Debezium
change events (`op` c, r, u: upsert of `after`; d: delete of `before`'s key), in JSON or
Avro; a tombstone (empty value, or a Connect envelope with a null payload) deletes by the
record key (a JSON scalar key, `{"id": ...}`-like objects, a Debezium key struct, or their
Avro).
On the default ingest topic the collection is named by a `collection` header, or else by the
record key (then the key cannot also be a primary key, so tombstones need the header).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from vectorlog.processors.proxy.ingest.avro import WriterSchemas, decode_avro, is_confluent
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.errors import BadRecord
from vectorlog.processors.proxy.ingest.events import event_items, is_event
from vectorlog.streams.log.base import Record

__all__ = ["DELETE", "UPSERT", "BadRecord", "Change", "decode"]
COLLECTION_HEADER = "collection"

UPSERT, DELETE = "upsert", "delete"
_DEBEZIUM_UPSERTS = ("c", "r", "u")


@dataclass(frozen=True)
class Change:
    """One upsert (`item`: a row dict) or delete (`item`: a key: a scalar or a key object)
    of `collection`."""

    kind: str
    collection: str
    item: Any
    #: JSON and ARRAY fields arrive as JSON text (Avro has no JSON type): `fit_row` parses them
    json_text: bool = False


def decode(
    record: Record, route: IngestRoute, schemas: WriterSchemas | None = None
) -> list[Change]:
    """Returns the changes one record asks for; `schemas` resolves Confluent schema ids.
    Raises BadRecord."""
    named = None if route.collection else record.header(COLLECTION_HEADER)
    collection = route.collection or _collection(record, named)
    key_is_pk = route.collection is not None or named is not None
    if not record.value:
        return [_tombstone(record, collection, key_is_pk, schemas)]
    if is_event(record.value):
        kind, items = event_items(record.value)
        return [Change(kind, collection, item) for item in items]
    avro = is_confluent(record.value)
    doc = _payload(_value(record.value, route, schemas))
    if doc is None:
        return [_tombstone(record, collection, key_is_pk, schemas)]
    if route.format == "debezium" or (route.format == "auto" and _is_debezium(doc)):
        return [_debezium(doc, collection, avro)]
    if type(doc) is dict:  # the common case, checked first: one row
        return [Change(UPSERT, collection, doc, avro)]
    if not isinstance(doc, list) or not doc or not all(isinstance(r, dict) for r in doc):
        raise BadRecord("value must be a JSON object (a row) or a non-empty array of objects")
    return [Change(UPSERT, collection, row, avro) for row in doc]


def _collection(record: Record, header: bytes | None) -> str:
    """The default ingest topic names the collection in a `collection` header (`header`),
    else in the record key (UTF-8)."""
    raw, what = header, "the collection header"
    if raw is None:
        raw, what = record.key, "the record key (the collection name)"
    if not raw:
        raise BadRecord(
            "a record on the default ingest topic needs a collection header or the collection"
            " as its key"
        )
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise BadRecord(f"{what} is not UTF-8") from None


def _value(raw: bytes, route: IngestRoute, schemas: WriterSchemas | None) -> Any:
    if is_confluent(raw):
        if route.format == "json":
            raise BadRecord("value is Confluent-framed Avro but the topic's format is json")
        return decode_avro(raw, schemas, "value")
    if route.format == "avro":
        raise BadRecord("value is not Confluent-framed Avro (magic byte 0 + schema id)")
    return _json(raw, "value")


def _json(raw: bytes, what: str) -> Any:
    try:
        return orjson.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRecord(f"{what} is not JSON: {exc}") from None


def _key(raw: bytes, schemas: WriterSchemas | None) -> Any:
    """Returns a record key: its Avro or JSON, or else its text (a VARCHAR key). Raises
    BadRecord."""
    if is_confluent(raw):
        return decode_avro(raw, schemas, "key")
    try:
        return orjson.loads(raw)
    except (UnicodeDecodeError, ValueError):
        pass
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise BadRecord("the record key is neither JSON nor UTF-8 text") from None


def _payload(doc: Any) -> Any:
    """Returns the payload of a Kafka Connect `{schema, payload}` envelope, else `doc`."""
    if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
        return doc["payload"]
    return doc


def _is_debezium(doc: Any) -> bool:
    return isinstance(doc, dict) and "op" in doc and ("after" in doc or "before" in doc)


def _debezium(doc: Any, collection: str, avro: bool) -> Change:
    if not _is_debezium(doc):
        raise BadRecord("not a Debezium change event (needs op and before/after)")
    op = doc["op"]
    if op in _DEBEZIUM_UPSERTS:
        if not isinstance(doc.get("after"), dict):
            raise BadRecord(f"Debezium op {op!r} without an `after` row")
        return Change(UPSERT, collection, doc["after"], avro)
    if op == "d":
        if not isinstance(doc.get("before"), dict):
            raise BadRecord("Debezium delete without a `before` row")
        return Change(DELETE, collection, doc["before"])
    raise BadRecord(f"Debezium op {op!r} is not supported (c, r, u, d)")


def _tombstone(
    record: Record, collection: str, key_is_pk: bool, schemas: WriterSchemas | None
) -> Change:
    if not key_is_pk:
        raise BadRecord(
            "a tombstone on the default ingest topic needs a collection header (its key is"
            " the collection name, not a primary key)"
        )
    if not record.key:
        raise BadRecord("a tombstone needs the primary key as its record key")
    key = _payload(_key(record.key, schemas))
    if key is None or isinstance(key, (list, bool, float)):
        raise BadRecord(f"a tombstone's key must be a primary key or a key object, not {key!r}")
    return Change(DELETE, collection, key)
