"""Turning validated columns into RowsInserted/RowsDeleted events: routing rows to vchannels by
primary-key hash, and splitting batches so no record exceeds the maximum message size."""

from __future__ import annotations

from collections.abc import Iterator
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
) -> list[bytes]:
    """Returns the encoded RowsInserted events of one vchannel's rows, each <= `limit` bytes.

    Raises InvalidArgument if a single row does not fit in a message.
    """

    def encode(lo: int, hi: int) -> list[bytes]:
        idx = np.arange(lo, hi)
        columns = [
            {
                "field_id": f.field_id,
                "field_name": f.name,
                "column": encode_column(f.dtype, take(cols[f.name], idx), f.dim, arrays=True),
            }
            for f in info.schema.fields
            if f.name in cols  # all but a left-out $meta (schemas.columns.with_dynamic)
        ]
        event = Event(
            "RowsInserted",
            ts,
            {
                **body,
                "num_rows": hi - lo,
                "first_row_id": body["first_row_id"] + lo,
                "columns": columns,
            },
            info.collection_id,
            vchannel,
        )
        data = serde.encode(event)
        if len(data) <= limit:
            return [data]
        if hi - lo == 1:
            raise InvalidArgument(
                f"row {lo} encodes to {len(data)} bytes, over the maximum message size {limit}"
            )
        mid = (lo + hi) // 2
        return encode(lo, mid) + encode(mid, hi)

    per = max(1, (limit - ENVELOPE_SLACK) // max(1, row_bytes(info.schema, cols, n)))
    return [d for lo in range(0, n, per) for d in encode(lo, min(n, lo + per))]


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
    pk = info.schema.primary

    def encode(lo: int, hi: int) -> list[bytes]:
        body = {
            "collection_id": info.collection_id,
            "partition_id": partition,
            "num_rows": hi - lo,
            "primary_keys": encode_column(pk.dtype, keys[lo:hi]),
        }
        data = serde.encode(Event("RowsDeleted", ts, body, info.collection_id, vchannel))
        if len(data) <= limit or hi - lo == 1:
            return [data]
        mid = (lo + hi) // 2
        return encode(lo, mid) + encode(mid, hi)

    return encode(0, len(keys))
