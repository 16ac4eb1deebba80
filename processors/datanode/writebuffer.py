"""The data node's write buffer (as Milvus's writebuffer: insert_buffer, delta_buffer): per
segment, the rows and deletes consumed from dml that are not in binlogs yet, and the
primary-key index (pkindex.KeyIndex) they update.

Rows of a segment already in binlogs (a replay) are only indexed; a delete, or an insert of
a key that exists (an upsert), adds a delete record to the segment of the key's newest row,
unless it is in that segment's delta logs already.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectorlog.core.added_fields import absent_values
from vectorlog.core.model import CollectionSchema, FieldSchema
from vectorlog.processors.datanode.insertruns import decoded_run
from vectorlog.processors.datanode.pkindex import Entry, KeyIndex
from vectorlog.processors.datanode.service import RefBuffer, RowsRef, RowsWriter, row_bytes
from vectorlog.schemas.columns import decode_column, with_dynamic
from vectorlog.schemas.serde import Event
from vectorlog.storage.buffers import DeltaBuffer, InsertBuffer
from vectorlog.storage.segment_views import SegmentViews
from vectorlog.storage.writer import SegmentRef
from vectorlog.streams.msgstream import StreamPosition


class WriteBuffer:
    """What one data node holds of its segments until their binlogs are written: `buffers`
    (rows, or with a RowsWriter where they lie in the log), `deltas` and `refs`, by segment;
    `keys` is the primary-key index. `views` (the node's, read only) says what is written."""

    def __init__(self, views: SegmentViews, keys: KeyIndex, rows_writer: RowsWriter | None) -> None:
        """`rows_writer`: rows are buffered as log positions and written by it (service.py)."""
        self.views, self.keys, self.rows_writer = views, keys, rows_writer
        self.buffers: dict[int, InsertBuffer | RefBuffer] = {}
        self.deltas: dict[int, DeltaBuffer] = {}
        self.refs: dict[int, SegmentRef] = {}

    # -- rows ---------------------------------------------------------------------------------
    def insert(self, event: Event, schema: CollectionSchema, before: StreamPosition) -> None:
        """Buffers a RowsInserted event of a live collection (`before`: the position a replay
        starts from to bring it again). Raises ValueError if it lacks fields."""
        b = event.body
        sid, n = b["segment_id"], b["num_rows"]
        if self.written(sid, event.ts):
            self._replayed(event, schema, before)
            return
        if self.rows_writer is not None:
            self._insert_ref(event, schema, before)
            return
        columns = with_dynamic(schema, b["columns"], n)  # a left-out $meta: {} per row
        by_id = {c["field_id"]: decode_column(c["column"], n) for c in columns}
        missing = [f.name for f in schema.fields if f.field_id not in by_id]
        if missing:
            raise ValueError(f"RowsInserted lacks fields {missing}")
        ref = SegmentRef(b["collection_id"], b["partition_id"], sid, event.vchannel)
        self.refs.setdefault(sid, ref)
        pks = by_id[schema.primary.field_id]
        self.index(event, pks.tolist() if isinstance(pks, np.ndarray) else pks, sid, before)
        buf = self.buffers.get(sid)
        if not isinstance(buf, InsertBuffer):
            buf = self.buffers[sid] = InsertBuffer(before)
        buf.append(
            b["first_row_id"], event.ts, {f.field_id: by_id[f.field_id] for f in schema.fields}, n
        )

    def insert_run(
        self, events: list[Event], schema: CollectionSchema | None, before: StreamPosition
    ) -> bool:
        """Buffers consecutive RowsInserted events of one segment as one chunk (insertruns.py);
        returns False, having changed nothing, unless they are new rows (not a replay) of a
        live collection (`schema`; None: dropped) with keys never seen, on the local engine
        (each event is then applied on its own, as `insert` does)."""
        first = events[0]
        cid, sid = first.body["collection_id"], first.body["segment_id"]
        newest = self.keys.newest.get(first.vchannel)  # not loaded yet: `index` loads it
        if self.rows_writer is not None or schema is None or newest is None:
            return False
        if any(self.written(sid, e.ts) for e in events):
            return False
        run = decoded_run(events, schema)
        if run is None or not newest.keys().isdisjoint(run.keys()):
            return False
        ref = SegmentRef(cid, first.body["partition_id"], sid, first.vchannel)
        self.refs.setdefault(sid, ref)
        for event, pks in zip(events, run.pks, strict=True):
            self.keys.record(event, pks, None, (sid, event.ts))
            newest.update(dict.fromkeys(pks, (sid, event.ts)))
        buf = self.buffers.get(sid)
        if not isinstance(buf, InsertBuffer):
            buf = self.buffers[sid] = InsertBuffer(before)
        buf.append_rows(run.row_ids, run.timestamps, run.columns, run.n)
        return True

    def _insert_ref(self, event: Event, schema: CollectionSchema, before: StreamPosition) -> None:
        """`insert` with a RowsWriter: buffers where the rows lie, decoding only the keys."""
        assert self.rows_writer is not None
        b, pk_id = event.body, schema.primary.field_id
        sid, n, (p, offset) = b["segment_id"], b["num_rows"], event.source or (-1, -1)
        present = {c["field_id"] for c in with_dynamic(schema, b["columns"], n)}
        missing = [f.name for f in schema.fields if f.field_id not in present]
        if missing and not self.rows_writer.stripped(p, offset):
            raise ValueError(f"RowsInserted lacks fields {missing}")
        column = next(c["column"] for c in b["columns"] if c["field_id"] == pk_id)
        pks = decode_column(column, n)
        ref = SegmentRef(b["collection_id"], b["partition_id"], sid, event.vchannel)
        self.refs.setdefault(sid, ref)
        self.index(event, pks.tolist() if isinstance(pks, np.ndarray) else list(pks), sid, before)
        buf = self.buffers.get(sid)
        if not isinstance(buf, RefBuffer):
            buf = self.buffers[sid] = RefBuffer(before)
        rows = RowsRef(p, offset, event.ts, b["first_row_id"], n)
        buf.append(rows, row_bytes(schema))

    def _replayed(self, event: Event, schema: CollectionSchema, before: StreamPosition) -> None:
        """Replayed rows of a segment already in binlogs: only their keys are indexed, so the
        record may carry its primary keys alone (a rebuild's copy, vectorlog/jobs/rebuild.py).
        Raises ValueError if it lacks them."""
        b, pk_id = event.body, schema.primary.field_id
        column = next((c["column"] for c in b["columns"] if c["field_id"] == pk_id), None)
        if column is None:
            raise ValueError(f"RowsInserted lacks fields {[schema.primary.name]}")
        sid = b["segment_id"]
        self.refs.setdefault(
            sid, SegmentRef(b["collection_id"], b["partition_id"], sid, event.vchannel)
        )
        pks = decode_column(column, b["num_rows"])
        self.index(event, pks.tolist() if isinstance(pks, np.ndarray) else list(pks), sid, before)

    def index(self, event: Event, pks: list[Any], sid: int, before: StreamPosition) -> None:
        """Records each key's newest row (KeyIndex.index); a key that had an older row is an
        upsert: that row's segment gets a delete record at the event's ts."""
        for prev_sid, pk in self.keys.index(event, pks, sid):
            self._delete_in(prev_sid, pk, event.ts, before)

    # -- deletes ------------------------------------------------------------------------------
    def delete(self, event: Event, before: StreamPosition) -> None:
        """Buffers a RowsDeleted event of a live collection: each key's newest row older than
        the delete (in the event's partition, unless -1) gets a delete record."""
        b = event.body
        pks = decode_column(b["primary_keys"], b["num_rows"])
        newest = self.keys.of(event.vchannel)
        gone: list[Any] = []
        prevs: list[Entry | None] = []
        for pk in pks.tolist() if isinstance(pks, np.ndarray) else pks:
            prev = newest.get(pk)
            if prev is None or prev[1] >= event.ts:
                continue
            ref = self.refs.get(prev[0])
            view = self.views.by_id.get(prev[0])
            part = ref.partition_id if ref else (view.partition_id if view else -1)
            if b["partition_id"] not in (-1, part):
                continue
            self._delete_in(prev[0], pk, event.ts, before)
            gone.append(pk)
            prevs.append(newest.pop(pk))
        self.keys.record(event, gone, prevs)

    def _delete_in(self, sid: int, pk: Any, ts: int, before: StreamPosition) -> None:
        view = self.views.by_id.get(sid)
        if view is not None and ts <= view.written_tick:
            return  # already in its delta logs (a replay)
        buf = self.deltas.get(sid)
        if buf is None:
            buf = self.deltas[sid] = DeltaBuffer(before)
        buf.add(pk, ts)

    def written(self, sid: int, ts: int) -> bool:
        """Whether a row of segment `sid` at `ts` is in its binlogs already (a replay)."""
        view = self.views.by_id.get(sid)
        return view is not None and (view.flushed or ts <= view.written_tick)

    # -- collections and segments -------------------------------------------------------------
    def add_field(self, cid: int, field: FieldSchema) -> None:
        """Gives the rows buffered of collection `cid` a field added to it (its default value,
        else None)."""
        for sid, buf in self.buffers.items():
            ref = self.refs.get(sid)
            if isinstance(buf, InsertBuffer) and ref is not None and ref.collection_id == cid:
                buf.columns[field.field_id] = [absent_values(field, buf.num_rows)]

    def drop(self, cid: int) -> list[int]:
        """Forgets the rows and deletes buffered of a dropped collection. Returns the ids of
        its segments."""
        sids = [s for s, ref in self.refs.items() if ref.collection_id == cid]
        for sid in sids:
            self.forget(sid)
        return sids

    def forget(self, sid: int) -> None:
        """Forgets a segment's rows and deletes (written, or dropped)."""
        self.buffers.pop(sid, None)
        self.deltas.pop(sid, None)

    def pending(self) -> list[tuple[str, StreamPosition]]:
        """Returns (vchannel, start) of every segment's rows and deletes still only here: a
        replay from `start` brings them again ("" for a segment of unknown vchannel)."""
        pending = [(sid, b.start) for sid, b in self.buffers.items()]
        pending += [(sid, d.start) for sid, d in self.deltas.items()]
        return [(self._vchannel_of(sid), start) for sid, start in pending]

    def _vchannel_of(self, sid: int) -> str:
        ref, view = self.refs.get(sid), self.views.by_id.get(sid)
        return ref.vchannel if ref else (view.vchannel if view else "")
