"""Compaction's merge (Milvus's mix compaction): Flushed segments of one vchannel and partition
become one, written as binlogs; nothing goes on the log here (the proxy commits the result).

Every row keeps its row id and insert ts. A row is dropped when its key was deleted (or
superseded: an upsert is a delete of the older row) after its insert and at or before the
`horizon`; reads as of any T >= horizon see exactly what the merged segments gave. Delete
records after the horizon whose key still has a row here go to the new segment's delta log.
Pure over the object store: the same function runs in-process and as a Spark task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.added_fields import absent_values, fillable
from vectorlog.core.model import ROW_ID_FIELD, TIMESTAMP_FIELD, CollectionSchema
from vectorlog.schemas.serde import Event
from vectorlog.storage.binlog_read import int64s, read_insert_binlog
from vectorlog.storage.buffers import DeltaBuffer, InsertBuffer
from vectorlog.storage.column_read import field_values, read_delta_binlog
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.storage.segment_views import SegmentViews
from vectorlog.storage.writer import SegmentRef, SegmentWriter
from vectorlog.streams.msgstream import StreamPosition

Write = dict[int, str]  # field id -> the path of that field's binlog in one write


@dataclass(frozen=True)
class CompactionSource:
    """One segment to merge: its binlog writes in order and its delta logs."""

    segment_id: int
    writes: tuple[Write, ...]
    deltas: tuple[str, ...]


@dataclass(frozen=True)
class CompactionPlan:
    """What one merge needs (pickled to a Spark executor): the sources, the horizon, and the
    id block the new segment's files take their log ids from."""

    plan_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    schema: dict[str, Any]  # CollectionSchema.to_avro()
    sources: tuple[CompactionSource, ...]
    horizon: int  # hybrid ts
    segment_id: int  # the new segment's
    first_log_id: int
    now: int  # hybrid ts written into file headers
    expire_ts: int = 0  # rows inserted at or before it expired (the collection's TTL)


def log_ids_needed(schema: CollectionSchema) -> int:
    """Returns how many log ids one merge may take: a binlog per field and system field, a
    stats log and a delta log."""
    return len(schema.fields) + 4


@dataclass
class SegmentsRows:
    """Rows (row ids, ts, columns) and delete records (keys, ts) read from binlogs."""

    row_ids: np.ndarray
    ts: np.ndarray
    columns: dict[int, Any]  # field id -> values as the dml log carries them
    delete_pks: list[Any]
    delete_ts: np.ndarray


def merge(plan: CompactionPlan, store: ObjectStore) -> dict[str, Any]:
    """Reads the plan's segments and writes the merged one. Returns its ImportedSegment
    fields (segment_id, num_rows, field_binlogs, stats_binlogs) plus delta_binlogs,
    consumed_deltas and dropped_rows. With no row left it writes nothing (num_rows 0). A
    failure deletes what it wrote. Raises CorruptBinlog, ObjectNotFound, StorageError."""
    schema = CollectionSchema.from_avro(plan.schema)
    merged = read_rows(plan.sources, schema, store)
    keep, deletes = _survivors(merged, schema, plan.horizon, plan.expire_ts)
    out: dict[str, Any] = {
        "segment_id": plan.segment_id,
        "num_rows": int(len(keep)),
        "field_binlogs": [],
        "stats_binlogs": [],
        "delta_binlogs": [],
        "consumed_deltas": [p for s in plan.sources for p in s.deltas],
        "dropped_rows": int(len(merged.ts) - len(keep)),
    }
    if not len(keep):
        return out
    body = _write(plan, schema, store, merged, keep, deletes)
    for name in ("field_binlogs", "stats_binlogs", "delta_binlogs"):
        out[name] = body[name]
    return out


def read_rows(
    sources: tuple[CompactionSource, ...], schema: CollectionSchema, store: ObjectStore
) -> SegmentsRows:
    """Returns every row and delete record of the `sources` segments, rows in ts order
    (written order within one ts). Raises ValueError for a write without every field,
    CorruptBinlog, ObjectNotFound."""
    ids: list[np.ndarray] = []
    tss: list[np.ndarray] = []
    cols: dict[int, list[Any]] = {f.field_id: [] for f in schema.fields}
    pks: list[Any] = []
    dts: list[np.ndarray] = []
    for source in sources:
        for write in source.writes:
            added = {f.field_id for f in schema.fields if f.field_id not in write and fillable(f)}
            missing = {ROW_ID_FIELD, TIMESTAMP_FIELD, *cols} - write.keys() - added
            if missing:
                raise ValueError(f"segment {source.segment_id}: a write lacks {sorted(missing)}")
            ids.append(_int64s(store, write[ROW_ID_FIELD]))
            tss.append(_int64s(store, write[TIMESTAMP_FIELD]))
            for f in schema.fields:
                if f.field_id in added:  # added to the collection after this write
                    cols[f.field_id].append(absent_values(f, len(ids[-1])))
                    continue
                path = write[f.field_id]
                column = read_insert_binlog(store.get(path), path)
                cols[f.field_id].append(
                    field_values(column, f.dtype, f.element_type, path, f.nullable)
                )
        for path in source.deltas:
            keys, ts = read_delta_binlog(store.get(path), path)
            pks += keys
            dts.append(ts)
    row_ids, ts = _cat(ids), _cat(tss)
    order = np.argsort(ts, kind="stable")
    columns = {fid: _take(_joined(chunks), order) for fid, chunks in cols.items()}
    delete_ts = np.concatenate(dts).astype(np.uint64) if dts else np.zeros(0, np.uint64)
    return SegmentsRows(row_ids[order], ts[order], columns, pks, delete_ts)


def _survivors(
    merged: SegmentsRows, schema: CollectionSchema, horizon: int, expire_ts: int = 0
) -> tuple[np.ndarray, DeltaBuffer]:
    """Returns the rows kept (indexes) and the delete records kept: a row is dropped if its
    key's newest delete at or before `horizon` is after the row's insert, or if it was
    inserted at or before `expire_ts` (expired by the collection's TTL; 0: none)."""
    last: dict[Any, int] = {}
    for pk, d in zip(merged.delete_pks, merged.delete_ts.tolist(), strict=True):
        if d <= horizon and d > last.get(pk, -1):
            last[pk] = d
    pks = _list(merged.columns[schema.primary.field_id])
    ends = np.fromiter((last.get(pk, -1) for pk in pks), np.int64, count=len(pks))
    alive = merged.ts >= ends
    if expire_ts:
        alive &= merged.ts > expire_ts
    keep = np.flatnonzero(alive)
    held = {pks[i] for i in keep.tolist()}
    deletes = DeltaBuffer(StreamPosition())
    for pk, d in zip(merged.delete_pks, merged.delete_ts.tolist(), strict=True):
        if d > horizon and pk in held:
            deletes.add(pk, d)
    return keep, deletes


def _write(
    plan: CompactionPlan,
    schema: CollectionSchema,
    store: ObjectStore,
    merged: SegmentsRows,
    keep: np.ndarray,
    deletes: DeltaBuffer,
) -> dict[str, Any]:
    """Writes the kept rows and delete records as one Flushed segment's binlogs."""
    rows = InsertBuffer(StreamPosition())
    rows.row_ids, rows.timestamps = [merged.row_ids[keep]], [merged.ts[keep]]
    rows.columns = {fid: [_take(values, keep)] for fid, values in merged.columns.items()}
    rows.num_rows = len(keep)
    ref = SegmentRef(plan.collection_id, plan.partition_id, plan.segment_id, plan.vchannel)
    writer = SegmentWriter(store, _block(plan, schema), lambda: plan.now)
    return writer.write(ref, schema, rows, deletes if len(deletes) else None, True, [], 0)


def _block(plan: CompactionPlan, schema: CollectionSchema) -> Callable[[int], int]:
    """Returns a `new_ids(n)` handing out the plan's log ids; raises ValueError past them."""
    state = {"next": plan.first_log_id}
    end = plan.first_log_id + log_ids_needed(schema)

    def take(n: int) -> int:
        first = state["next"]
        if first + n > end:
            raise ValueError(f"compaction {plan.plan_id} needs more log ids than reserved")
        state["next"] = first + n
        return first

    return take


def _int64s(store: ObjectStore, path: str) -> np.ndarray:
    return int64s(read_insert_binlog(store.get(path), path), path)


def _cat(chunks: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(chunks).astype(np.int64) if chunks else np.zeros(0, np.int64)


def _joined(chunks: list[Any]) -> Any:
    """Returns chunks of one field as one column (numpy arrays concatenated, lists joined)."""
    if chunks and all(isinstance(c, np.ndarray) for c in chunks):
        return np.concatenate(chunks)
    return [
        v for chunk in chunks for v in (_list(chunk) if isinstance(chunk, np.ndarray) else chunk)
    ]


def _take(values: Any, idx: np.ndarray) -> Any:
    if isinstance(values, np.ndarray):
        return values[idx]
    return [values[i] for i in idx.tolist()]


def _list(values: Any) -> list[Any]:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def check_compactable(views: SegmentViews, body: dict[str, Any], vchannel: str) -> None:
    """Raises ValueError unless every merged segment of a SegmentsCompacted `body` is a
    Flushed segment of its collection, partition and `vchannel`, not merged already."""
    for sid in body["compacted_from"]:
        view = views.by_id.get(sid)
        where = (body["collection_id"], body["partition_id"], vchannel)
        if view is None or not view.flushed or view.dropped:
            state = "unknown" if view is None else "dropped" if view.dropped else "not Flushed"
            raise ValueError(f"compaction {body['plan_id']}: segment {sid} is {state}")
        if (view.collection_id, view.partition_id, view.vchannel) != where:
            raise ValueError(f"compaction {body['plan_id']}: segment {sid} is not of {where}")


def compacted_body(event: Event, end_position: dict[str, Any]) -> dict[str, Any]:
    """Returns the BinlogPathsSaved body of a SegmentsCompacted `event`'s new segment."""
    b, seg = event.body, event.body["segment"]
    return {
        "segment_id": seg["segment_id"],
        "collection_id": b["collection_id"],
        "partition_id": b["partition_id"],
        "vchannel": event.vchannel,
        "field_binlogs": seg["field_binlogs"],
        "delta_binlogs": b["delta_binlogs"],
        "stats_binlogs": seg["stats_binlogs"],
        "ddl_binlogs": [],
        "num_rows": seg["num_rows"],
        "start_position": None,
        "end_position": end_position,
        "flushed": True,
        "imported": True,
        "compacted_from": list(b["compacted_from"]),
    }
