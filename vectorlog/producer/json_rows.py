"""JSON ingest records: rows, Kafka Connect `{schema, payload}` envelopes, Debezium change
events and tombstones. Vectors are JSON arrays (`vectors="array"`) or base64 of little-endian
float32 (`vectors="base64"`, as Kafka Connect writes `bytes`); numpy values become JSON; the
bytes of binary and half vectors base64 text, sparse vectors {"index": value}, as Milvus's
JSON has them."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from vectorlog.core.errors import InvalidArgument
from vectorlog.producer.records import (
    IngestRecord,
    IngestTopic,
    checked_row,
    float32_vector,
    primary_key_text,
)

VECTOR_ENCODINGS = ("array", "base64")
#: values orjson writes as json would (its floats: NaN becomes null, so they take json's path)
_PLAIN = (int, str, type(None), np.ndarray)
DEBEZIUM_OPS = ("c", "r", "u", "d")


def json_row(topic: IngestTopic, row: Mapping[str, Any], vectors: str = "array") -> IngestRecord:
    """Returns the record upserting `row` as a JSON object. Raises InvalidArgument naming the
    field that is not JSON, a bad vector or primary key, or an unknown `vectors` encoding."""
    doc = jsonable(topic, row, vectors)
    return topic.row_record(doc, _dumps(doc))


def connect_row(
    topic: IngestTopic, row: Mapping[str, Any], vectors: str = "array", name: str = "row"
) -> IngestRecord:
    """Returns the record upserting `row` inside Kafka Connect's `{schema, payload}` envelope
    (JsonConverter with schemas enabled; the struct schema is inferred from the values, the
    vector as `array<float32>` or `bytes`). Raises InvalidArgument as `json_row`."""
    doc = jsonable(topic, row, vectors)
    schema = {**_struct(doc, topic.vector_field, vectors), "name": name}
    return topic.row_record(doc, _dumps({"schema": schema, "payload": doc}))


def debezium_change(
    topic: IngestTopic,
    op: str,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    vectors: str = "array",
    ts_ms: int | None = None,
) -> IngestRecord:
    """Returns a Debezium change event `{before, after, op, ts_ms}`: op c (create), r (read, a
    snapshot row) or u (update) upserts `after`; d deletes `before`'s primary key. Raises
    InvalidArgument for another op, a missing `after` (c, r, u) or `before` (d) row, or a bad
    field of either."""
    if op not in DEBEZIUM_OPS:
        raise InvalidArgument(f"Debezium op must be one of {DEBEZIUM_OPS}, not {op!r}")
    needed, what = (before, "before") if op == "d" else (after, "after")
    if needed is None:
        raise InvalidArgument(f"a Debezium op {op!r} event needs the {what!r} row")
    old = None if before is None else jsonable(topic, before, vectors)
    new = None if after is None else jsonable(topic, after, vectors)
    when = int(time.time() * 1000) if ts_ms is None else ts_ms
    value = _dumps({"before": old, "after": new, "op": op, "ts_ms": when})
    return topic.row_record(new if new is not None else old or {}, value)


def tombstone(topic: IngestTopic, key: Any) -> IngestRecord:
    """Returns a tombstone (a null value) deleting primary key `key`. On the default ingest
    topic too the record key is the primary key (the `collection` header names the
    collection). Raises InvalidArgument for a key that is not an int64 or a non-empty string."""
    return IngestRecord(topic.name, primary_key_text(topic.primary_key, key), None, topic.headers())


def jsonable(topic: IngestTopic, row: Mapping[str, Any], vectors: str) -> dict[str, Any]:
    """Returns `row` with numpy values as JSON values and the vector field encoded as
    `vectors` asks. Raises InvalidArgument naming a bad field."""
    if vectors not in VECTOR_ENCODINGS:
        raise InvalidArgument(f"vectors must be one of {VECTOR_ENCODINGS}, not {vectors!r}")
    doc = {name: _value(name, v) for name, v in checked_row(row).items()}
    if topic.vector_field in doc:
        vec = float32_vector(topic.vector_field, row[topic.vector_field])
        b64 = vectors == "base64"
        doc[topic.vector_field] = (
            base64.b64encode(vec.astype("<f4").tobytes()).decode() if b64 else vec
        )
    return doc


def _value(name: str, value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bytes, bytearray, memoryview)):  # a binary / half vector's bytes
        return base64.b64encode(bytes(value)).decode()  # as Milvus's JSON (Go's []byte)
    return value


def _dumps(doc: Any) -> bytes:
    """Returns `doc` as strict JSON (no NaN or infinity). Rows of plain values go through
    orjson (~10x faster, float32 vectors in their shortest form: half the bytes). Raises
    InvalidArgument naming the first field that is not JSON."""
    if all(isinstance(v, _PLAIN) for _, v in _fields(doc)):
        try:
            return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:  # orjson's JSONEncodeError (an int beyond 64 bits): json names it
            pass
    try:
        return json.dumps(doc, allow_nan=False, separators=(",", ":"), default=_listed).encode()
    except (TypeError, ValueError, RecursionError):
        pass
    for name, value in _fields(doc):
        try:
            json.dumps(value, allow_nan=False, default=_listed)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidArgument(f"field {name!r} is not JSON: {exc}") from None
    raise InvalidArgument(f"the row is not JSON: {doc!r:.200}")


def _listed(value: Any) -> Any:
    """json's `default`: a (checked, finite) float32 vector as a list."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _fields(doc: Any) -> list[tuple[str, Any]]:
    """Returns (field, value) of a row, of the rows in an envelope or change event too."""
    if not isinstance(doc, dict):
        return []
    inner = [doc[k] for k in ("payload", "before", "after") if isinstance(doc.get(k), dict)]
    if inner:
        return [item for d in inner for item in d.items()]
    return list(doc.items())


_CONNECT_TYPES: list[tuple[type, str]] = [
    (bool, "boolean"), (int, "int64"), (float, "float64"), (str, "string"),
]  # fmt: skip


def _struct(doc: Mapping[str, Any], vector_field: str, vectors: str) -> dict[str, Any]:
    """Returns the Kafka Connect struct schema of a row, inferred from its values."""
    fields = []
    for name, value in doc.items():
        if name == vector_field:
            kind = {"type": "bytes"} if vectors == "base64" else _array("float32")
        else:
            kind = _connect_type(value)
        fields.append({"field": name, **kind, "optional": value is None})
    return {"type": "struct", "fields": fields, "optional": False}


def _connect_type(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return _struct(value, "", "array")
    if isinstance(value, list):
        first = next((v for v in value if v is not None), "")
        return {"type": "array", "items": {**_connect_type(first), "optional": False}}
    for kind, name in _CONNECT_TYPES:
        if isinstance(value, kind):
            return {"type": name}
    return {"type": "string"}  # None: an optional string


def _array(items: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": items, "optional": False}}
