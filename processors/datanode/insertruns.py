"""Runs of inserts a data node buffers as one: the RowsInserted events of a time tick's pack
that go to one segment of one vchannel, none of whose primary keys repeats, are decoded and
added to the segment's buffer as one chunk (its rows' ids and timestamps in one array each),
not one event at a time. The buffer then holds the same rows, ids and timestamps as after
buffering the events one by one, and writes the same binlogs.

A client inserting one row per call brings the data node a pack of ~100 one-row events per
200 ms tick, all applied when the tick arrives; each event alone cost the node its fixed
per-event work (dispatch, schema and replay checks, a buffer append of five small arrays),
a burst that holds the GIL the request threads of the same process wait for."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from vectorlog.core.model import CollectionSchema
from vectorlog.schemas.columns import (
    chunked_columns,
    decode_column,
    inserts_grouped,
    run_row_ids,
    with_dynamic,
)
from vectorlog.schemas.serde import Event

INSERTED = "RowsInserted"


@dataclass(frozen=True)
class InsertRun:
    """The decoded rows of a run: each event's primary keys, then every row's id, insert ts
    and field values (field id -> its chunks: one array, or the events' own chunks when one
    is a list), `n` rows in all, and every primary key in row order (`all_keys`)."""

    events: list[Event]
    pks: list[list[Any]]
    row_ids: np.ndarray
    timestamps: np.ndarray
    columns: dict[int, list[Any]]
    n: int
    all_keys: list[Any]

    def keys(self) -> list[Any]:
        """Returns the run's primary keys, in row order."""
        return self.all_keys


def insert_groups(events: list[Event]) -> list[list[Event]]:
    """Returns `events` in order, consecutive RowsInserted events of one collection, segment
    and vchannel grouped (a candidate run), every other event alone."""
    return inserts_grouped(events, _segment_of)


def _segment_of(e: Event) -> tuple[str, Any, Any]:
    return e.vchannel, e.body.get("collection_id"), e.body.get("segment_id")


def decoded_run(events: list[Event], schema: CollectionSchema) -> InsertRun | None:
    """Returns the rows of `events` (a group of `insert_groups`) as one run; None if an event
    lacks a field or does not decode, or a primary key repeats (each event is then applied
    on its own: a bad one is dead-lettered, a repeated key is an upsert)."""
    try:
        return _run(events, schema)
    except Exception:  # noqa: BLE001 (the event's own failure shows when applied alone)
        return None


def _run(events: list[Event], schema: CollectionSchema) -> InsertRun | None:
    joined = _joined(events, schema)
    if joined is not None:
        pks, columns, keys = joined
    else:
        decoded = [_decoded(e, schema) for e in events]
        parts = [d for d in decoded if d is not None]
        if len(parts) != len(events):
            return None
        pks = [pk for pk, _ in parts]
        columns = {f.field_id: _chunks([c[f.field_id] for _, c in parts]) for f in schema.fields}
        keys = list(chain.from_iterable(pks))
    counts = [len(p) for p in pks]
    total = sum(counts)
    if len(set(keys)) != total:
        return None
    firsts = [int(e.body["first_row_id"]) for e in events]
    return InsertRun(
        events,
        pks,
        run_row_ids(firsts, counts),
        np.repeat(np.array([e.ts for e in events], dtype=np.int64), counts),
        columns,
        total,
        keys,
    )


def _joined(
    events: list[Event], schema: CollectionSchema
) -> tuple[list[list[Any]], dict[int, list[Any]], list[Any]] | None:
    """Returns each event's primary keys, every field's rows in chunks decoded a field at
    a time (`chunked_columns`: one array, float vectors each event's own rows, joined once
    by the binlog write, not also here), and all the keys in row order; None if they cannot
    be (each event is then decoded alone)."""
    chunked = chunked_columns(schema, [e.body for e in events])
    if chunked is None:
        return None
    counts, columns = chunked
    (pk_values,) = columns[schema.primary.name]  # numbers: one array
    keys = pk_values.tolist()
    ends = np.cumsum(counts).tolist()
    pks = [keys[end - n : end] for end, n in zip(ends, counts, strict=True)]
    return pks, {f.field_id: columns[f.name] for f in schema.fields}, keys


def _decoded(event: Event, schema: CollectionSchema) -> tuple[list[Any], dict[int, Any]] | None:
    """Returns one event's primary keys and columns by field id; None if a field is missing."""
    n = event.body["num_rows"]
    columns = with_dynamic(schema, event.body["columns"], n)
    by_id = {c["field_id"]: decode_column(c["column"], n) for c in columns}
    if any(f.field_id not in by_id for f in schema.fields):
        return None
    pks = by_id[schema.primary.field_id]
    return (pks.tolist() if isinstance(pks, np.ndarray) else list(pks)), by_id


def _chunks(chunks: list[Any]) -> list[Any]:
    """Returns one field's chunks to buffer: joined into one array if every chunk is one,
    else as they are (a nullable field's chunk with a null is a list holding None)."""
    if len(chunks) > 1 and all(isinstance(c, np.ndarray) for c in chunks):
        return [np.concatenate(chunks)]
    return chunks
