"""Turning validated columns into RowsInserted/RowsDeleted events: routing rows to vchannels by
primary-key hash, and splitting batches so no record exceeds the maximum message size."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import HALF_TYPES, CollectionInfo, CollectionSchema, DataType
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.channels import shard_of

#: types whose rows vary in size (a sparse row's str, its bytes' repr, overestimates it)
VARIABLE = (DataType.VARCHAR, DataType.JSON, DataType.SPARSE_FLOAT_VECTOR)
ENVELOPE_SLACK = 4096  # bytes reserved for the envelope and Avro framing


def take(col: Any, idx: np.ndarray) -> Any:
    """Returns the rows `idx` (ascending) of a column (numpy array or list): a run of rows
    (an insert's usual case: all of them) as a slice, for an array a view (no copy of the
    vectors per step of the insert path)."""
    if len(idx) and int(idx[-1]) - int(idx[0]) + 1 == len(idx):  # a run: one slice
        return col[int(idx[0]) : int(idx[-1]) + 1]
    if isinstance(col, np.ndarray):
        return col[idx]
    return [col[i] for i in idx]


def row_bytes(schema: CollectionSchema, cols: dict[str, Any], n: int) -> int:
    """Returns an estimate of one row's encoded size in bytes."""
    size = 0
    for f in schema.fields:
        if f.dtype is DataType.FLOAT_VECTOR:
            size += 4 * (f.dim or 0)
        elif f.dtype in HALF_TYPES:
            size += 2 * (f.dim or 0)
        elif f.dtype is DataType.BINARY_VECTOR:
            size += (f.dim or 0) // 8
        elif f.dtype in VARIABLE:  # $meta may be left out
            size += 8 + sum(len(str(v)) for v in cols.get(f.name, ())) // max(1, n)
        else:
            size += 10
    return size


def split_by_shard(info: CollectionInfo, pks: Any) -> Iterator[tuple[int, np.ndarray]]:
    """Yields (shard, row indices) for every shard of the collection that receives rows."""
    return split_rows(pks, info.shards_num)


def split_rows(pks: Any, shards: int) -> Iterator[tuple[int, np.ndarray]]:
    """Yields (shard, row indices) for every one of `shards` shards that receives rows,
    routing each row by the hash of its primary key."""
    n = len(pks)
    if shards == 1:
        yield 0, np.arange(n)
        return
    of = shard_of(pks, shards)
    for s in range(shards):
        idx = np.nonzero(of == s)[0]
        if len(idx):
            yield s, idx


def insert_events(
    info: CollectionInfo,
    cols: dict[str, Any],
    n: int,
    body: dict[str, Any],
    ts: int,
    vchannel: str,
    serde: EventSerde,
    limit: int,
    per_row: int | None = None,
) -> list[bytes]:
    """Returns the encoded RowsInserted events of one vchannel's rows, each <= `limit` bytes
    (`per_row`: `row_bytes` of these very columns, if known).

    Raises InvalidArgument if a single row does not fit in a message.
    """
    rows = _Rows(info, cols, body, ts, vchannel, serde, limit)
    size = row_bytes(info.schema, cols, n) if per_row is None else per_row
    per = max(1, (limit - ENVELOPE_SLACK) // max(1, size))
    if per >= n:  # one event (the usual insert)
        return rows.encode(0, n)
    return [d for lo in range(0, n, per) for d in rows.encode(lo, min(n, lo + per))]


@dataclass(frozen=True)
class _Rows:
    """One vchannel's rows and what their RowsInserted events carry (`insert_events`).

    A class, not a nested function calling itself: such a function is a reference cycle (it,
    its cells, its closure), which kept each insert's columns (~200 KB of vectors a 1,000-row
    insert) alive until the garbage collector ran, and its 10 objects an insert, never freed
    otherwise, were what made that collector run: a gen-0 pass of 0.7-1.5 ms every ~20
    inserts in the handler's thread (session 24, benchmarks/insert_handler_bench)."""

    info: CollectionInfo
    cols: dict[str, Any]
    body: dict[str, Any]
    ts: int
    vchannel: str
    serde: EventSerde
    limit: int

    def encode(self, lo: int, hi: int) -> list[bytes]:
        """Returns the events of rows lo..hi-1: one, or halves until each fits."""
        data = self.serde.encode(self._event(lo, hi))
        if len(data) <= self.limit:
            return [data]
        if hi - lo == 1:
            raise InvalidArgument(
                f"row {lo} encodes to {len(data)} bytes, over the maximum message size {self.limit}"
            )
        mid = (lo + hi) // 2
        return self.encode(lo, mid) + self.encode(mid, hi)

    def _event(self, lo: int, hi: int) -> Event:
        cols = self.cols
        idx = None if lo == 0 and hi == len(cols[next(iter(cols))]) else np.arange(lo, hi)
        columns = [
            {
                "field_id": f.field_id,
                "field_name": f.name,
                "column": encode_column(
                    f.dtype, cols[f.name] if idx is None else take(cols[f.name], idx), f.dim, True
                ),
            }
            for f in self.info.schema.fields
            if f.name in cols  # all but a left-out $meta (schemas.columns.with_dynamic)
        ]
        body = {
            **self.body,
            "num_rows": hi - lo,
            "first_row_id": self.body["first_row_id"] + lo,
            "columns": columns,
        }
        return Event("RowsInserted", self.ts, body, self.info.collection_id, self.vchannel)


def delete_events(
    info: CollectionInfo,
    keys: Any,
    partition: int,
    ts: int,
    vchannel: str,
    serde: EventSerde,
    limit: int,
) -> list[bytes]:
    """Returns the encoded RowsDeleted events of one vchannel's keys, each <= `limit` bytes."""
    return _Keys(info, keys, partition, ts, vchannel, serde, limit).encode(0, len(keys))


@dataclass(frozen=True)
class _Keys:
    """One vchannel's deleted keys (`delete_events`): a class for the reason of `_Rows`."""

    info: CollectionInfo
    keys: Any
    partition: int
    ts: int
    vchannel: str
    serde: EventSerde
    limit: int

    def encode(self, lo: int, hi: int) -> list[bytes]:
        """Returns the events of keys lo..hi-1: one, or halves until each fits."""
        info = self.info
        body = {
            "collection_id": info.collection_id,
            "partition_id": self.partition,
            "num_rows": hi - lo,
            "primary_keys": encode_column(info.schema.primary.dtype, self.keys[lo:hi]),
        }
        event = Event("RowsDeleted", self.ts, body, info.collection_id, self.vchannel)
        data = self.serde.encode(event)
        if len(data) <= self.limit or hi - lo == 1:
            return [data]
        mid = (lo + hi) // 2
        return self.encode(lo, mid) + self.encode(mid, hi)
