"""The query node's side of a bulk insert: a SegmentImported's segments read from their binlogs
(every row stamped with the event's ts by the commit), to be loaded as an insert at that ts."""

from __future__ import annotations

from collections.abc import Iterator

from vectorlog.model import CollectionSchema
from vectorlog.processors.querynode.recovery import (
    RecoveryPoint,
    SegmentFiles,
    SegmentRows,
    read_segments,
    writes_of,
)
from vectorlog.processors.querynode.sealed import IndexFiles
from vectorlog.schemas.serde import Event
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
