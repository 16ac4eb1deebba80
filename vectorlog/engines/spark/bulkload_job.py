"""Bulk insert's Spark job: one task per import unit (a Parquet row group, a JSON file, a NumPy
file group) reads it, splits its rows by shard and writes them as Flushed segments' binlogs
with the data node's writer. Nothing goes on the log here; the proxy commits the segments.

Every id a task uses comes from blocks the driver allocated from rootcoord before the job
(segment ids, row ids, log ids, auto_id keys), so tasks need no coordinator and may run on any
executor that reaches the storage root. Rows carry a placeholder timestamp: the commit writes
the timestamp field's binlog with the ts it stamps (`commit_ts_binlog`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.model import CollectionSchema, DataType
from vectorlog.processors.proxy.service import (
    ImportFileError,
    ImportUnit,
    all_paths,
    check_unique,
    delete_quietly,
    read_unit,
    split_rows,
    take,
)
from vectorlog.schemas.columns import decode_column, encode_column
from vectorlog.storage import (
    InsertBuffer,
    ObjectStore,
    PyArrowObjectStore,
    SegmentRef,
    SegmentWriter,
)
from vectorlog.streams.msgstream import StreamPosition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: segment ids a unit may use per shard beyond its rows' own need (rounding)
SEGMENT_SLACK = 1
#: log ids one segment's write takes: one per field, the system fields, its stats log
LOGS_PER_FIELD_SLACK = 3


@dataclass(frozen=True)
class ImportTarget:
    """What every task of one import needs (pickled to the executors)."""

    storage_uri: str
    collection_id: int
    partition_id: int
    schema: dict[str, Any]  # CollectionSchema.to_avro()
    vchannels: tuple[str, ...]
    max_rows: int  # rows per segment at most
    placeholder_ts: int


@dataclass(frozen=True)
class UnitTask:
    """One unit and the id blocks it may use."""

    unit: ImportUnit
    first_segment_id: int
    segment_ids: int
    first_row_id: int  # rows_bound ids
    first_log_id: int
    log_ids: int
    first_key: int = -1  # auto_id keys (rows_bound of them), else -1


def segments_needed(rows_bound: int, shards: int, max_rows: int) -> int:
    """Returns how many segment ids a unit of at most `rows_bound` rows may need."""
    return shards * (SEGMENT_SLACK + -(-rows_bound // max(1, max_rows)))


def logs_needed(schema: CollectionSchema, segments: int) -> int:
    """Returns how many log ids writing `segments` segments of `schema` takes."""
    return segments * (len(schema.fields) + LOGS_PER_FIELD_SLACK)


class _Block:
    """Hands out ids from [first, first + size); raises ImportFileError past its end."""

    def __init__(self, first: int, size: int, path: str, what: str) -> None:
        self.next, self.end, self.path, self.what = first, first + size, path, what

    def take(self, n: int = 1) -> int:
        if self.next + n > self.end:
            raise ImportFileError(self.path, f"needs more {self.what} than were reserved")
        first, self.next = self.next, self.next + n
        return first


def write_unit(
    target: ImportTarget, task: UnitTask, store: ObjectStore | None = None
) -> list[dict]:
    """Reads one unit and writes its rows as segments; returns one dict per segment:
    vchannel, segment_id, num_rows, field_binlogs, stats_binlogs (the ImportedSegment fields).
    A failure deletes what this task wrote. Raises ImportFileError naming the file."""
    schema = CollectionSchema.from_avro(target.schema)
    path = task.unit.paths[0]
    columns, n = read_unit(schema, task.unit)
    keys = _keys(schema, columns, n, task, path)
    by_id = _field_columns(schema, columns, n)
    store = store or PyArrowObjectStore(target.storage_uri)
    logs = _Block(task.first_log_id, task.log_ids, path, "log ids")
    writer = SegmentWriter(store, logs.take, lambda: target.placeholder_ts)
    segments = _Block(task.first_segment_id, task.segment_ids, path, "segment ids")
    out: list[dict] = []
    try:
        for shard, idx in split_rows(keys, len(target.vchannels)):
            for lo in range(0, len(idx), target.max_rows):
                part = idx[lo : lo + target.max_rows]
                ref = SegmentRef(
                    target.collection_id,
                    target.partition_id,
                    segments.take(),
                    target.vchannels[shard],
                )
                out.append(_write_segment(writer, ref, schema, by_id, part, task, target))
    except BaseException:
        delete_quietly(store, all_paths(out))
        raise
    return out


def _keys(
    schema: CollectionSchema, columns: dict[str, Any], n: int, task: UnitTask, path: str
) -> Any:
    """Returns the unit's primary keys: assigned from its block (auto_id) or checked unique."""
    pk = schema.primary
    if pk.auto_id:
        if n > task.unit.rows_bound:
            raise ImportFileError(
                path, f"holds {n} rows, more than the {task.unit.rows_bound} reserved"
            )
        keys = np.arange(task.first_key, task.first_key + n, dtype=np.int64)
        columns[pk.name] = keys if pk.dtype is DataType.INT64 else [str(k) for k in keys.tolist()]
    else:
        try:
            check_unique(pk, columns[pk.name])
        except SchemaMismatch as exc:
            raise ImportFileError(path, str(exc)) from None
    return columns[pk.name]


def _field_columns(schema: CollectionSchema, columns: dict[str, Any], n: int) -> dict[int, Any]:
    """Returns {field id: values} as the data node holds a RowsInserted's columns (the
    dynamic field `{}` per row where the file had no dynamic key)."""
    out = {}
    for f in schema.fields:
        values = columns.get(f.name)
        if values is None and f is schema.dynamic:
            values = [{}] * n
        out[f.field_id] = decode_column(encode_column(f.dtype, values, f.dim), n)
    return out


def _write_segment(
    writer: SegmentWriter,
    ref: SegmentRef,
    schema: CollectionSchema,
    by_id: dict[int, Any],
    part: np.ndarray,
    task: UnitTask,
    target: ImportTarget,
) -> dict:
    """Writes one segment's rows (flushed: with its compound stats log)."""
    rows = InsertBuffer(StreamPosition())
    first_row = task.first_row_id + int(part[0])  # row ids stay within the unit's block
    cols = {fid: take(values, part) for fid, values in by_id.items()}
    rows.append(first_row, target.placeholder_ts, cols, len(part))
    rows.row_ids[0] = task.first_row_id + part.astype(np.int64)
    body = writer.write(ref, schema, rows, None, True, [], 0)
    return {
        "vchannel": ref.vchannel,
        "segment_id": ref.segment_id,
        "num_rows": body["num_rows"],
        "field_binlogs": body["field_binlogs"],
        "stats_binlogs": body["stats_binlogs"],
    }


def run_units(
    session: SparkSession,
    target: ImportTarget,
    tasks: list[UnitTask],
    progress: Callable[[int, int], None] | None = None,
    workers: set[str] | None = None,
) -> list[dict]:
    """Runs one Spark task per unit; returns every written segment. `progress(done, total)`
    is called as units finish; `workers` gets the work folder of each task's executor (a
    standalone executor runs in its worker's). Raises the first task's error
    (ImportFileError for bad input) after the written files of every task that finished are
    deleted."""
    sc = session.sparkContext
    rdd = sc.parallelize(list(enumerate(tasks)), max(1, len(tasks)))
    written = rdd.map(lambda it: (it[0], _run_one(target, it[1]), os.getcwd()))
    results: dict[int, Any] = {}
    for i, outcome, folder in written.toLocalIterator(prefetchPartitions=True):
        results[i] = outcome
        if workers is not None:
            workers.add(folder)
        if progress is not None:
            progress(len(results), len(tasks))
    failed = [o for o in results.values() if isinstance(o, BaseException)]
    segments = [s for o in results.values() if not isinstance(o, BaseException) for s in o]
    if failed:
        delete_quietly(PyArrowObjectStore(target.storage_uri), all_paths(segments))
        raise failed[0]
    return segments


def _run_one(target: ImportTarget, task: UnitTask) -> list[dict] | BaseException:
    """A task's body: its segments, or the error it raised (returned, so the driver gets the
    error itself, not Spark's wrapper of it, and still learns what the others wrote)."""
    try:
        return write_unit(target, task)
    except Exception as exc:
        return exc
