"""DataCoord (seed 003, 004): segment allocation with expiry, the Growing -> Sealed ->
Flushing -> Flushed state machine and the seal policies, as an event-sourced processor.

Its state is derived from the coord topic (1 partition), which the data node writes too. Its
own events are appended durably, applied at once (so an allocation never returns a segment
that is not Growing), and applied again by the consumer: appliers are idempotent (see
`meta`). The consumer takes two decisions, each a function of the state, so a restart
re-takes any it had not taken: a Sealed segment whose vchannel the data node consumed past
its seal ts starts flushing; a segment whose binlogs cover its rows is Flushed.

Why tick >= seal ts is enough: an insert stamps its ts before it asks for space, and its stamp
holds the time tick back until its rows are on the log; a seal is stamped under the
allocation lock, so every insert with space in the segment has a smaller ts, and the data
node's tick passes the seal ts only after consuming them. Expiry bounds allocations whose
rows never arrive (it is recorded; the tick rule already covers in-process proxies).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from vectorlog.core.errors import FlushTimeout, VectorlogError
from vectorlog.core.faults import crash_point
from vectorlog.core.hybridts import LOGICAL_BITS
from vectorlog.processors.datacoord.compaction_policy import (
    CompactionPolicy,
    group_files,
    plan_groups,
)
from vectorlog.processors.datacoord.segment import Allocation, Segment, SegmentState
from vectorlog.processors.datacoord.segment_meta import SegmentMeta
from vectorlog.processors.datacoord.settings import DataCoordSettings
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.runtime.events import decode_or_dead_letter, skip_past
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.periodic import Periodic
from vectorlog.streams.snapshots import Blobs, FenceMemo, read_from, resume_fence
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger(__name__)
#: states a flush waits for no longer
DONE = (SegmentState.FLUSHED, SegmentState.DROPPED)


class DataCoord(ProcessorBase):
    """Implements DataCoordService on the coord topic."""

    name = "datacoord"

    def __init__(
        self,
        log: Log,
        topics: Topics,
        serdes: Serdes,
        store: StateStore,
        rootcoord: RootCoordService,
        settings: DataCoordSettings | None = None,
        snapshots: Blobs | None = None,
    ) -> None:
        """`snapshots`: where the coord topic's snapshots are (see coord_snapshot)."""
        self.log, self.topic, self.rc, self.snapshots = log, topics.coord, rootcoord, snapshots
        self.settings = settings or DataCoordSettings()
        self.serde = serdes.for_topic(self.topic)
        self.meta = SegmentMeta(store, self.topic)
        self.source = rootcoord.tick_source("datacoord")
        self._dead_letter = DeadLetterWriter(log, topics.dlq, "datacoord")
        self._alloc_lock = threading.Lock()
        self._applied = threading.Condition(threading.Lock())
        self._pending_allocations: list[dict[str, int]] = []
        self._current: dict[tuple[int, int, str], Segment] = {}  # channel -> its Growing one
        self._next = 0  # the next coord offset to consume: a record is done once decided on
        self._fences = FenceMemo()  # the recovery read's end: the consumer starts there
        self._source = RecordSource(
            log, lambda: {self.topic: {0: self._next}}, resume_fence(log, snapshots, self._fences)
        )
        self._loop = ProcessorLoop(self, join_timeout_s=10)
        interval = self.settings.background_interval_s
        self._background = Periodic("datacoord-policies", self._background_round, interval)

    # -- lifecycle ---------------------------------------------------------------------------
    def recover(self, timeout: float = 60.0) -> None:
        """Applies the coord topic from the stored position to its end, then re-takes any
        decision the state calls for (the replay's commits synced once, at its end)."""
        position = self.meta.position()
        with self.meta.store.synced_once():
            records = read_from(
                self.log, self.topic, self.snapshots, position, timeout, self._fences
            )
            for rec in records:
                self._consume(rec)
        self._decide(self.meta.segments.values())

    def start(self) -> None:
        """Starts the consumer (the shared loop) and the background round (allocations,
        lifetime policy)."""
        self._next = self.meta.position()
        self._loop.start()
        self._background.start()

    def stop_soon(self) -> None:
        """Asks the consumer and the background round to end, without waiting."""
        self._loop.stop_soon()
        self._background.stop_soon()

    def stop(self) -> None:
        self._loop.stop()
        self._background.stop()
        try:
            self._flush_allocations()
        except VectorlogError as exc:  # a closing process: the rows are on dml regardless
            log.warning("datacoord could not record its last allocations at stop: %s", exc)

    # -- allocation (DataCoordService) ---------------------------------------------------------
    def assign_segments(
        self,
        collection_id: int,
        partition_id: int,
        vchannel: str,
        pchannel: int,
        rows: int,
        row_bytes: int,
        ts: int,
    ) -> list[tuple[int, int]]:
        """Returns [(segment id, rows)] covering `rows` rows of an insert stamped `ts`, filling
        the channel's Growing segment up to the seal proportion before opening the next."""
        out: list[tuple[int, int]] = []
        expire = ts + (self.settings.allocation_expiry_ms << LOGICAL_BITS)
        with self._alloc_lock:
            while rows > 0:
                seg = self._growing(collection_id, partition_id, vchannel, pchannel, row_bytes)
                take = min(rows, self._free(seg))
                if take <= 0:
                    self._seal([seg], "size")
                    continue
                self._allocate(seg, take, ts, expire)
                out.append((seg.segment_id, take))
                rows -= take
        return out

    def _free(self, seg: Segment) -> int:
        limit = max(1, int(seg.max_rows * self.settings.seal_proportion))
        return limit - seg.num_rows - seg.allocated

    def _allocate(self, seg: Segment, rows: int, ts: int, expire: int) -> None:
        with self.meta.lock:
            seg.allocate(Allocation(rows, ts, expire))
            seg.last_expire_ts = max(seg.last_expire_ts, expire)
        self._pending_allocations.append(
            {"segment_id": seg.segment_id, "rows": rows, "insert_ts": ts, "expire_ts": expire}
        )

    def _growing(
        self, collection_id: int, partition_id: int, vchannel: str, pchannel: int, row_bytes: int
    ) -> Segment:
        """Returns the channel's newest Growing segment, opening one if there is none (the
        segments are scanned only when the remembered one is no longer Growing)."""
        key = (collection_id, partition_id, vchannel)
        current = self._current.get(key)
        if current is not None and current.state is SegmentState.GROWING:
            return current
        with self.meta.lock:
            growing = [
                s
                for s in self.meta.segments.values()
                if s.state is SegmentState.GROWING
                and (s.collection_id, s.partition_id, s.vchannel) == key
            ]
        if growing:
            self._current[key] = max(growing, key=lambda s: s.segment_id)
            return self._current[key]
        self._enforce_growing_limit(vchannel)
        max_rows = max(1, self.settings.max_segment_bytes // max(1, row_bytes))
        segment_id = self.rc.allocate_ids()
        body: dict[str, Any] = {
            "segment_id": segment_id,
            "collection_id": collection_id,
            "partition_id": partition_id,
            "vchannel": vchannel,
            "pchannel": pchannel,
            "max_rows": max_rows,
        }
        self._append_applied("SegmentOpened", body, collection_id, vchannel)
        self._current[key] = self.meta.segments[segment_id]
        return self._current[key]

    def _enforce_growing_limit(self, vchannel: str) -> None:
        """Seals the oldest Growing segments of a vchannel beyond the configured number."""
        with self.meta.lock:
            growing = sorted(
                (
                    s
                    for s in self.meta.segments.values()
                    if s.vchannel == vchannel and s.state is SegmentState.GROWING
                ),
                key=lambda s: s.opened_ts,
            )
        excess = len(growing) - self.settings.max_growing_per_channel + 1
        if excess > 0:
            self._seal(growing[:excess], "too_many_growing")

    # -- sealing and flush ---------------------------------------------------------------------
    def _seal(self, segments: list[Segment], reason: str) -> None:
        """Seals Growing segments (caller holds the allocation lock), after recording the
        allocations still pending: a segment's inserts are on coord before its seal (the
        console's segment history dates a Growing segment from its first insert)."""
        ids = [s.segment_id for s in segments if s.state is SegmentState.GROWING]
        if ids:
            batch, self._pending_allocations = self._pending_allocations, []
            if batch:
                self._append([("SegmentsAllocated", {"allocations": batch})])
            self._append_applied("SegmentsSealed", {"segment_ids": ids, "reason": reason})
            self.rc.request_tick()

    def flush(self, collection_id: int) -> list[int]:
        """Seals every Growing segment of the collection; returns the ids of its segments that
        are not Flushed yet (the ones a caller waits for)."""
        with self._alloc_lock:
            segs = self._of_collection(collection_id)
            self._seal([s for s in segs if s.state is SegmentState.GROWING], "flush")
        return sorted(s.segment_id for s in segs if s.state not in DONE)

    def wait_flushed(self, segment_ids: list[int], timeout: float) -> None:
        """Returns once every segment is Flushed. Raises FlushTimeout naming the others."""
        deadline = time.monotonic() + timeout
        with self._applied:
            while not self.flush_state(segment_ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    infos = self.get_segment_info(segment_ids)
                    raise FlushTimeout({i["segment_id"]: i["state"] for i in infos}, timeout)
                self.rc.request_tick()
                self._applied.wait(min(left, 0.2))

    def flush_state(self, segment_ids: list[int]) -> bool:
        """Returns whether every segment is Flushed (or no longer exists, or was Dropped: its
        rows are in the segment a compaction merged it into)."""
        with self.meta.lock:
            segs = (self.meta.segments.get(i) for i in segment_ids)
            return all(s is None or s.state in DONE for s in segs)

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        """Returns each segment's info; an unknown id reads as state "NotExist"."""
        with self.meta.lock:
            return [
                self.meta.segments[i].info() if i in self.meta.segments else _not_exist(i)
                for i in segment_ids
            ]

    def list_segments(self, collection_id: int) -> list[dict[str, Any]]:
        """Returns the info of every segment of a collection, by id, but the Dropped ones."""
        segs = sorted(self._of_collection(collection_id), key=lambda s: s.segment_id)
        return [s.info() for s in segs if s.state is not SegmentState.DROPPED]

    def compaction_groups(
        self,
        collection_id: int,
        horizon: int,
        policy: CompactionPolicy | None = None,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the groups of Flushed segments worth merging, with their files."""
        with self.meta.lock:
            segs = self._of_collection(collection_id)
            groups = plan_groups(segs, horizon, policy or CompactionPolicy(), expire_ts)
            return [group_files(g) for g in groups]

    def _of_collection(self, collection_id: int) -> list[Segment]:
        with self.meta.lock:
            return [s for s in self.meta.segments.values() if s.collection_id == collection_id]

    # -- the log -----------------------------------------------------------------------------
    def _append_applied(
        self, event_type: str, body: dict[str, Any], collection_id: int = 0, vchannel: str = ""
    ) -> None:
        """Appends one event durably, stamped by datacoord's tick source, and applies it."""
        with self.source.stamp() as ts:
            event = Event(event_type, ts, body, collection_id, vchannel)
            self.log.append(
                self.topic, [Append(0, self.serde.encode(event), self.serde.key(event))]
            )
        self.meta.apply(event, None)
        self._notify()

    def _append(self, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
        batch = [Event(t, self.rc.now(), b) for t, b in events]
        if batch:
            records = [Append(0, self.serde.encode(e), self.serde.key(e)) for e in batch]
            self.log.append(self.topic, records)

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Returns {(topic, partition): next offset}: the stored next `coord` offset."""
        return {(self.topic, 0): self.meta.position()}

    # -- the consumer (a Processor on the shared loop) ------------------------------------
    def step(self) -> bool:
        """Consumes the coord records there are; each commits its position with the state."""
        records = self._source.poll(self.topic, 1000, timeout=self._loop.idle_wait_s)
        for rec in records:
            self._consume(rec)
            self._next = rec.offset + 1
        return bool(records)

    def open(self) -> None:
        """Reads coord from the stored position (after a failure: the record whose
        consumption or decision failed is read again, and the rest of its batch with it;
        appliers are idempotent)."""
        self._source.open()

    def reset(self) -> None:
        self._source.reset()

    def _consume(self, rec: Record) -> None:
        event = decode_or_dead_letter(rec, self.serde, self._dead_letter)
        if event is None:
            skip_past(self.meta.store, rec)
            return
        changed = self.meta.apply(event, rec.offset)
        self._decide(self._to_decide(event, changed))
        self._notify()

    def _to_decide(self, event: Event, changed: list[Segment]) -> list[Segment]:
        """Returns the segments a consumed event may have made ready: those it changed and,
        for a data node's tick, every Sealed segment of its vchannel. A tick passing a seal
        ts may change nothing stored of that segment (an earlier tick reported its rows and
        released its allocations), and the data node reports each seal once."""
        if event.type != "DataNodeTicked":
            return changed
        sealed = self.meta.sealed_on(event.body["vchannel"])
        return list({s.segment_id: s for s in [*changed, *sealed]}.values())

    def _decide(self, segments: Iterable[Segment]) -> None:
        """Appends the transitions the state calls for: Sealed -> Flushing once the data node
        consumed past the seal ts; -> Flushed once binlogs cover the segment's rows."""
        flushing, flushed = [], []
        with self.meta.lock:
            for seg in list(segments):
                tick = self.meta.ticks.get(seg.vchannel, 0)
                if seg.state is SegmentState.SEALED and tick >= seg.seal_ts:
                    flushing.append(seg.segment_id)
                elif seg.state is SegmentState.FLUSHING and seg.binlogs.get("flushed"):
                    flushed.append(
                        ("SegmentFlushed", {"segment_id": seg.segment_id, "num_rows": seg.num_rows})
                    )
        crash_point("datacoord.decide.before_append")
        if flushing:
            self._append([("SegmentsFlushStarted", {"segment_ids": flushing})])
        self._append(flushed)

    def _notify(self) -> None:
        with self._applied:
            self._applied.notify_all()

    # -- background: allocation batches and the lifetime policy -----------------------------
    def _background_round(self) -> None:
        self._flush_allocations()
        self._seal_expired_lifetimes()

    def _flush_allocations(self) -> None:
        with self._alloc_lock:
            batch, self._pending_allocations = self._pending_allocations, []
        if batch:
            self._append([("SegmentsAllocated", {"allocations": batch})])

    def _seal_expired_lifetimes(self) -> None:
        """Seals the Growing segments opened more than max_lifetime_s ago. Asks rootcoord the
        time only while there is a Growing segment (an idle cluster has none once flushed:
        two timestamp RPCs a second saved)."""
        with self.meta.lock:
            if not any(s.state is SegmentState.GROWING for s in self.meta.segments.values()):
                return
        horizon = self.rc.now() - (int(self.settings.max_lifetime_s * 1000) << LOGICAL_BITS)
        with self._alloc_lock:
            with self.meta.lock:
                old = [
                    s
                    for s in self.meta.segments.values()
                    if s.state is SegmentState.GROWING and s.opened_ts < horizon
                ]
            self._seal(old, "lifetime")


def _not_exist(segment_id: int) -> dict[str, Any]:
    return {"segment_id": segment_id, "state": SegmentState.NOT_EXIST.label}
