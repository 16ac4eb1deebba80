"""The query node's side of a bulk insert: a SegmentImported's segments read from their binlogs
(every row stamped with the event's ts by the commit), to be loaded as an insert at that ts;
and of a compaction: the row ids of the segment a SegmentsCompacted merged segments into."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from vectorlog.core.model import ROW_ID_FIELD, CollectionSchema
from vectorlog.processors.querynode.recovery import (
    RecoveryPoint,
    SegmentFiles,
    SegmentRows,
    read_segments,
    writes_of,
)
from vectorlog.processors.querynode.sealed import IndexFiles
from vectorlog.schemas.serde import Event
from vectorlog.storage import int64s, read_insert_binlog
from vectorlog.streams.msgstream import StreamPosition

EVERY_TICK = StreamPosition(0, (1 << 63) - 1, 0)  # no row of an import is left out


def imported_files(event: Event) -> list[SegmentFiles]:
    """Returns the binlogs of a SegmentImported's segments, one write each."""
    b = event.body
    out = []
    for seg in b["segments"]:
        writes = writes_of(seg["field_binlogs"])
        out.append(
            SegmentFiles(seg["segment_id"], b["collection_id"], b["partition_id"], -1, writes)
        )
    return out


def imported_rows(
    event: Event, schema: CollectionSchema, files: IndexFiles
) -> Iterator[SegmentRows]:
    """Yields the rows of a SegmentImported's segments, one chunk per segment. Raises
    CorruptBinlog, ObjectNotFound, ValueError (a segment without every field's binlog)."""
    point = RecoveryPoint({-1: EVERY_TICK})
    yield from read_segments(imported_files(event), schema, point, files)


def compacted_row_ids(segment: dict[str, Any], files: IndexFiles) -> np.ndarray:
    """Returns the row ids of an ImportedSegment dict (a compaction's new segment). Raises
    CorruptBinlog or what the store raises."""
    paths = [
        b["path"]
        for fb in segment["field_binlogs"]
        if fb["field_id"] == ROW_ID_FIELD
        for b in fb["binlogs"]
    ]
    chunks = [int64s(read_insert_binlog(files.get(p), p), p) for p in paths]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
