"""The one writer code path of both engines: a segment's buffers -> Milvus binlogs in the
object store -> the body of the BinlogPathsSaved event that references them.

Files are written before the event that references them; a file no event references is an
orphan of a crash and is deleted at recovery (see `DataNode.recover`). Log ids come from
rootcoord's id allocator, so they are never reused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vectorlog.core.model import ROW_ID_FIELD, TIMESTAMP_FIELD, CollectionSchema, DataType
from vectorlog.storage import paths
from vectorlog.storage.arrays import scalar_field_rows
from vectorlog.storage.binlog import (
    DataTypeCode,
    EventTypeCode,
    ddl_binlogs,
    delta_binlog,
    insert_binlog,
)
from vectorlog.storage.buffers import DeltaBuffer, InsertBuffer
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.storage.stats import compound_stats_log, pk_stats, stats_log

log = logging.getLogger(__name__)

MILVUS_TYPE = {
    DataType.BOOL: DataTypeCode.BOOL,
    DataType.INT8: DataTypeCode.INT8,
    DataType.INT16: DataTypeCode.INT16,
    DataType.INT32: DataTypeCode.INT32,
    DataType.INT64: DataTypeCode.INT64,
    DataType.FLOAT: DataTypeCode.FLOAT,
    DataType.DOUBLE: DataTypeCode.DOUBLE,
    DataType.VARCHAR: DataTypeCode.VARCHAR,
    DataType.JSON: DataTypeCode.JSON,  # the dynamic field $meta too
    DataType.ARRAY: DataTypeCode.ARRAY,
    DataType.FLOAT_VECTOR: DataTypeCode.FLOAT_VECTOR,
    DataType.SPARSE_FLOAT_VECTOR: DataTypeCode.SPARSE_FLOAT_VECTOR,
    DataType.FLOAT16_VECTOR: DataTypeCode.FLOAT16_VECTOR,
    DataType.BFLOAT16_VECTOR: DataTypeCode.BFLOAT16_VECTOR,
    DataType.BINARY_VECTOR: DataTypeCode.BINARY_VECTOR,
}


@dataclass(frozen=True)
class SegmentRef:
    """Where a segment lives: its ids and vchannel."""

    collection_id: int
    partition_id: int
    segment_id: int
    vchannel: str


class SegmentWriter:
    """Writes binlogs into `store`; `new_ids(n)` returns the first of n fresh log ids and
    `now()` the timestamp written into file headers."""

    def __init__(
        self, store: ObjectStore, new_ids: Callable[[int], int], now: Callable[[], int]
    ) -> None:
        self.store, self.new_ids, self.now = store, new_ids, now
        self._written: list[str] = []

    def write(
        self,
        ref: SegmentRef,
        schema: CollectionSchema,
        rows: InsertBuffer | None,
        deltas: DeltaBuffer | None,
        flushed: bool,
        earlier_stats: list[dict[str, Any]] | None = None,
        earlier_rows: int = 0,
    ) -> dict[str, Any]:
        """Writes the segment's buffered rows (insert logs and a stats log) and deletes (a delta
        log); with `flushed`, also the compound stats log of every write's stats (`earlier_stats`
        and this one's). Returns the BinlogPathsSaved body. Raises StorageError; nothing is
        left referenced by a failed write."""
        body: dict[str, Any] = {
            "segment_id": ref.segment_id,
            "collection_id": ref.collection_id,
            "partition_id": ref.partition_id,
            "vchannel": ref.vchannel,
            "field_binlogs": [],
            "delta_binlogs": [],
            "stats_binlogs": [],
            "ddl_binlogs": [],
            "num_rows": 0,
            "start_position": None,
            "end_position": None,
            "flushed": flushed,
        }
        self._written = []
        try:
            if rows is not None and rows.num_rows:
                earlier = (earlier_stats or [], earlier_rows) if flushed else None
                self._write_rows(ref, schema, rows, body, earlier)
            elif flushed and earlier_stats:  # every row was written before: only the compound
                now, pk = self.now(), schema.primary.field_id
                log = self._write_compound(ref, pk, earlier_stats, earlier_rows, (now, now))
                body["stats_binlogs"] = [{"field_id": pk, "binlogs": [log]}]
            if deltas is not None and len(deltas):
                body["delta_binlogs"] = [self._write_deltas(ref, schema, deltas)]
        except Exception:
            self._discard()
            raise
        return body

    def write_ddl(
        self, collection_id: int, events: list[tuple[int, EventTypeCode, str]]
    ) -> list[dict[str, Any]]:
        """Writes a collection's DDL binlogs (seed 002: `data_definition_log/{coll}/ts|ddl/`);
        returns their two Binlog records. Raises StorageError."""
        self._written = []
        try:
            ts_data, ddl_data = ddl_binlogs(
                collection_id=collection_id, events=events, write_ts=self.now()
            )
            first = self.new_ids(2)
            lo, hi, n = events[0][0], events[-1][0], len(events)
            return [
                self._put(paths.ddl_ts_path(collection_id, first), ts_data, first, n, lo, hi),
                self._put(
                    paths.ddl_ddl_path(collection_id, first + 1), ddl_data, first + 1, n, lo, hi
                ),
            ]
        except Exception:
            self._discard()
            raise

    def _discard(self) -> None:
        """Deletes what a failed write put (best effort: recovery deletes what is left)."""
        for path in self._written:
            try:
                self.store.delete(path)
            except Exception as exc:  # the store is failing: recovery cleans up
                log.warning("could not delete %s after a failed write: %s", path, exc)

    def _write_rows(
        self,
        ref: SegmentRef,
        schema: CollectionSchema,
        rows: InsertBuffer,
        body: dict[str, Any],
        earlier: tuple[list[dict[str, Any]], int] | None,
    ) -> None:
        row_ids, tss = rows.system()
        lo, hi = int(tss.min()), int(tss.max())
        columns: list[tuple[int, DataTypeCode, Any, int | None, bool]] = [
            (ROW_ID_FIELD, DataTypeCode.INT64, row_ids, None, False),
            (TIMESTAMP_FIELD, DataTypeCode.INT64, tss, None, False),
        ]
        for f in schema.fields:
            values = rows.column(f.field_id)
            if f.dtype is DataType.ARRAY:
                values = _array_rows(f.element_type, values)
            columns.append((f.field_id, MILVUS_TYPE[f.dtype], values, f.dim, f.nullable))
        first = self.new_ids(len(columns) + 1)
        for i, (fid, dtype, values, dim, nullable) in enumerate(columns):
            log = self.write_field(
                ref, fid, dtype, values, dim, first + i, (lo, hi), nullable=nullable
            )
            body["field_binlogs"].append({"field_id": fid, "binlogs": [log]})
        body["stats_binlogs"] = self._write_stats(
            ref, schema, rows, first + len(columns), (lo, hi), earlier
        )
        body["num_rows"] = rows.num_rows

    def write_field(
        self,
        ref: SegmentRef,
        field_id: int,
        dtype: DataTypeCode,
        values: Any,
        dim: int | None,
        log_id: int,
        span: tuple[int, int],
        nullable: bool = False,
    ) -> dict[str, Any]:
        """Writes one field's insert binlog (log `log_id`, rows stamped within `span`);
        returns its Binlog record. Raises StorageError."""
        lo, hi = span
        data = insert_binlog(
            collection_id=ref.collection_id,
            partition_id=ref.partition_id,
            segment_id=ref.segment_id,
            field_id=field_id,
            data_type=dtype,
            values=values,
            start_ts=lo,
            end_ts=hi,
            write_ts=self.now(),
            dim=dim,
            nullable=nullable,
        )
        path = paths.insert_log_path(
            ref.collection_id, ref.partition_id, ref.segment_id, field_id, log_id
        )
        return self._put(path, data, log_id, len(values), lo, hi)

    def _write_stats(
        self,
        ref: SegmentRef,
        schema: CollectionSchema,
        rows: InsertBuffer,
        log_id: int,
        span: tuple[int, int],
        earlier: tuple[list[dict[str, Any]], int] | None,
    ) -> list[dict[str, Any]]:
        """Writes this write's stats log and, if `earlier` (stats, rows) is given (the final
        write), the compound stats log of those stats and this one's."""
        pk = schema.primary
        pks = rows.column(pk.field_id)
        stats = pk_stats(pk.field_id, pks, MILVUS_TYPE[pk.dtype])
        path = paths.stats_log_path(
            ref.collection_id, ref.partition_id, ref.segment_id, pk.field_id, log_id
        )
        logs = [self._put(path, stats_log(stats), log_id, len(pks), *span)]
        if earlier is not None:
            every, rows_before = [*earlier[0], stats], earlier[1] + len(pks)
            logs.append(self._write_compound(ref, pk.field_id, every, rows_before, span))
        return [{"field_id": pk.field_id, "binlogs": logs}]

    def write_compound(
        self,
        ref: SegmentRef,
        field_id: int,
        stats: list[dict[str, Any]],
        rows: int,
        span: tuple[int, int],
    ) -> dict[str, Any]:
        """Writes a flushed segment's compound stats log of every write's `stats` (`rows` in
        all, stamped within `span`); returns its Binlog record. Raises StorageError."""
        self._written = []
        return self._write_compound(ref, field_id, stats, rows, span)

    def _write_compound(
        self,
        ref: SegmentRef,
        field_id: int,
        stats: list[dict[str, Any]],
        rows: int,
        span: tuple[int, int],
    ) -> dict[str, Any]:
        """Writes the compound stats log (`.../{pk field}/1`): every write's stats, in order."""
        ids = (ref.collection_id, ref.partition_id, ref.segment_id, field_id)
        return self._put(paths.compound_stats_path(*ids), compound_stats_log(stats), 1, rows, *span)

    def _write_deltas(
        self, ref: SegmentRef, schema: CollectionSchema, deltas: DeltaBuffer
    ) -> dict[str, Any]:
        log_id = self.new_ids(1)
        data = delta_binlog(
            collection_id=ref.collection_id,
            partition_id=ref.partition_id,
            segment_id=ref.segment_id,
            pks=deltas.pks,
            tss=deltas.tss,
            pk_type=MILVUS_TYPE[schema.primary.dtype],
            write_ts=self.now(),
        )
        path = paths.delta_log_path(ref.collection_id, ref.partition_id, ref.segment_id, log_id)
        return self._put(path, data, log_id, len(deltas), min(deltas.tss), max(deltas.tss))

    def _put(
        self, path: str, data: bytes, log_id: int, entries: int, lo: int, hi: int
    ) -> dict[str, Any]:
        self.store.put(path, data)
        self._written.append(path)
        return {
            "log_id": log_id,
            "path": path,
            "entries": entries,
            "timestamp_from": lo,
            "timestamp_to": hi,
            "size": len(data),
        }


def _array_rows(element: DataType | None, values: list[Any]) -> list[bytes | None]:
    """Returns an ARRAY column's rows as ScalarField bytes, None in a nullable one's nulls."""
    if all(v is not None for v in values):
        return list(scalar_field_rows(element, values))
    rows = iter(scalar_field_rows(element, [v for v in values if v is not None]))
    return [None if v is None else next(rows) for v in values]
