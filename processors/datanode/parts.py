"""The rows a data node writes through a RowsWriter (service.py) in parts: several segments'
parts written together, a segment's parts completed into its BinlogPathsSaved body (their
insert and stats logs folded in, with its delta log and compound stats log), and their files
deleted after a failed write."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from vectorlog.core.model import CollectionSchema
from vectorlog.processors.datanode.service import RefBuffer, RowsWriter
from vectorlog.storage.buffers import DeltaBuffer, InsertBuffer
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.storage.segment_views import SegmentView
from vectorlog.storage.writer import SegmentRef, SegmentWriter

log = logging.getLogger(__name__)


def stats_logs(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the stats logs of every part, in order."""
    return [log for part in parts for f in part["stats_binlogs"] for log in f["binlogs"]]


def time_span(parts: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Returns the (first, last) ts of the parts' stats logs; None without any."""
    logs = stats_logs(parts)
    if not logs:
        return None
    return min(x["timestamp_from"] for x in logs), max(x["timestamp_to"] for x in logs)


def discard(objects: ObjectStore, parts: list[dict[str, Any]]) -> None:
    """Deletes the files of written parts (best effort: recovery deletes what is left)."""
    for part in parts:
        for kind in ("field_binlogs", "stats_binlogs"):
            for f in part.get(kind, []):
                for x in f["binlogs"]:
                    try:
                        objects.delete(x["path"])
                    except Exception as exc:
                        log.warning("could not delete %s after a failed write: %s", x["path"], exc)


def merged(body: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Folds the parts' insert and stats logs into `body`, one entry per field, in order."""
    for kind in ("field_binlogs", "stats_binlogs"):
        by_field: dict[int, list[dict[str, Any]]] = {}
        for part in parts:
            for f in part.get(kind, []):
                by_field.setdefault(f["field_id"], []).extend(f["binlogs"])
        body[kind] = [{"field_id": fid, "binlogs": logs} for fid, logs in by_field.items()]
    body["num_rows"] = sum(part.get("num_rows", 0) for part in parts)
    return body


class RemoteWrites:
    """Writes segments whose rows a RowsWriter writes (the rows buffered as log positions),
    with the node's segment writer, object store and clock (rootcoord's `now`)."""

    def __init__(
        self,
        rows_writer: RowsWriter,
        writer: SegmentWriter,
        objects: ObjectStore,
        now: Callable[[], int],
    ) -> None:
        self.rows_writer, self.writer, self.objects, self.now = rows_writer, writer, objects, now

    def write_together(
        self,
        due: list[tuple[SegmentView, bool]],
        buffers: dict[int, InsertBuffer | RefBuffer],
        refs: dict[int, SegmentRef],
        schemas: dict[int, CollectionSchema],
    ) -> dict[int, list[dict[str, Any]]]:
        """Returns, per segment of `due` with buffered rows as positions, the part bodies
        the RowsWriter wrote in one go (nothing for a single segment: `write` does it)."""
        writes: list[tuple[SegmentRef, CollectionSchema, RefBuffer]] = []
        for seg, _ in due:
            rows, ref = buffers.get(seg.segment_id), refs.get(seg.segment_id)
            schema = schemas.get(ref.collection_id) if ref is not None else None
            if isinstance(rows, RefBuffer) and rows.num_rows and ref and schema is not None:
                writes.append((ref, schema, rows))
        if len(writes) < 2:
            return {}
        bodies = self.rows_writer.write_many(writes)
        return {ref.segment_id: parts for (ref, _, _), parts in zip(writes, bodies, strict=True)}

    def write(
        self,
        ref: SegmentRef,
        schema: CollectionSchema,
        rows: RefBuffer,
        deltas: DeltaBuffer | None,
        flushed: bool,
        earlier: list[dict[str, Any]],
        rows_before: int,
        parts: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """`SegmentWriter.write` with the rows written by the RowsWriter: its parts' insert and
        stats logs, then here the delta log and (flushed) the compound stats log of every
        write. A failure deletes what the parts wrote. Returns the BinlogPathsSaved body."""
        if parts is None:
            parts = self.rows_writer.write_rows(ref, schema, rows) if rows.num_rows else []
        try:
            stats = [json.loads(self.objects.get(log["path"])) for log in stats_logs(parts)]
            body = self.writer.write(ref, schema, None, deltas, False)
            if flushed and (stats or earlier):
                pk = schema.primary.field_id
                span = time_span(parts) or (self.now(), self.now())
                every, n = [*earlier, *stats], rows_before + rows.num_rows
                compound = self.writer.write_compound(ref, pk, every, n, span)
                parts.append({"stats_binlogs": [{"field_id": pk, "binlogs": [compound]}]})
        except Exception:
            discard(self.objects, parts)
            raise
        body["flushed"] = flushed
        return merged(body, parts)
