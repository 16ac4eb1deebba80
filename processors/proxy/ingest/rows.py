"""Fitting decoded ingest items to a collection's schema: vectors and primary keys."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any

import numpy as np

from vectorlog.core.model import CollectionSchema, DataType
from vectorlog.core.vector_json import GO_TYPES, from_json
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.errors import BadRecord

log = logging.getLogger(__name__)
_JSON_TYPES = (DataType.JSON, DataType.ARRAY)
_WARNED: set[tuple[str, str]] = set()
#: by schema identity: (schema, float vector fields, JSON/ARRAY fields, packed vector fields)
_FIELDS: dict[int, tuple[CollectionSchema, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def fit_row(
    schema: CollectionSchema, row: dict[str, Any], json_text: bool = False
) -> dict[str, Any]:
    """Returns `row` with each FLOAT_VECTOR given as a string decoded (a JSON array, or base64
    of little-endian float32, as the Milvus Kafka sink accepts) or as bytes (Avro `bytes`:
    little-endian float32); with `json_text`, JSON and ARRAY fields given as strings are parsed
    (Avro carries them as JSON text); sparse, binary and half vectors in Milvus's JSON forms
    (core/vector_json.py; Avro `bytes`: their row bytes). Raises BadRecord, SchemaMismatch."""
    vectors, texts, packed = _special_fields(schema)
    out = row
    for name in packed:
        if name in row:
            out = out if out is not row else dict(row)
            out[name] = from_json(schema.field(name), row[name])
    for name in vectors:
        value = row.get(name)
        if isinstance(value, str):
            out = out if out is not row else dict(row)
            out[name] = _vector(name, value)
        elif isinstance(value, (bytes, bytearray)):
            out = out if out is not row else dict(row)
            out[name] = _float32(name, bytes(value))
    for name in texts if json_text else ():
        value = row.get(name)
        if isinstance(value, str):
            out = out if out is not row else dict(row)
            out[name] = _json_text(name, value)
    return out


def _special_fields(
    schema: CollectionSchema,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Returns the names of the FLOAT_VECTOR fields, of the JSON and ARRAY fields and of the
    packed vector fields, cached by the schema object's identity (the proxy keeps one per
    collection version; hashing a schema per row would cost more than the lookup saves)."""
    cached = _FIELDS.get(id(schema))
    if cached is None or cached[0] is not schema:
        vectors = tuple(f.name for f in schema.fields if f.dtype is DataType.FLOAT_VECTOR)
        texts = tuple(f.name for f in schema.fields if f.dtype in _JSON_TYPES)
        packed = tuple(f.name for f in schema.fields if f.dtype in GO_TYPES)
        if len(_FIELDS) > 256:
            _FIELDS.clear()
        cached = _FIELDS[id(schema)] = (schema, vectors, texts, packed)
    return cached[1], cached[2], cached[3]


def _json_text(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise BadRecord(f"field {name!r}: its Avro string is not JSON text") from None


def _vector(name: str, text: str) -> Any:
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except ValueError:
            raise BadRecord(f"field {name!r}: a vector string that is not a JSON array") from None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadRecord(f"field {name!r}: a vector string that is not base64 or JSON") from None
    return _float32(name, raw)


def _float32(name: str, raw: bytes) -> Any:
    if not raw or len(raw) % 4:
        raise BadRecord(f"field {name!r}: {len(raw)} bytes are not float32 values")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32, copy=False)


def known_fields(
    schema: CollectionSchema, row: dict[str, Any], route: IngestRoute
) -> dict[str, Any]:
    """Returns `row` with the fields the collection does not know handled by the route's
    `unknown` policy: kept (for the dynamic field), dropped with a warning, or refused.
    Raises BadRecord naming the unknown fields under `dead-letter`."""
    if route.unknown == "dynamic":
        return row
    names = {f.name for f in schema.fields}
    unknown = [k for k in row if k not in names]
    if not unknown:
        return row
    if route.unknown == "dead-letter":
        raise BadRecord(
            f"fields {unknown} are not in the collection (topic {route.topic}: unknown=dead-letter)"
        )
    _warn_dropped(route.topic, unknown)
    return {k: v for k, v in row.items() if k in names}


def _warn_dropped(topic: str, fields: list[str]) -> None:
    new = [f for f in fields if (topic, f) not in _WARNED]
    if new:
        _WARNED.update((topic, f) for f in new)
        log.warning("ingest topic %s: dropping fields %s unknown to the collection", topic, new)


def primary_key(schema: CollectionSchema, item: Any) -> Any:
    """Returns the primary key a delete names: a scalar, or the key field of a key object
    (a Debezium `before` row or key struct, `{"id": ...}`). Raises BadRecord."""
    pk = schema.primary.name
    if isinstance(item, dict):
        if pk in item:
            return item[pk]
        if len(item) == 1:
            return next(iter(item.values()))
        raise BadRecord(f"the key object has no primary key field {pk!r}")
    return item


def row_key(pk: str, row: dict[str, Any]) -> Any:
    """Returns the primary key (field `pk`) of an upsert row (None when it has none: the
    proxy refuses it)."""
    key = row.get(pk)
    return key if isinstance(key, (int, str)) else None
