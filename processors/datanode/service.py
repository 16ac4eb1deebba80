"""The data node's service interface: rows it buffers as log positions, written by another
engine's workers (`RowsWriter`).

With a `RowsWriter` (the Spark engine's executors, vectorlog/engines/spark/executor_write.py),
the data node keeps of each RowsInserted only where it lies on the log, its ts, row ids and
primary keys (`RowsRef`), never the columns: when the segment is written, the writer's tasks
read those records back from the log, decode them and write the insert and stats binlogs
straight to the storage root, and return only the Binlog records. The node keeps every
decision (what to write, when, the primary-key index, deletes) and commits as the local engine
does: files first, then BinlogPathsSaved, then the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from vectorlog.core.model import CollectionSchema, DataType
from vectorlog.storage.writer import SegmentRef
from vectorlog.streams.msgstream import StreamPosition


@dataclass(frozen=True)
class RowsRef:
    """One RowsInserted record: its dml position, ts, first row id and row count."""

    pchannel: int
    offset: int
    ts: int
    first_row_id: int
    num_rows: int


@dataclass
class RefBuffer:
    """The rows of one segment not yet in binlogs, as the records that carry them."""

    start: StreamPosition  # replaying from here redelivers every buffered row
    refs: list[RowsRef] = field(default_factory=list)
    num_rows: int = 0
    nbytes: int = 0  # an estimate of the rows' bytes (when the buffer is written)

    def append(self, ref: RowsRef, row_bytes: int) -> None:
        self.refs.append(ref)
        self.num_rows += ref.num_rows
        self.nbytes += ref.num_rows * row_bytes


class RowsWriter(Protocol):
    """Writes a segment's buffered rows where the records lie (another engine's workers)."""

    def write_rows(
        self, ref: SegmentRef, schema: CollectionSchema, rows: RefBuffer
    ) -> list[dict[str, Any]]:
        """Writes the insert and stats binlogs of `rows`; returns the BinlogPathsSaved bodies
        of each part (field_binlogs, stats_binlogs, num_rows), in row order. Nothing is left
        referenced or behind by a failure. Raises StorageError, LogError."""
        ...

    def write_many(
        self, writes: list[tuple[SegmentRef, CollectionSchema, RefBuffer]]
    ) -> list[list[dict[str, Any]]]:
        """`write_rows` of several segments at once (their parts run in parallel); returns
        each one's part bodies. A failure leaves nothing of any behind."""
        ...

    def stripped(self, pchannel: int, offset: int) -> bool:
        """Whether the record at that dml position reached the node with only its primary
        keys (its columns were checked complete where it was read)."""
        ...


def row_bytes(schema: CollectionSchema) -> int:
    """Returns an estimate of one row's buffered bytes (as InsertBuffer counts them)."""
    width = 16
    for f in schema.fields:
        if f.dtype is DataType.FLOAT_VECTOR:
            width += 4 * (f.dim or 0)
        elif f.dtype in (DataType.VARCHAR, DataType.JSON, DataType.ARRAY):
            width += 32
        else:
            width += 8
    return width
