"""The data node (seeds 002-004), local engine: consumes the dml topic tick-aligned, buffers rows
and deletes per segment, and writes a segment's binlogs once datacoord started its flush.

Exactly once, in this order (a crash between any two steps loses and repeats nothing):
1. binlog files are written to the object store (a file no event references is an orphan and
   is deleted at the next recovery; log ids are never reused);
2. `BinlogPathsSaved` is appended to coord: from here on the segment counts as written, and
   replayed rows of a written segment are skipped;
3. the node's checkpoint (per pchannel, the position of the oldest row or delete still only in
   memory) and its primary-key index are committed in one StateStore write;
4. the checkpoint is published on coord (`ChannelCheckpointed`, soon after a write, else at
   most every CHECKPOINT_PUBLISH_S): a query node loads the binlogs and replays dml from it.
At start it reads the coord topic to learn every segment's state, and replays dml from the
checkpoint; rows of segments already written are not buffered again, and a delete already in a
segment's delta logs is not written again.

Deletes and upserts (writebuffer.py): a delete at ts d hides rows of its key inserted before d
(strictly), so the node keeps, per vchannel, each key's newest row (segment, ts; pkindex.py); a
delete, or an insert of a key that exists (an upsert), adds a delete record to that row's segment.

Bulk inserts (SegmentImported) and compactions (SegmentsCompacted) arrive on dml in ts order
too: their segments are in binlogs already; the node indexes their keys (a compaction points
the merged segments' keys at the new one and moves their pending deletes to it) and records
the segment Flushed on coord, once.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from vectorlog.core.added_fields import with_field
from vectorlog.core.faults import CrashPointReached, crash_point, pause_point
from vectorlog.core.hybridts import physical_ms
from vectorlog.core.model import CollectionSchema, FieldSchema
from vectorlog.processors.datanode.checkpoints import (
    CHECKPOINT_PUBLISH_S,
    checkpointed,
    not_behind,
    oldest_pending,
    read_checkpoints,
    retention_floor,
    stage_checkpoint,
)
from vectorlog.processors.datanode.compaction import Retired, carry_deltas, delete_retired, repoint
from vectorlog.processors.datanode.ddl import DDL_CODES, ddl_request
from vectorlog.processors.datanode.imported import imported_keys, saved_body
from vectorlog.processors.datanode.insertruns import insert_groups
from vectorlog.processors.datanode.orphans import delete_orphans
from vectorlog.processors.datanode.parts import RemoteWrites, discard
from vectorlog.processors.datanode.pkindex import ENTRY as ENTRY
from vectorlog.processors.datanode.pkindex import Change as Change
from vectorlog.processors.datanode.pkindex import Entry as Entry
from vectorlog.processors.datanode.pkindex import KeyIndex
from vectorlog.processors.datanode.pkindex import pk_key as pk_key
from vectorlog.processors.datanode.pkindex import pk_keys as pk_keys
from vectorlog.processors.datanode.reports import TickReports
from vectorlog.processors.datanode.service import RefBuffer, RowsWriter
from vectorlog.processors.datanode.takeover import Owned, rebuild_index
from vectorlog.processors.datanode.writebuffer import WriteBuffer
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.runtime.events import EventApplier
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import tick_aligned
from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore
from vectorlog.state.errors import StateError
from vectorlog.storage.binlog import EventTypeCode
from vectorlog.storage.buffers import DdlBuffer, DeltaBuffer, InsertBuffer
from vectorlog.storage.channel_fence import writer_body
from vectorlog.storage.errors import InvalidObjectPath, StorageError
from vectorlog.storage.merge import check_compactable, compacted_body
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.storage.segment_views import SegmentView, SegmentViews
from vectorlog.storage.writer import SegmentRef, SegmentWriter
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.log.lease_fence import seeded
from vectorlog.streams.msgstream import DEFAULT_MAX_SKEW_MS, MsgPack, StreamPosition, TickPolicy
from vectorlog.streams.snapshots import FenceMemo, fence_at, read_from
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger(__name__)
#: failures that say nothing about the event being applied: retried, never dead-lettered
NOT_THE_EVENTS_FAULT = (StateError, LogError, StorageError, OSError, MemoryError, CrashPointReached)

COLLECTION_PREFIX = b"collection/"
#: deletes aimed at written segments reach their delta logs this fast
DELTA_SYNC_S = 1.0
#: how often the loop commits a moved checkpoint (and publishes it when due)
CHECKPOINT_EVERY_S = 0.5
#: the longest a round waits for dml: coord, read without waiting, is seen at the next round
#: (this late at most while no dml comes; idle, a time tick comes about every 0.3 s); at
#: 50 ms each pchannel's loop woke the process 20 times a second (issue 24)
ROUND_WAIT_S = 0.25
#: ... but within BUSY_FOR_S of the last rows or deletes a round waits only BUSY_WAIT_S: a
#: flush asked for right after writes (its seal comes on coord) is not held back by idle
#: rounds (an embedded flush took 0.24 s instead of 0.1 with 0.25 s rounds)
BUSY_WAIT_S, BUSY_FOR_S = 0.05, 10.0
#: a segment's buffered rows are written once they pass this (Milvus insertBufSize: 16 MB)
DEFAULT_BUFFER_BYTES = 16 << 20


class DataNode(ProcessorBase):
    """Writes the binlogs of every segment of the dml topic (the local engine)."""

    def __init__(
        self,
        log: Log,
        topics: Topics,
        serdes: Serdes,
        state: StateStore,
        objects: ObjectStore,
        rootcoord: RootCoordService,
        name: str = "datanode",
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        dml_log: Log | None = None,
        max_clock_skew_ms: int = DEFAULT_MAX_SKEW_MS,
        ticks: TickPolicy | None = None,
        rows_writer: RowsWriter | None = None,
        owned: Owned | None = None,
    ) -> None:
        """`dml_log` is where the dml topic is read from: `log` itself (the local engine), or
        a Log whose reader is fed by another engine (the Spark job of vectorlog/engines/spark/). An
        event more than `max_clock_skew_ms` ahead of rootcoord's clock is dead-lettered.
        `ticks`: how the dml writers' ticks are folded (several writers: TickPolicy(warm_up)).
        `rows_writer`: rows are buffered as log positions and written by it (service.py).
        `owned`: one of several data nodes (module docstring), writing these pchannels."""
        self.rows_writer = rows_writer
        self.owned = owned
        self.registration = None if owned is None else owned.writer
        self._ticks = ticks
        self.log, self.topics, self.state, self.objects = log, topics, state, objects
        self.dml_log = dml_log if dml_log is not None else log
        self.rc = rootcoord
        self.buffer_bytes, self.max_clock_skew_ms = buffer_bytes, max_clock_skew_ms
        self.dml_serde = serdes.for_topic(topics.dml)
        self.coord_serde = serdes.for_topic(topics.coord)
        self.writer = SegmentWriter(objects, rootcoord.allocate_ids, rootcoord.now)
        self._remote = (
            None
            if rows_writer is None
            else RemoteWrites(rows_writer, self.writer, objects, rootcoord.now)
        )
        self._dead_letter = DeadLetterWriter(log, topics.dlq, name)
        self.views = SegmentViews()
        self.schemas: dict[int, CollectionSchema] = {}
        self.dropped: set[int] = set()
        self.keys = KeyIndex(state)
        self.buffer = WriteBuffer(self.views, self.keys, rows_writer)
        self._written_at = -BUSY_FOR_S  # monotonic time of the last pack with events
        self.ddl: dict[int, DdlBuffer] = {}  # collection -> DDL not yet in its DDL binlogs
        self.pchannel_of: dict[str, int] = {}
        #: (pchannel, offset, paths): files of segments a compaction at that dml position
        #: merged, deleted once the committed checkpoint is past it (no replay reads them)
        self._retired: list[Retired] = []
        self.positions: dict[int, StreamPosition] = {}
        self._coord_next = 0  # the next coord offset to read
        #: coord records the last recover read: coord's newest snapshot, then the records after
        #: it (never the whole topic from offset 0)
        self.recovered_coord_records = 0
        self._coord_checkpoints: dict[int, StreamPosition] = {}  # the last admitted ones
        self.ticks: dict[int, int] = {}
        self._reports = TickReports(
            log, topics.coord, self.coord_serde, self.views, self.buffers, self.refs, self.tick_of
        )
        self._committed: dict[int, StreamPosition] = {}
        self._published: dict[int, StreamPosition] = {}
        #: the newest checkpoint coord holds per pchannel (a rebuilt cluster's, before this
        #: node replayed up to it): never published back over
        self._on_coord: dict[int, StreamPosition] = {}
        self._published_at = 0.0  # time.monotonic() of the last publication
        self._wrote = False  # a binlog write since the last publication
        self.name = name
        self._loop = ProcessorLoop(self, tick_s=CHECKPOINT_EVERY_S, join_timeout_s=30)
        self._stop = self._loop.stopping
        self._applier = EventApplier(
            topics.dml,
            self.dml_serde,
            self._dead_letter,
            self._stop,
            transient=NOT_THE_EVENTS_FAULT,
            events_fault=(InvalidObjectPath,),
            on_failure=self._failed,
        )

    @property
    def buffers(self) -> dict[int, InsertBuffer | RefBuffer]:
        """Returns the rows buffered, by segment (the write buffer's)."""
        return self.buffer.buffers

    @property
    def deltas(self) -> dict[int, DeltaBuffer]:
        """Returns the deletes buffered, by segment (the write buffer's)."""
        return self.buffer.deltas

    @property
    def refs(self) -> dict[int, SegmentRef]:
        """Returns the segments buffered rows or deletes were for (the write buffer's)."""
        return self.buffer.refs

    @property
    def newest(self) -> dict[str, dict[Any, Entry]]:
        """Returns the primary-key index loaded, per vchannel (KeyIndex.newest)."""
        return self.keys.newest

    # -- lifecycle ------------------------------------------------------------------------
    def recover(self, timeout: float = 60.0) -> None:
        """Loads the checkpoint, learns every segment from coord, deletes orphaned files."""
        if self.owned is None:
            self._load_state()
        else:
            self._seed_collections()
        coord_end, self.recovered_coord_records, memo = 0, 0, FenceMemo()
        coord = self.topics.coord
        for rec in read_from(self.log, coord, self.objects, 0, timeout, memo):
            coord_end = rec.offset + 1
            self.recovered_coord_records += 1
            self._coord_record(rec)
        # the reader goes on with the lease fence there (lease_fence): the read's own
        fence = fence_at(self.log, coord, self.objects, coord_end, timeout, memo.get(coord))
        self._coord_reader = seeded(self.log.reader(coord, {0: coord_end}), fence)
        delete_orphans(self.objects, self.views, self.owned, self.pchannel_of)
        if self.owned is not None:
            self.positions = dict(self._coord_checkpoints)
            self._rebuild_index()
        start = {p: self.positions.get(p, StreamPosition()) for p in self.pchannels}
        self.positions = dict(start)
        self._committed = dict(start)
        self._stream = tick_aligned(
            self.dml_log,
            self.topics.dml,
            start,
            self.dml_serde,
            self._dead_letter,
            self.rc.now,
            self.max_clock_skew_ms,
            self.log,  # a resumed batch is read back from the log itself, not the Spark feed
            ticks=self._ticks,
        )

    def start(self) -> None:
        """Starts consuming on the shared loop (after `recover`)."""
        self._loop.start()

    def stop_soon(self) -> None:
        """Asks the consumer to end after the round in hand, without waiting (`stop` still
        publishes the final checkpoint)."""
        self._loop.stop_soon()

    def stop(self) -> None:
        """Stops consuming, then publishes the final checkpoint (best effort: a failure is
        logged; the last one published stays valid, it only means a longer replay)."""
        started = self._loop.started
        if self._loop.stop() and started:
            self._publish_final()

    def _publish_final(self) -> None:
        try:
            self.publish(force=True)
        except Exception as exc:
            log.warning("data node could not publish its final checkpoint: %s", exc)

    def close(self) -> None:
        self.stop()
        self._stream.close()
        self._coord_reader.close()

    def _load_state(self) -> None:
        for key, raw in self.state.items(COLLECTION_PREFIX):
            cid = int.from_bytes(key[len(COLLECTION_PREFIX) :], "big", signed=True)
            d = json.loads(raw)
            if d.get("dropped"):
                self.dropped.add(cid)
            else:
                self.schemas[cid] = CollectionSchema.from_avro(d["schema"])
        self.positions.update(read_checkpoints(self.state))

    def _seed_collections(self) -> None:
        """Takes the collections from rootcoord's meta (a takeover starts with an empty
        state store, and its replay may not bring their CollectionCreated again)."""
        assert self.owned is not None
        for h in self.owned.histories():
            if h.dropped_ts is None:
                self.schemas[h.collection_id] = h.schema
            else:
                self.dropped.add(h.collection_id)

    def _rebuild_index(self) -> None:
        """Reads the primary-key index of its pchannels back from binlogs (takeover.py)."""
        assert self.owned is not None
        mine = [
            v
            for v in self.views.by_id.values()
            if self.pchannel_of.get(v.vchannel) in self.owned.pchannels
        ]
        self.newest.update(rebuild_index(self.objects, mine, self.schemas))
        keys = sum(map(len, self.newest.values()))
        log.info("data node %s: index of %d keys read back from binlogs", self.name, keys)

    # -- the loop ------------------------------------------------------------------------
    def step(self, timeout: float | None = None) -> bool:
        """One round: new coord events, new dml packs (waiting up to `timeout`; None:
        `round_wait_s()`), tick reports, ready flushes. Returns whether a dml pack came."""
        for rec in self._coord_reader.poll(1000, 0):
            self._coord_record(rec)
        packs = self._stream.consume(timeout=self.round_wait_s() if timeout is None else timeout)
        for pack in packs:
            if pack.events:
                self._written_at = time.monotonic()
            self.apply(pack)
        self._write_full_buffers()
        self._reports.report_ticks()
        self._reports.report_rows()
        self._flush_ready()
        self._sync_deltas()
        return bool(packs)

    def round_wait_s(self) -> float:
        """Returns how long a round waits for dml: BUSY_WAIT_S within BUSY_FOR_S of the last
        pack that carried events, else ROUND_WAIT_S."""
        recent = time.monotonic() - self._written_at < BUSY_FOR_S
        return BUSY_WAIT_S if recent else ROUND_WAIT_S

    def tick(self) -> None:
        """Commits the checkpoint if it moved, and publishes it when due."""
        self.checkpoint()
        self.publish()

    def _coord_record(self, rec: Record) -> None:
        self._coord_next = rec.offset + 1
        try:
            event = self.coord_serde.decode(rec.value)
        except Exception as exc:  # datacoord dead-letters coord records; skip it here
            log.debug("data node skips coord record %s: %s", rec.offset, exc)
            return
        admitted = self.views.apply(event)  # None: a fenced writer's (storage.channel_fence)
        if admitted is not None and admitted.type == "ChannelCheckpointed":
            for p in admitted.body["positions"]:
                pos = StreamPosition(p["offset"], p["tick"], p["tick_offset"])
                self._coord_checkpoints[p["pchannel"]] = pos
                self._on_coord[p["pchannel"]] = pos
        if event.type == "SegmentOpened":  # a vchannel's pchannel, also for replays past its rows
            self.pchannel_of.setdefault(event.body["vchannel"], event.body["pchannel"])

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Returns {(topic, partition): next offset}: per dml pchannel the first offset not
        applied (after its last pack; the stored checkpoint may be older), and coord's."""
        out = {(self.topics.dml, p): pos.offset for p, pos in list(self.positions.items())}
        out[(self.topics.coord, 0)] = self._coord_next
        return out

    # -- applying dml ----------------------------------------------------------------------
    def apply(self, pack: MsgPack) -> None:
        """Applies one pack in ts order, then advances that pchannel's position and tick: only
        once every event was applied or dead-lettered (a failed dead letter is retried).

        Raises DeadLetterAbandoned if the node stops first (the position stays behind)."""
        before = self.positions.get(pack.partition, StreamPosition())
        for group in insert_groups(pack.events):
            if len(group) > 1 and self._inserted_run(group, pack.partition, before):
                continue
            for event in group:
                self._applier.apply(event, lambda e: self._apply_event(e, pack.partition, before))
        self.positions[pack.partition] = pack.position
        self.ticks[pack.partition] = pack.end_ts

    def _apply_event(self, event: Event, pchannel: int, before: StreamPosition) -> None:
        if event.vchannel:
            self.pchannel_of[event.vchannel] = pchannel
        if event.type in DDL_CODES:
            self._ddl_event(event, pchannel, before)
        if event.type == "CollectionCreated":
            self._created(event)
        elif event.type == "CollectionDropped":
            self._dropped(event.body["collection_id"])
        elif event.type == "CollectionFieldAdded":
            self._field_added(event)
        elif event.type == "RowsInserted":
            self._inserted(event, before)
        elif event.type == "RowsDeleted":
            self._deleted(event, before)
        elif event.type == "SegmentImported":
            self._imported(event, before)
        elif event.type == "SegmentsCompacted":
            self._compacted(event, before)

    def _failed(self, exc: Exception) -> None:
        self.failure = exc

    def _ddl_event(self, event: Event, pchannel: int, before: StreamPosition) -> None:
        """Buffers a broadcast DDL event for the collection's DDL binlogs (seed 002)."""
        cid = event.body["collection_id"]
        if cid in self.dropped or event.ts <= self.views.ddl_ts.get(cid, 0):
            return  # dropped, or already in its DDL binlogs (a replay)
        buf = self.ddl.get(cid)
        if buf is None:
            buf = self.ddl[cid] = DdlBuffer(before, pchannel)
        buf.add(event.ts, DDL_CODES[event.type], ddl_request(event))

    def _created(self, event: Event) -> None:
        cid = event.body["collection_id"]
        if cid in self.schemas or cid in self.dropped:
            return
        self.schemas[cid] = CollectionSchema.from_avro(event.body["schema"])
        with self.state.transaction() as txn:
            txn.put(_collection_key(cid), json.dumps({"schema": event.body["schema"]}).encode())

    def _field_added(self, event: Event) -> None:
        """Learns a field added to a collection (once; every vchannel brings a copy): the
        rows buffered take its default value, else None, and every binlog written from
        here on has its column (Flushed segments' older binlogs lack it; readers fill it)."""
        cid = event.body["collection_id"]
        schema = self.schemas.get(cid)
        if schema is None:
            return  # dropped (or never known: its events are dead-lettered)
        field = FieldSchema.from_avro(event.body["field"])
        grown = with_field(schema, field)
        if grown is schema:
            return
        self.schemas[cid] = grown
        self.buffer.add_field(cid, field)
        with self.state.transaction() as txn:
            txn.put(_collection_key(cid), json.dumps({"schema": grown.to_avro()}).encode())

    def _dropped(self, cid: int) -> None:
        if cid in self.dropped:
            return
        self.dropped.add(cid)
        self.schemas.pop(cid, None)
        for sid in self.buffer.drop(cid):
            self._reports.forget(sid)
        self.ddl.pop(cid, None)
        with self.state.transaction() as txn:
            txn.put(_collection_key(cid), b'{"dropped":true}')

    def _schema(self, cid: int) -> CollectionSchema | None:
        """Returns the schema of a live collection; None if dropped. Raises KeyError."""
        if cid in self.dropped:
            return None
        if cid not in self.schemas:
            raise KeyError(f"collection {cid} is unknown to the data node")
        return self.schemas[cid]

    def _inserted(self, event: Event, before: StreamPosition) -> None:
        schema = self._schema(event.body["collection_id"])
        if schema is not None:
            self.buffer.insert(event, schema, before)

    def _inserted_run(self, events: list[Event], pchannel: int, before: StreamPosition) -> bool:
        """Buffers consecutive RowsInserted events of one segment as one chunk, if it may
        (WriteBuffer.insert_run). Returns whether it did."""
        cid = events[0].body["collection_id"]
        schema = None if cid in self.dropped else self.schemas.get(cid)
        if not self.buffer.insert_run(events, schema, before):
            return False
        self.pchannel_of[events[0].vchannel] = pchannel
        return True

    def _deleted(self, event: Event, before: StreamPosition) -> None:
        if self._schema(event.body["collection_id"]) is not None:
            self.buffer.delete(event, before)

    def _imported(self, event: Event, before: StreamPosition) -> None:
        """Records a bulk insert's segments (already in binlogs): their keys supersede older
        rows, as an insert's do (also on a replay: the key index may not have been committed),
        and each becomes a Flushed segment through a BinlogPathsSaved on coord (once)."""
        b = event.body
        schema = self._schema(b["collection_id"])
        if schema is None:
            return
        for seg in b["segments"]:
            sid = seg["segment_id"]
            self.buffer.index(event, imported_keys(self.objects, schema, seg), sid, before)
            view = self.views.by_id.get(sid)
            if view is not None and view.flushed:
                continue  # a replay
            ref = SegmentRef(b["collection_id"], b["partition_id"], sid, event.vchannel)
            self._save(ref, saved_body(event, seg, self._end(ref)))

    def _compacted(self, event: Event, before: StreamPosition) -> None:
        """Swaps a compaction's segments (vectorlog/storage/merge.py): keys of the
        merged segments point at the new one from here on, their deletes the job did not
        read move to it, and (once) the new segment is recorded Flushed on coord with the
        merged ones Dropped. Raises ValueError (dead-lettered) if they are not all Flushed."""
        b = event.body
        if self._schema(b["collection_id"]) is None:
            return
        new, olds = b["segment"]["segment_id"], set(b["compacted_from"])
        view = self.views.by_id.get(new)
        first = view is None or not view.flushed
        if first:
            check_compactable(self.views, b, event.vchannel)
        self._repoint(event, olds, new)
        consumed = set(b["consumed_deltas"])
        carry_deltas(
            self.deltas, self.views, self.objects, olds, new, consumed, before, replay=not first
        )
        p, offset = event.source or (-1, -1)
        paths = sorted(path for sid in olds for path in self.views.get(sid).paths)
        self._retired.append((p, offset, paths))
        if first:
            ref = SegmentRef(b["collection_id"], b["partition_id"], new, event.vchannel)
            self._save(ref, compacted_body(event, self._end(ref)))

    def _repoint(self, event: Event, olds: set[int], new: int) -> None:
        """Points every key whose newest row is in `olds` at segment `new` (same ts)."""
        moved, prevs = repoint(self.keys.of(event.vchannel), olds, new)
        self.keys.record(event, moved, prevs)

    # -- reports and flushes ---------------------------------------------------------------
    def tick_of(self, vchannel: str) -> int:
        p = self.pchannel_of.get(vchannel)
        return self.ticks.get(p, 0) if p is not None else 0

    def _flush_ready(self) -> None:
        """Writes every segment whose flush datacoord started, once consumed past its seal."""
        due = []
        for seg in [self.views.by_id[sid] for sid in self.views.pending]:
            ready = seg.flush_started and not seg.flushed and seg.seal_ts is not None
            if ready and self.tick_of(seg.vchannel) >= (seg.seal_ts or 0):
                due.append((seg, True))
        self._write_all(due)

    def _write_full_buffers(self) -> None:
        """Writes the rows of every segment whose buffer passed the size limit, without
        waiting for the segment to be sealed (seed 004 "DataNode Flush")."""
        due = []
        for sid, buf in list(self.buffers.items()):
            if buf.nbytes >= self.buffer_bytes:
                ref = self.refs[sid]
                due.append((self.views.get(sid) if sid in self.views.by_id else _view(ref), False))
        self._write_all(due)

    def _write_all(self, due: list[tuple[SegmentView, bool]]) -> None:
        """Writes segments (each with whether it is flushed) in order. With a RowsWriter and
        several segments, their rows are written first, all at once (the executors write
        the parts in parallel), then each segment is committed as `_write` does; parts not
        committed after a failure are deleted."""
        written: dict[int, list[dict[str, Any]]] = {}
        if self._remote is not None:
            written = self._remote.write_together(due, self.buffers, self.refs, self.schemas)
        try:
            for seg, flushed in due:
                self._write(seg, flushed, written.pop(seg.segment_id, None))
        except BaseException:
            for parts in written.values():
                discard(self.objects, parts)
            raise

    def _sync_deltas(self) -> None:
        """Writes the deletes aimed at segments already in binlogs, once they are a second old
        (rootcoord's clock is asked only when some delete is buffered: in cluster mode it is
        an RPC, and this runs every round of every pchannel's loop)."""
        if not self.deltas:
            return
        now = physical_ms(self.rc.now())
        for sid, buf in list(self.deltas.items()):
            view = self.views.by_id.get(sid)
            if (
                view is not None
                and view.flushed
                and now - physical_ms(min(buf.tss)) >= DELTA_SYNC_S * 1000
            ):
                self._write(view, flushed=True)

    def _write(
        self, seg: SegmentView, flushed: bool, parts: list[dict[str, Any]] | None = None
    ) -> None:
        """Steps 1-3 of the module docstring for one segment (its rows' `parts` written by
        the RowsWriter already, if given)."""
        pause_point("datanode.write.before_files")  # a test holds the flush here
        ref = self.refs.get(seg.segment_id) or SegmentRef(
            seg.collection_id, seg.partition_id, seg.segment_id, seg.vchannel
        )
        schema = self.schemas.get(ref.collection_id)
        rows, deltas = self.buffers.get(seg.segment_id), self.deltas.get(seg.segment_id)
        stats = [json.loads(self.objects.get(p)) for p in seg.stats_paths] if flushed else []
        if schema is None:
            body = self.writer.write(ref, _EMPTY, None, None, flushed)
        elif isinstance(rows, RefBuffer):
            assert self._remote is not None
            body = self._remote.write(
                ref, schema, rows, deltas, flushed, stats, seg.rows_written, parts
            )
        else:
            body = self.writer.write(ref, schema, rows, deltas, flushed, stats, seg.rows_written)
        body["num_rows"] += seg.rows_written
        ddl = self.ddl.get(ref.collection_id)
        if ddl is not None and schema is not None:
            events = [(ts, EventTypeCode(code), text) for ts, code, text in ddl.events]
            body["ddl_binlogs"] = self.writer.write_ddl(ref.collection_id, events)
        if rows is not None:
            body["start_position"] = self._position(ref, rows.start)
        body["end_position"] = self._end(ref)
        crash_point("datanode.write.after_files")
        self._save(ref, body)
        self.buffer.forget(seg.segment_id)
        if flushed:  # its rows reach datacoord in SegmentFlushed now
            self._reports.forget(seg.segment_id)
        if body["ddl_binlogs"]:
            self.ddl.pop(ref.collection_id, None)
        self.checkpoint()

    def _save(self, ref: SegmentRef, body: dict[str, Any]) -> None:
        """Step 2 of the module docstring: appends a segment's BinlogPathsSaved (`body`, with
        this node's registration as its writer) to coord and applies it to the views.
        Raises LogError."""
        body = {**body, "writer": writer_body(self.registration)}
        saved = Event("BinlogPathsSaved", self.rc.now(), body, ref.collection_id, ref.vchannel)
        record = Append(0, self.coord_serde.encode(saved), self.coord_serde.key(saved))
        self.log.append(self.topics.coord, [record])
        self.views.apply(saved)
        self._wrote = True

    def _pchannel(self, ref: SegmentRef) -> int:
        return self.pchannel_of.get(ref.vchannel, 0)

    def _end(self, ref: SegmentRef) -> dict[str, Any]:
        """Returns the ChannelPosition after the last pack applied of a segment's pchannel."""
        return self._position(ref, self.positions.get(self._pchannel(ref)))

    def _position(self, ref: SegmentRef, pos: StreamPosition | None) -> dict[str, Any]:
        """Returns a ChannelPosition record: resuming there redelivers what follows `pos`."""
        pos = pos or StreamPosition()
        p = self._pchannel(ref)
        return {"vchannel": ref.vchannel, "pchannel": p, "offset": pos.offset, "ts": pos.tick}

    # -- checkpoint ---------------------------------------------------------------------------
    def checkpoints(self, ddl: bool = True) -> dict[int, StreamPosition]:
        """Per pchannel, where a restart must replay from: the position before the oldest row
        or delete still only in memory (or, with `ddl`, DDL not yet in DDL binlogs), else the
        position after the last applied pack."""
        points = [(self.pchannel_of.get(vch, -1), st) for vch, st in self.buffer.pending()]
        if ddl:
            points += [(d.pchannel, d.start) for d in self.ddl.values()]
        return oldest_pending(self.positions, points)

    def checkpoint(self) -> None:
        """Commits the checkpoint, and the primary-key index as of it, in one write; changes
        made by events a replay from the checkpoint redelivers stay uncommitted. Writes only
        when the checkpoint moved."""
        points = self.checkpoints()
        if points == self._committed:
            return
        with self.state.transaction() as txn:
            stage_checkpoint(txn, self.topics.dml, points)
            self.keys.stage(txn, points)
        self._committed = points
        self._retired = delete_retired(self.objects, self._retired, self._committed)

    def publish(self, force: bool = False) -> bool:
        """Appends `ChannelCheckpointed` to coord with the checkpoints of rows and deletes
        (DDL excluded: readers take collections from rootcoord's meta) if they moved, and a
        binlog was written since the last publication, or CHECKPOINT_PUBLISH_S passed, or
        `force`. Everything at or below a position's tick is then in binlogs referenced by
        earlier coord events. Returns whether it appended. Raises LogError."""
        points = not_behind(self.checkpoints(ddl=False), self._on_coord)
        if not points or points == self._published:
            return False
        elapsed = time.monotonic() - self._published_at
        if not (force or self._wrote or elapsed >= CHECKPOINT_PUBLISH_S):
            return False
        event = checkpointed(points, writer_body(self.registration), self.rc.now())
        record = Append(0, self.coord_serde.encode(event), self.coord_serde.key(event))
        self.log.append(self.topics.coord, [record])
        self._published, self._published_at, self._wrote = points, time.monotonic(), False
        return True

    def retention_floor(self) -> dict[int, int]:
        """Returns, per dml pchannel, the first offset a restart may need: below both the
        committed checkpoint (this node's restart) and the published one (query nodes');
        0 for a pchannel with either missing. Records below it may be deleted."""
        committed, published = dict(self._committed), dict(self._published)
        return retention_floor(committed, published, self.pchannels)

    @property
    def pchannels(self) -> list[int]:
        """Returns the dml pchannels this node consumes and writes."""
        if self.owned is not None:
            return sorted(self.owned.pchannels)
        return list(range(self.topics.dml_partitions))


_EMPTY = CollectionSchema(())


def _view(ref: SegmentRef) -> SegmentView:
    return SegmentView(ref.segment_id, ref.collection_id, ref.partition_id, ref.vchannel)


def _collection_key(cid: int) -> bytes:
    return COLLECTION_PREFIX + cid.to_bytes(8, "big", signed=True)
