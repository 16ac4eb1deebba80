"""Where a query node starts after a restart (seed 004 FAQ 6, Milvus's channel checkpoint).

The coord topic says, per dml pchannel, the data node's last published checkpoint
(`ChannelCheckpointed`) and, per segment, the binlogs written so far (`BinlogPathsSaved`).
Every row and delete at or below a checkpoint's tick on its pchannel is in those binlogs, so
the node loads them (rows and deletes above the tick are dropped here: the dml replay from the
checkpoint brings them again, in order) and consumes dml from the checkpoint. Without a
published checkpoint a pchannel is replayed from offset 0 and nothing of it is loaded.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectorlog.core.added_fields import absent_values, fillable
from vectorlog.core.halfvec import to_float32
from vectorlog.core.model import (
    HALF_TYPES,
    ROW_ID_FIELD,
    TIMESTAMP_FIELD,
    CollectionSchema,
    DataType,
    FieldSchema,
)
from vectorlog.processors.querynode.sealed import IndexFiles
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage import (
    InsertColumn,
    field_values,
    int64s,
    read_delta_binlog,
    read_insert_binlog,
)
from vectorlog.storage.channel_fence import ChannelFence
from vectorlog.streams.log.base import Log
from vectorlog.streams.msgstream import StreamPosition
from vectorlog.streams.snapshots import Blobs, read_from

log = logging.getLogger(__name__)
#: threads reading and decoding binlogs at recovery
READ_THREADS = min(2, os.cpu_count() or 1)


@dataclass
class SegmentFiles:
    """One segment's binlogs as coord references them, in the order they were written."""

    segment_id: int
    collection_id: int = 0
    partition_id: int = 0
    pchannel: int = -1
    writes: list[dict[int, str]] = field(default_factory=list)  # per write: field id -> path
    deltas: list[str] = field(default_factory=list)


@dataclass
class RecoveryPoint:
    """What a query node loads and where it consumes dml from."""

    checkpoints: dict[int, StreamPosition] = field(default_factory=dict)  # by pchannel
    segments: dict[int, SegmentFiles] = field(default_factory=dict)  # by id
    dropped: set[int] = field(default_factory=set)  # merged into another by a compaction
    flushed: dict[int, int] = field(default_factory=dict)  # Flushed segment id -> its rows
    fence: ChannelFence = field(default_factory=ChannelFence)

    def apply(self, event: Event) -> None:
        """Folds one coord event in (events of other types, and data node writes fenced by
        storage.channel_fence, are ignored)."""
        admitted = self.fence.admit(event)
        if admitted is None:
            return
        event, b = admitted, admitted.body
        if event.type == "ChannelCheckpointed":
            for p in b["positions"]:
                pos = StreamPosition(p["offset"], p["tick"], p["tick_offset"])
                self.checkpoints[p["pchannel"]] = pos
        elif event.type == "SegmentOpened" and b["segment_id"] not in self.dropped:
            seg = self._segment(b)
            seg.pchannel = b["pchannel"]
        elif event.type == "BinlogPathsSaved":
            self._saved(b)
        elif event.type == "SegmentFlushed" and b["segment_id"] not in self.dropped:
            self.flushed[b["segment_id"]] = b["num_rows"]

    def _segment(self, b: dict[str, Any]) -> SegmentFiles:
        seg = self.segments.get(b["segment_id"])
        if seg is None:
            seg = self.segments[b["segment_id"]] = SegmentFiles(b["segment_id"])
        seg.collection_id, seg.partition_id = b["collection_id"], b["partition_id"]
        return seg

    def _saved(self, b: dict[str, Any]) -> None:
        for sid in b.get("compacted_from", []):
            self.dropped.add(sid)
            self.segments.pop(sid, None)
            self.flushed.pop(sid, None)
        if b["segment_id"] in self.dropped:
            return
        seg = self._segment(b)
        end = b["end_position"]
        end = end[1] if isinstance(end, tuple) else end
        if end and seg.pchannel < 0:
            seg.pchannel = end["pchannel"]
        seg.writes.extend(writes_of(b["field_binlogs"]))
        seg.deltas.extend(x["path"] for x in b["delta_binlogs"])

    def tick(self, pchannel: int) -> int:
        """Returns the tick up to which binlogs hold `pchannel`'s rows (0: none)."""
        pos = self.checkpoints.get(pchannel)
        return 0 if pos is None else pos.tick


def writes_of(field_binlogs: list[dict[str, Any]]) -> list[dict[int, str]]:
    """Returns the binlog writes of FieldBinlogs records: per write, field id -> path (the
    i-th file of each field)."""
    files = {fb["field_id"]: [x["path"] for x in fb["binlogs"]] for fb in field_binlogs}
    return [
        {fid: paths[i] for fid, paths in files.items() if i < len(paths)}
        for i in range(max(map(len, files.values()), default=0))
    ]


def read_point(
    log_: Log, topic: str, serde: EventSerde, snapshots: Blobs | None, timeout: float = 60.0
) -> RecoveryPoint:
    """Returns the recovery point folded from the whole coord `topic`, its snapshot then the
    records after it (undecodable records are skipped: datacoord dead-letters them). Raises
    LogError if its end is not reached."""
    point = RecoveryPoint()
    for rec in read_from(log_, topic, snapshots, 0, timeout):
        try:
            event = serde.decode(rec.value)
        except Exception as exc:
            log.debug("query node recovery skips coord record %d: %s", rec.offset, exc)
            continue
        point.apply(event)
    return point


@dataclass
class SegmentRows:
    """Rows of one segment read from one binlog write (up to a tick), in written order, or
    (with no rows) its deletes up to the tick."""

    segment_id: int
    partition_id: int
    row_ids: np.ndarray
    ts: np.ndarray  # uint64
    columns: dict[str, Any]  # field name -> values as the dml log carries them
    #: vector field name -> its vectors; None: not read, the segment's cache entries have them
    vectors: dict[str, np.ndarray] | None
    delete_pks: list[Any]
    delete_ts: np.ndarray  # uint64

    def __len__(self) -> int:
        return len(self.ts)


def read_segments(
    segs: list[SegmentFiles],
    schema: CollectionSchema,
    point: RecoveryPoint,
    files: IndexFiles,
    threads: int = READ_THREADS,
    cached: frozenset[int] = frozenset(),
) -> Generator[SegmentRows, None, None]:
    """Yields the rows and deletes of `segs` at or below their pchannel's checkpoint tick:
    one SegmentRows per binlog write, one per segment with deletes, in that order. Every
    file is read and decoded ahead on `threads` threads (Parquet decoding releases the
    GIL), so a caller loading one chunk overlaps the reads of the next. The vector binlogs
    of the `cached` segment ids are not read (their rows' `vectors` are None). Raises
    CorruptBinlog, ValueError for a write without every field, or what the store raises."""
    pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="querynode-recovery")
    vector = {f.field_id for f in schema.fields if f.dtype is DataType.FLOAT_VECTOR}
    try:
        inserts = {
            path: pool.submit(_column, files, path)
            for seg in segs
            for write in seg.writes
            for fid, path in write.items()
            if fid not in vector or seg.segment_id not in cached
        }
        deltas = {path: pool.submit(_delta, files, path) for seg in segs for path in seg.deltas}
        for seg in segs:
            tick = point.tick(seg.pchannel)
            for write in seg.writes:
                columns = {p: inserts.pop(p).result() for p in write.values() if p in inserts}
                rows = _write(seg, write, schema, tick, columns)
                if len(rows):
                    yield rows
            logs = [deltas.pop(path).result() for path in seg.deltas]
            rows = _deletes(seg, schema, tick, logs)
            if len(rows.delete_ts):
                yield rows
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _column(files: IndexFiles, path: str) -> InsertColumn:
    return read_insert_binlog(files.get(path), path)


def _delta(files: IndexFiles, path: str) -> tuple[list[Any], np.ndarray]:
    return read_delta_binlog(files.get(path), path)


def _write(
    seg: SegmentFiles,
    write: dict[int, str],
    schema: CollectionSchema,
    tick: int,
    columns: dict[str, InsertColumn],
) -> SegmentRows:
    """Returns the rows of one write with ts <= `tick` (a field added to the collection
    after the write: its default value, else None, in every row)."""
    added = [f for f in schema.fields if f.field_id not in write and fillable(f)]
    missing = _field_ids(schema) - write.keys() - {f.field_id for f in added}
    if missing:
        raise ValueError(f"segment {seg.segment_id}: a write lacks fields {sorted(missing)}")
    ts = int64s(columns[write[TIMESTAMP_FIELD]], write[TIMESTAMP_FIELD])
    keep = None if not len(ts) or int(ts.max()) <= tick else np.flatnonzero(ts <= tick)
    values = {
        f.name: select(
            field_values(
                columns[write[f.field_id]], f.dtype, f.element_type, write[f.field_id], f.nullable
            ),
            keep,
        )
        for f in schema.fields
        if f.field_id in write and write[f.field_id] in columns  # not a cached vector's
    }
    kept = len(ts) if keep is None else len(keep)
    values |= {f.name: absent_values(f, kept) for f in added}
    row_ids = int64s(columns[write[ROW_ID_FIELD]], write[ROW_ID_FIELD])
    vectors = {
        f.name: _as_stored(f, values.pop(f.name)) for f in schema.vectors if f.name in values
    }
    return SegmentRows(
        seg.segment_id,
        seg.partition_id,
        select(row_ids, keep),
        select(ts, keep).astype(np.uint64),
        values,
        vectors or None,
        [],
        np.zeros(0, np.uint64),
    )


def _as_stored(f: FieldSchema, values: Any) -> Any:
    """Returns a vector field's values as its replica column takes them: float32 rows, or
    a sparse field's rows (a list of bytes)."""
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return list(values)
    raw = np.asarray(values)
    if f.dtype is DataType.BINARY_VECTOR:  # each row's bytes
        return [r.tobytes() for r in raw.astype(np.uint8)]
    if f.dtype in HALF_TYPES and raw.dtype == np.uint8 and raw.size:
        return to_float32(raw, f.dtype.value)
    return np.ascontiguousarray(raw, np.float32)


def _deletes(
    seg: SegmentFiles, schema: CollectionSchema, tick: int, logs: list[tuple[list[Any], np.ndarray]]
) -> SegmentRows:
    """Returns a segment's deletes with ts <= `tick` (and no rows)."""
    pks: list[Any] = []
    tss: list[np.ndarray] = []
    for keys, ts in logs:
        at = np.flatnonzero(ts <= np.uint64(tick))
        pks.extend(keys[i] for i in at.tolist())
        tss.append(ts[at])
    empty: dict[str, Any] = {f.name: [] for f in schema.fields if not f.is_vector}
    vectors = {f.name: _as_stored(f, np.zeros((0, f.dim or 0))) for f in schema.vectors}
    return SegmentRows(
        seg.segment_id,
        seg.partition_id,
        np.zeros(0, np.int64),
        np.zeros(0, np.uint64),
        empty,
        vectors,
        pks,
        np.concatenate(tss).astype(np.uint64) if tss else np.zeros(0, np.uint64),
    )


def _field_ids(schema: CollectionSchema) -> set[int]:
    return {ROW_ID_FIELD, TIMESTAMP_FIELD} | {f.field_id for f in schema.fields}


def select(values: Any, keep: np.ndarray | None) -> Any:
    """Returns `values` at `keep` (None: every one)."""
    if keep is None:
        return values
    if isinstance(values, np.ndarray):
        return values[keep]
    return [values[i] for i in keep.tolist()]
