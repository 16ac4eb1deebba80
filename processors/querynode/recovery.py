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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectorlog.model import ROW_ID_FIELD, TIMESTAMP_FIELD, CollectionSchema, DataType
from vectorlog.processors.datanode.service import (
    field_values,
    int64s,
    read_delta_binlog,
    read_insert_binlog,
)
from vectorlog.processors.querynode.sealed import IndexFiles
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Log
from vectorlog.streams.msgstream import StreamPosition
from vectorlog.streams.scan import read_to_end

log = logging.getLogger(__name__)


@dataclass
class SegmentFiles:
    """One segment's binlogs as coord references them, in the order they were written."""

    segment_id: int
    collection_id: int = 0
    partition_id: int = 0
    pchannel: int = -1
    inserts: dict[int, list[str]] = field(default_factory=dict)  # field id -> paths
    deltas: list[str] = field(default_factory=list)


@dataclass
class RecoveryPoint:
    """What a query node loads and where it consumes dml from."""

    checkpoints: dict[int, StreamPosition] = field(default_factory=dict)  # by pchannel
    segments: dict[int, SegmentFiles] = field(default_factory=dict)  # by id

    def apply(self, event: Event) -> None:
        """Folds one coord event in (events of other types are ignored)."""
        b = event.body
        if event.type == "ChannelCheckpointed":
            for p in b["positions"]:
                pos = StreamPosition(p["offset"], p["tick"], p["tick_offset"])
                self.checkpoints[p["pchannel"]] = pos
        elif event.type == "SegmentOpened":
            seg = self._segment(b)
            seg.pchannel = b["pchannel"]
        elif event.type == "BinlogPathsSaved":
            self._saved(b)

    def _segment(self, b: dict[str, Any]) -> SegmentFiles:
        seg = self.segments.get(b["segment_id"])
        if seg is None:
            seg = self.segments[b["segment_id"]] = SegmentFiles(b["segment_id"])
        seg.collection_id, seg.partition_id = b["collection_id"], b["partition_id"]
        return seg

    def _saved(self, b: dict[str, Any]) -> None:
        seg = self._segment(b)
        end = b["end_position"]
        end = end[1] if isinstance(end, tuple) else end
        if end and seg.pchannel < 0:
            seg.pchannel = end["pchannel"]
        for fb in b["field_binlogs"]:
            seg.inserts.setdefault(fb["field_id"], []).extend(x["path"] for x in fb["binlogs"])
        seg.deltas.extend(x["path"] for x in b["delta_binlogs"])

    def tick(self, pchannel: int) -> int:
        """Returns the tick up to which binlogs hold `pchannel`'s rows (0: none)."""
        pos = self.checkpoints.get(pchannel)
        return 0 if pos is None else pos.tick


def read_point(log_: Log, topic: str, serde: EventSerde, timeout: float = 60.0) -> RecoveryPoint:
    """Returns the recovery point folded from the whole coord `topic` (undecodable records
    are skipped: datacoord dead-letters them). Raises LogError if its end is not reached."""
    point = RecoveryPoint()
    for rec in read_to_end(log_, topic, timeout):
        try:
            event = serde.decode(rec.value)
        except Exception as exc:
            log.debug("query node recovery skips coord record %d: %s", rec.offset, exc)
            continue
        point.apply(event)
    return point


@dataclass
class SegmentRows:
    """The rows of one segment read from its binlogs (up to a tick), in written order."""

    segment_id: int
    partition_id: int
    row_ids: np.ndarray
    ts: np.ndarray  # uint64
    columns: dict[str, Any]  # field name -> values as the dml log carries them
    vectors: np.ndarray
    delete_pks: list[Any]
    delete_ts: np.ndarray  # uint64

    def __len__(self) -> int:
        return len(self.ts)


def read_segment(
    seg: SegmentFiles, schema: CollectionSchema, tick: int, files: IndexFiles
) -> SegmentRows:
    """Returns the segment's rows and deletes with ts <= `tick`. Raises CorruptBinlog, or
    what the store raises for a missing file."""
    written = {len(paths) for paths in seg.inserts.values()}
    if len(written) > 1 or (seg.inserts and set(seg.inserts) < _field_ids(schema)):
        raise ValueError(f"segment {seg.segment_id}'s binlogs do not hold every field alike")
    ts = _concat(int64s(_column(files, p), p) for p in seg.inserts.get(TIMESTAMP_FIELD, []))
    keep = np.flatnonzero(ts.astype(np.uint64) <= np.uint64(tick))
    everything = len(keep) == len(ts)
    row_ids = _concat(int64s(_column(files, p), p) for p in seg.inserts.get(ROW_ID_FIELD, []))
    columns: dict[str, Any] = {}
    for f in schema.fields:
        values = [
            field_values(_column(files, p), f.dtype, f.element_type, p)
            for p in seg.inserts.get(f.field_id, [])
        ]
        columns[f.name] = _select(_join(values, f.dtype), keep, everything)
    vectors = columns.pop(schema.vector.name)
    pks, dts = _deletes(seg.deltas, files, tick)
    return SegmentRows(
        seg.segment_id,
        seg.partition_id,
        _select(row_ids, keep, everything),
        _select(ts, keep, everything).astype(np.uint64),
        columns,
        np.ascontiguousarray(vectors, dtype=np.float32),
        pks,
        dts,
    )


def _field_ids(schema: CollectionSchema) -> set[int]:
    return {ROW_ID_FIELD, TIMESTAMP_FIELD} | {f.field_id for f in schema.fields}


def _column(files: IndexFiles, path: str) -> Any:
    return read_insert_binlog(files.get(path), path)


def _deletes(paths: list[str], files: IndexFiles, tick: int) -> tuple[list[Any], np.ndarray]:
    """Returns the primary keys and ts of the deletes at or below `tick` in `paths`."""
    pks: list[Any] = []
    tss: list[np.ndarray] = []
    for path in paths:
        keys, ts = read_delta_binlog(files.get(path), path)
        at = np.flatnonzero(np.asarray(ts, dtype=np.uint64) <= np.uint64(tick))
        pks.extend(keys[i] for i in at.tolist())
        tss.append(np.asarray(ts, dtype=np.uint64)[at])
    return pks, _concat(tss).astype(np.uint64)


def _concat(parts: Iterable[np.ndarray]) -> np.ndarray:
    arrays = list(parts)
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)


def _join(parts: list[Any], dtype: DataType) -> Any:
    """Returns one field's values from its binlogs joined (numpy arrays, or lists)."""
    if not parts:  # a segment with deletes only
        return np.zeros((0, 0), np.float32) if dtype is DataType.FLOAT_VECTOR else []
    if isinstance(parts[0], np.ndarray):
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    return [v for part in parts for v in part]


def _select(values: Any, keep: np.ndarray, everything: bool) -> Any:
    if everything:
        return values
    if isinstance(values, np.ndarray):
        return values[keep]
    return [values[i] for i in keep.tolist()]
