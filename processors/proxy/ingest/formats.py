"""Decoding one ingest record into changes, the format detected from its bytes.

JSON rows (an object or an array of objects), optionally in Kafka Connect's `{schema, payload}`
envelope; Debezium change events (`op` c, r, u: upsert of `after`; d: delete of `before`'s
key); a tombstone (empty value, or a Connect envelope with a null payload) deletes by the
record key (a JSON scalar key, `{"id": ...}`-like objects, a Debezium key struct).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vectorlog.errors import InvalidArgument
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.streams.log.base import Record

UPSERT, DELETE = "upsert", "delete"
_DEBEZIUM_UPSERTS = ("c", "r", "u")


class BadRecord(InvalidArgument):
    """An ingest record that cannot be decoded; the message says why."""


@dataclass(frozen=True)
class Change:
    """One upsert (`item`: a row dict) or delete (`item`: a key: a scalar or a key object)
    of `collection`."""

    kind: str
    collection: str
    item: Any


def decode(record: Record, route: IngestRoute) -> list[Change]:
    """Returns the changes one record asks for. Raises BadRecord."""
    collection = route.collection or _collection_from_key(record)
    if not record.value:
        return [_tombstone(record, collection, route)]
    doc = _payload(_json(record.value, "value"))
    if doc is None:
        return [_tombstone(record, collection, route)]
    if route.format == "debezium" or (route.format == "auto" and _is_debezium(doc)):
        return [_debezium(doc, collection)]
    rows = doc if isinstance(doc, list) else [doc]
    if not rows or not all(isinstance(r, dict) for r in rows):
        raise BadRecord("value must be a JSON object (a row) or a non-empty array of objects")
    return [Change(UPSERT, collection, row) for row in rows]


def _collection_from_key(record: Record) -> str:
    """The default ingest topic names the collection in the record key (UTF-8)."""
    if not record.key:
        raise BadRecord("a record on the default ingest topic needs the collection as its key")
    try:
        return record.key.decode()
    except UnicodeDecodeError:
        raise BadRecord("the record key (the collection name) is not UTF-8") from None


def _json(raw: bytes, what: str) -> Any:
    if raw[:1] == b"\x00":
        raise BadRecord(f"{what} looks Confluent-framed (magic byte 0): not supported yet")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRecord(f"{what} is not JSON: {exc}") from None


def _key(raw: bytes) -> Any:
    """Returns a record key: its JSON, or else its text (a VARCHAR key). Raises BadRecord."""
    try:
        return json.loads(raw)
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


def _debezium(doc: Any, collection: str) -> Change:
    if not _is_debezium(doc):
        raise BadRecord("not a Debezium change event (needs op and before/after)")
    op = doc["op"]
    if op in _DEBEZIUM_UPSERTS:
        if not isinstance(doc.get("after"), dict):
            raise BadRecord(f"Debezium op {op!r} without an `after` row")
        return Change(UPSERT, collection, doc["after"])
    if op == "d":
        if not isinstance(doc.get("before"), dict):
            raise BadRecord("Debezium delete without a `before` row")
        return Change(DELETE, collection, doc["before"])
    raise BadRecord(f"Debezium op {op!r} is not supported (c, r, u, d)")


def _tombstone(record: Record, collection: str, route: IngestRoute) -> Change:
    if route.collection is None:
        raise BadRecord("a tombstone on the default ingest topic names no primary key")
    if not record.key:
        raise BadRecord("a tombstone needs the primary key as its record key")
    key = _payload(_key(record.key))
    if key is None or isinstance(key, (list, bool, float)):
        raise BadRecord(f"a tombstone's key must be a primary key or a key object, not {key!r}")
    return Change(DELETE, collection, key)
