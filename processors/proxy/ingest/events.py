"""vectorlog's own dml events as ingest records: a RowsInserted or RowsDeleted record copied
from another cluster's dml topic (or written by `vectorlog replay --format avro`) is applied to
the route's collection as upserts or deletes; its ids, timestamps and segments are not kept.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from vectorlog.core.model import META
from vectorlog.processors.proxy.ingest.errors import BadRecord
from vectorlog.schemas.columns import decode_column
from vectorlog.schemas.errors import SchemaError
from vectorlog.schemas.serde import SINGLE_OBJECT_MAGIC, EventSerde

_SERDE = EventSerde()


def is_event(raw: bytes) -> bool:
    """Returns True if `raw` starts like a vectorlog event (Avro single-object encoding)."""
    return raw[:2] == SINGLE_OBJECT_MAGIC


def event_items(raw: bytes) -> tuple[str, list[Any]]:
    """Returns ("upsert", rows) of a RowsInserted or ("delete", keys) of a RowsDeleted.
    Raises BadRecord for another event type or an undecodable one."""
    try:
        event = _SERDE.decode(raw)
    except SchemaError as exc:
        raise BadRecord(f"an undecodable vectorlog event ({exc})") from None
    body = event.body
    try:
        if event.type == "RowsInserted":
            return "upsert", _rows(body["columns"], body["num_rows"])
        if event.type == "RowsDeleted":
            keys = decode_column(body["primary_keys"], body["num_rows"])
            return "delete", [_scalar(k) for k in keys]
    except SchemaError as exc:
        raise BadRecord(f"a malformed {event.type} event ({exc})") from None
    raise BadRecord(f"a {event.type} event is not a write (RowsInserted, RowsDeleted)")


def _rows(columns: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for col in columns:
        name, kind = col["field_name"], col["column"][0].rsplit(".", 1)[-1]
        values = decode_column(col["column"], n)
        for row, value in zip(rows, values, strict=True):
            if kind == "JsonColumn":
                value = json.loads(value)
            if name == META:
                row.update(value)
            else:
                row[name] = _scalar(value)
    return rows


def _scalar(value: Any) -> Any:
    """Returns numpy scalars as Python values; vectors (arrays) and the rest as they are."""
    return value.item() if isinstance(value, np.generic) else value
