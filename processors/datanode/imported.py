"""The data node's side of a bulk insert (SegmentImported on dml): the imported segments' keys
read back from their binlogs, and the BinlogPathsSaved that makes each a Flushed segment on
coord (for datacoord, the index node and query node recovery)."""

from __future__ import annotations

from typing import Any

import numpy as np

from vectorlog.core.model import CollectionSchema
from vectorlog.schemas.serde import Event
from vectorlog.storage.binlog_read import read_insert_binlog
from vectorlog.storage.column_read import field_values
from vectorlog.storage.objectstore import ObjectStore


def imported_keys(
    store: ObjectStore, schema: CollectionSchema, segment: dict[str, Any]
) -> list[Any]:
    """Returns an imported segment's primary keys, in row order. Raises CorruptBinlog,
    ObjectNotFound, ValueError if the segment has no binlog of its primary key."""
    pk = schema.primary
    paths = [
        b["path"]
        for fb in segment["field_binlogs"]
        if fb["field_id"] == pk.field_id
        for b in fb["binlogs"]
    ]
    if not paths:
        raise ValueError(f"imported segment {segment['segment_id']} has no {pk.name!r} binlog")
    keys: list[Any] = []
    for path in paths:
        values = field_values(read_insert_binlog(store.get(path), path), pk.dtype, None, path)
        keys += values.tolist() if isinstance(values, np.ndarray) else list(values)
    return keys


def saved_body(
    event: Event, segment: dict[str, Any], end_position: dict[str, Any]
) -> dict[str, Any]:
    """Returns the BinlogPathsSaved body of one segment of a SegmentImported `event`."""
    b = event.body
    return {
        "segment_id": segment["segment_id"],
        "collection_id": b["collection_id"],
        "partition_id": b["partition_id"],
        "vchannel": event.vchannel,
        "field_binlogs": segment["field_binlogs"],
        "delta_binlogs": [],
        "stats_binlogs": segment["stats_binlogs"],
        "ddl_binlogs": [],
        "num_rows": segment["num_rows"],
        "start_position": None,
        "end_position": end_position,
        "flushed": True,
        "imported": True,
    }
