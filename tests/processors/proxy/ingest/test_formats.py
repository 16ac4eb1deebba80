"""Decoding ingest records: JSON rows, Connect envelopes, Debezium events, tombstones."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.formats import DELETE, UPSERT, BadRecord, Change, decode
from vectorlog.processors.proxy.ingest.rows import fit_row, primary_key
from vectorlog.streams.log.base import Record

DEFAULT = IngestRoute("vl.ingest", None)
MAPPED = IngestRoute("src", "c")


def rec(value: Any, key: bytes | None = b"c") -> Record:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return Record("t", 0, 7, raw, key)


def test_rows_alone_in_arrays_and_in_connect_envelopes():
    row = {"id": 1, "vector": [0.5, 1.0]}
    assert decode(rec(row), DEFAULT) == [Change(UPSERT, "c", row)]
    assert decode(rec([row, row]), DEFAULT) == [Change(UPSERT, "c", row)] * 2
    assert decode(rec({"schema": {"type": "struct"}, "payload": row}), DEFAULT) == [
        Change(UPSERT, "c", row)
    ]


def test_debezium_creates_updates_reads_upsert_after_and_deletes_delete_before():
    after, before = {"id": 2, "vector": [1.0]}, {"id": 3}
    for op in ("c", "u", "r"):
        event = {"before": None, "after": after, "op": op}
        assert decode(rec(event), MAPPED) == [Change(UPSERT, "c", after)]
    event = {"schema": {}, "payload": {"before": before, "after": None, "op": "d"}}
    assert decode(rec(event), MAPPED) == [Change(DELETE, "c", before)]


def test_tombstones_delete_by_key():
    assert decode(rec(b"", b"5"), MAPPED) == [Change(DELETE, "c", 5)]
    assert decode(rec(b"", b"abc"), MAPPED) == [Change(DELETE, "c", "abc")]
    key = json.dumps({"schema": {}, "payload": {"id": 6}}).encode()
    assert decode(rec(b"", key), MAPPED) == [Change(DELETE, "c", {"id": 6})]
    envelope: dict[str, Any] = {"schema": {}, "payload": None}
    assert decode(rec(envelope, b'{"id": 7}'), MAPPED) == [Change(DELETE, "c", {"id": 7})]


@pytest.mark.parametrize(
    ("value", "key", "route", "reason"),
    [
        (b"not json", b"c", DEFAULT, "not JSON"),
        (b"\x00\x00\x00\x00\x01avro", b"c", DEFAULT, "Confluent-framed"),
        (42, b"c", DEFAULT, "JSON object"),
        ([], b"c", DEFAULT, "JSON object"),
        ({"id": 1}, None, DEFAULT, "collection as its key"),
        ({"op": "t", "before": None, "after": None}, b"c", DEFAULT, "op 't'"),
        ({"op": "c", "after": None}, b"c", DEFAULT, "without an `after`"),
        ({"id": 1}, b"c", IngestRoute("src", "c", "debezium"), "not a Debezium"),
        (b"", b"c", DEFAULT, "needs a collection header"),
        (b"", None, MAPPED, "needs the primary key"),
        (b"", b"[1]", MAPPED, "must be a primary key"),
    ],
)
def test_each_malformed_kind_is_refused_with_its_reason(
    value: Any, key: bytes | None, route: IngestRoute, reason: str
):
    with pytest.raises(BadRecord, match=reason):
        decode(rec(value, key), route)


SCHEMA = CollectionSchema(
    (
        FieldSchema("id", DataType.INT64, is_primary=True),
        FieldSchema("vector", DataType.FLOAT_VECTOR, dim=2),
    )
)


def test_vectors_as_base64_float32_or_json_strings_are_decoded():
    b64 = base64.b64encode(np.array([0.5, -2.0], dtype="<f4").tobytes()).decode()
    assert list(fit_row(SCHEMA, {"id": 1, "vector": b64})["vector"]) == [0.5, -2.0]
    assert fit_row(SCHEMA, {"id": 1, "vector": "[0.5, 1]"})["vector"] == [0.5, 1]
    for bad in ("!!!", "AAA=", "[0.5,"):
        with pytest.raises(BadRecord, match="'vector'"):
            fit_row(SCHEMA, {"id": 1, "vector": bad})


def test_a_delete_key_is_a_scalar_the_key_field_or_a_lone_field():
    assert primary_key(SCHEMA, 4) == 4
    assert primary_key(SCHEMA, {"id": 4, "vector": None}) == 4
    assert primary_key(SCHEMA, {"pk": 4}) == 4
    with pytest.raises(BadRecord, match="'id'"):
        primary_key(SCHEMA, {"a": 1, "b": 2})
