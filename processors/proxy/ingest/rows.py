"""Fitting decoded ingest items to a collection's schema: vectors and primary keys."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import numpy as np

from vectorlog.model import CollectionSchema, DataType
from vectorlog.processors.proxy.ingest.formats import BadRecord


def fit_row(schema: CollectionSchema, row: dict[str, Any]) -> dict[str, Any]:
    """Returns `row` with each FLOAT_VECTOR given as a string decoded: a JSON array, or base64
    of little-endian float32 (as the Milvus Kafka sink accepts). Raises BadRecord."""
    out = dict(row)
    for f in schema.fields:
        value = out.get(f.name)
        if f.dtype is DataType.FLOAT_VECTOR and isinstance(value, str):
            out[f.name] = _vector(f.name, value)
    return out


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
    if not raw or len(raw) % 4:
        raise BadRecord(f"field {name!r}: {len(raw)} base64 bytes are not float32 values")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


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


def row_key(schema: CollectionSchema, row: dict[str, Any]) -> Any:
    """Returns the primary key of an upsert row (None when it has none: the proxy refuses it)."""
    key = row.get(schema.primary.name)
    return key if isinstance(key, (int, str)) else None
