"""The binlog side of a rebuild: rows and deletes read back from a segment's binlogs and
delta logs as the RowsInserted and RowsDeleted events that carried them, with their original
ts, row ids and segment, where the log no longer has (or never had) those events.

- A pchannel whose oldest records retention deleted: every truncated record is below the
  data node's checkpoint, so its rows and deletes are in binlogs, each stamped below `cut`,
  the first ts the log kept there (every kept record is at or above it). The rows and
  deletes stamped below the cut, then the kept records, are the pchannel's history.
- A bulk insert (SegmentImported): its rows, all stamped with its ts, replace its record, so
  the rebuilt cluster needs no binlog of the source (nor the import's own segments, which a
  compaction may have merged into another).
One job per binlog write (and one per segment's delta logs), a few Spark tasks per core
running them; pure over the object store, so it also runs in process. Their values go to
a Spool folder on the driver's disk.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from vectorlog.core.model import CollectionSchema, DataType
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.registry import NAMESPACE
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage import (
    CompactionSource,
    PyArrowObjectStore,
    SegmentsRows,
    read_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELETE, INSERT = 0, 1  # at one ts, a delete goes before an insert (an upsert's order)
TASKS_PER_CORE = 4  # Spark tasks per core, each running several jobs (binlog writes)


@dataclass(frozen=True)
class PrefixJob:
    """One segment whose rows stamped in [rows_from, rows_below) and deletes stamped below
    `deletes_below` are to be replayed, as the pchannel's prefix or in place of the record at
    `replaces` (a bulk insert's offset)."""

    segment: CompactionSource
    collection_id: int
    partition_id: int
    vchannel: str
    pchannel: int
    schema: dict[str, Any]  # CollectionSchema.to_avro()
    rows_below: int  # hybrid ts
    rows_from: int = 0
    deletes_below: int = 0
    replaces: int | None = None


@dataclass(frozen=True)
class PrefixEvent:
    """One synthesized dml record: where it goes and its place in ts order; its value, or
    (once in a Spool) where the spool holds it."""

    ts: int
    kind: int  # DELETE or INSERT
    pchannel: int
    vchannel: str
    value: bytes
    rows: int
    segment_id: int
    replaces: int | None = None  # the offset of the record it stands in for; None: prefix
    spooled: tuple[str, int, int] | None = None  # (file, offset, length) in the spool


class Spool:
    """The values of synthesized events in files of a temporary folder: a rebuild's read
    back from binlogs reach the size of the vectors, never all held in memory (nor passed
    through Spark's JVM, where tasks share the driver's disk)."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="vectorlog-rebuild-")
        self._files: dict[str, BinaryIO] = {}

    def add(self, event: PrefixEvent) -> PrefixEvent:
        """Returns `event` with its value moved into the spool (the driver's file)."""
        return spooled([event], self.folder, "driver")[0]

    def value(self, event: PrefixEvent) -> bytes:
        """Returns the value of an event (read from the spool if it is there)."""
        if event.spooled is None:
            return event.value
        path, at, n = event.spooled
        if path not in self._files:
            self._files[path] = open(path, "rb")  # noqa: SIM115 (closed by close())
        f = self._files[path]
        f.seek(at)
        return f.read(n)

    def close(self) -> None:
        """Deletes the spool."""
        for f in self._files.values():
            f.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def spooled(events: list[PrefixEvent], folder: str, name: str) -> list[PrefixEvent]:
    """Appends the values of `events` to file `name` of a spool folder; returns the events
    pointing at them."""
    out = []
    with open(os.path.join(folder, name), "ab") as f:
        for e in events:
            at = f.tell()
            f.write(e.value)
            out.append(replace(e, value=b"", spooled=(f.name, at, len(e.value))))
    return out


def prefix_events(
    session: SparkSession | None, storage_uri: str, jobs: list[PrefixJob], spool: Spool
) -> list[PrefixEvent]:
    """Returns the events of every job, spooled, in (pchannel, ts, deletes first) order;
    with no session, reads in this process. Tasks of a local master write the values into
    the spool themselves and return the rest; a cluster's tasks return them, fetched one
    task at a time. Raises what a task raised (CorruptBinlog, ObjectNotFound for a binlog
    the source's storage root lost)."""
    if not jobs:
        return []
    if session is None:
        found: Iterable[PrefixEvent] = (
            e for job in jobs for e in spool_events(storage_uri, None, (0, job))
        )
        events = [spool.add(e) for e in found]
    else:
        local = (session.sparkContext.master or "").startswith("local")
        run = partial(spool_events, storage_uri, spool.folder if local else None)
        sc = session.sparkContext
        tasks = min(len(jobs), TASKS_PER_CORE * sc.defaultParallelism)  # each runs a few jobs
        rdd = sc.parallelize(list(enumerate(jobs)), tasks).flatMap(run)
        events = rdd.collect() if local else [spool.add(e) for e in rdd.toLocalIterator()]
    return sorted(events, key=lambda e: (e.pchannel, e.ts, e.kind))


def spool_events(
    storage_uri: str, folder: str | None, numbered: tuple[int, PrefixJob]
) -> list[PrefixEvent]:
    """A task: the events of one job, their values written into spool `folder` if given."""
    i, job = numbered
    store = PyArrowObjectStore(storage_uri)
    schema = CollectionSchema.from_avro(job.schema)
    rows = read_rows((job.segment,), schema, store)
    events = list(segment_events(job, schema, rows, EventSerde()))
    return events if folder is None else spooled(events, folder, f"task-{i}")


def segment_events(
    job: PrefixJob, schema: CollectionSchema, rows: SegmentsRows, serde: EventSerde
) -> Iterator[PrefixEvent]:
    """Yields one RowsInserted per run of rows sharing a ts with consecutive row ids (what
    one insert wrote into the segment) and one RowsDeleted per delete ts, in the job's
    ranges."""
    order = np.lexsort((rows.row_ids, rows.ts))
    ts, ids = rows.ts[order], rows.row_ids[order]
    first = int(np.searchsorted(ts, job.rows_from))
    end = int(np.searchsorted(ts, job.rows_below))
    cuts = np.flatnonzero((np.diff(ts[first:end]) != 0) | (np.diff(ids[first:end]) != 1))
    bounds = [first, *(cuts + first + 1).tolist(), end] if end > first else []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        picked = order[lo:hi]
        yield _inserted(job, schema, serde, int(ts[lo]), int(ids[lo]), rows.columns, picked)
    yield from _deleted(job, schema, serde, rows)


def _inserted(
    job: PrefixJob,
    schema: CollectionSchema,
    serde: EventSerde,
    ts: int,
    first_row_id: int,
    columns: dict[int, Any],
    picked: np.ndarray,
) -> PrefixEvent:
    encoded = [
        {
            "field_id": f.field_id,
            "field_name": f.name,
            "column": _column(f.dtype, _take(columns[f.field_id], picked), f.dim),
        }
        for f in schema.fields
    ]
    body = {
        "collection_id": job.collection_id,
        "partition_id": job.partition_id,
        "segment_id": job.segment.segment_id,
        "num_rows": len(picked),
        "first_row_id": first_row_id,
        "columns": encoded,
    }
    event = Event("RowsInserted", ts, body, job.collection_id, job.vchannel)
    value = serde.encode(event)
    sid = job.segment.segment_id
    return PrefixEvent(
        ts, INSERT, job.pchannel, job.vchannel, value, len(picked), sid, job.replaces
    )


def _deleted(
    job: PrefixJob, schema: CollectionSchema, serde: EventSerde, rows: SegmentsRows
) -> Iterator[PrefixEvent]:
    by_ts: dict[int, list[Any]] = {}
    for pk, ts in zip(rows.delete_pks, rows.delete_ts.tolist(), strict=True):
        if ts < job.deletes_below:
            by_ts.setdefault(int(ts), []).append(pk)
    for ts, pks in sorted(by_ts.items()):
        body = {
            "collection_id": job.collection_id,
            "partition_id": job.partition_id,
            "num_rows": len(pks),
            "primary_keys": encode_column(schema.primary.dtype, pks),
        }
        event = Event("RowsDeleted", ts, body, job.collection_id, job.vchannel)
        value = serde.encode(event)
        sid = job.segment.segment_id
        yield PrefixEvent(
            ts, DELETE, job.pchannel, job.vchannel, value, len(pks), sid, job.replaces
        )


def _column(dtype: DataType, values: Any, dim: int | None) -> tuple[str, dict]:
    """Returns the Avro column of values as binlogs give them (JSON and ARRAY as JSON text,
    which the event carries as it is)."""
    if dtype in (DataType.JSON, DataType.ARRAY):
        return f"{NAMESPACE}.JsonColumn", {"values": list(values)}
    return encode_column(dtype, values, dim)


def _take(values: Any, idx: np.ndarray) -> Any:
    if isinstance(values, np.ndarray):
        return values[idx]
    return [values[i] for i in idx.tolist()]
