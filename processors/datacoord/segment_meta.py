"""DataCoord's derived state: every segment and each vchannel's data-node tick, applied from
the events of the coord topic and stored in the StateStore with the consumed position.

Every applier is idempotent and only moves state forward (a state never goes back, counts only
grow, allocations are keyed), so an event applied inline by its writer and again by the
consumer, or again after a crash, changes nothing the second time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable

from vectorlog.processors.datacoord.segment import Allocation, Segment, SegmentState
from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore
from vectorlog.storage.channel_fence import ChannelFence

SEGMENT_PREFIX = b"segment/"
TICK_PREFIX = b"tick/"
#: the data channel assignment in force (storage.channel_fence), as a DataChannelsAssigned body
FENCE_KEY = b"fence"
log = logging.getLogger(__name__)


def segment_key(segment_id: int) -> bytes:
    """Returns the state key of a segment (big-endian id: segments iterate in id order)."""
    return SEGMENT_PREFIX + segment_id.to_bytes(8, "big", signed=True)


def tick_key(vchannel: str) -> bytes:
    return TICK_PREFIX + vchannel.encode()


class SegmentMeta:
    """Segments and ticks in memory, persisted through `store` on every apply."""

    def __init__(self, store: StateStore, topic: str) -> None:
        self.store, self.topic = store, topic
        self.lock = threading.RLock()
        self._commits = threading.Lock()  # orders the commits as their applies
        self.segments: dict[int, Segment] = {}
        self.ticks: dict[str, int] = {}
        self.fence = ChannelFence()  # data node writes of a pchannel another node owns: dropped
        self._appliers: dict[str, Callable[[Event], Iterable[Segment]]] = {
            "SegmentOpened": self._opened,
            "SegmentsAllocated": self._allocated,
            "SegmentsSealed": self._sealed,
            "DataNodeTicked": self._ticked,
            "SegmentsFlushStarted": self._flushing,
            "BinlogPathsSaved": self._binlogs_saved,
            "SegmentFlushed": self._flushed,
        }
        self._load()

    def _load(self) -> None:
        for _, raw in self.store.items(SEGMENT_PREFIX):
            seg = Segment.from_json(raw)
            self.segments[seg.segment_id] = seg
        for key, raw in self.store.items(TICK_PREFIX):
            self.ticks[key[len(TICK_PREFIX) :].decode()] = int(raw)
        fence = self.store.get(FENCE_KEY)
        if fence is not None:
            self.fence.fold(json.loads(fence))

    def sealed_on(self, vchannel: str) -> list[Segment]:
        """Returns the Sealed segments of a vchannel (waiting for its tick to pass their seal)."""
        with self.lock:
            return [
                s
                for s in self.segments.values()
                if s.vchannel == vchannel and s.state is SegmentState.SEALED
            ]

    def position(self) -> int:
        """Returns the offset of the next coord record to consume."""
        return self.store.position(self.topic, 0) or 0

    def apply(self, event: Event, offset: int | None) -> list[Segment]:
        """Applies one coord event; commits the segments it changed, and `offset + 1` as the
        consumed position when given, in one transaction. Returns the changed segments (a
        fenced data node write changes none: storage.channel_fence).

        The state in memory changes under `lock`; the commit (a synced write) follows outside
        it, commits in the order of their applies: a proxy's allocation, which takes `lock`,
        never waits for the disk (the event applied is on the log already)."""
        with self._commits:
            with self.lock:
                changed = self._changed_by(event)
                puts = self._staged(changed, event)
            with self.store.transaction() as txn:
                for key, value in puts:
                    txn.put(key, value)
                if offset is not None:
                    txn.set_position(self.topic, 0, offset + 1)
        return changed

    def _changed_by(self, event: Event) -> list[Segment]:
        """Applies `event` in memory (unless fenced); returns the segments it changed."""
        admitted = self.fence.admit(event)
        if admitted is None:
            log.warning(
                "datacoord: fenced a %s of %s (it no longer owns that pchannel)",
                event.type,
                event.body.get("writer"),
            )
            return []
        applier = self._appliers.get(event.type)
        return list(applier(admitted)) if applier else []

    def _staged(self, changed: list[Segment], event: Event) -> list[tuple[bytes, bytes]]:
        """Returns the (key, value) puts that store what `event` changed."""
        puts = [(segment_key(seg.segment_id), seg.to_json()) for seg in changed]
        if event.type == "DataNodeTicked":
            vch = event.body["vchannel"]
            puts.append((tick_key(vch), str(self.ticks[vch]).encode()))
        if event.type == "DataChannelsAssigned" and event.body.get("role") == self.fence.role:
            puts.append((FENCE_KEY, json.dumps(self.fence.to_body()).encode()))
        return puts

    # -- appliers --------------------------------------------------------------------------
    def _opened(self, e: Event) -> Iterable[Segment]:
        b = e.body
        if b["segment_id"] in self.segments:
            return []
        seg = Segment(
            b["segment_id"],
            b["collection_id"],
            b["partition_id"],
            b["vchannel"],
            b["pchannel"],
            b["max_rows"],
            e.ts,
        )
        self.segments[seg.segment_id] = seg
        return [seg]

    def _allocated(self, e: Event) -> Iterable[Segment]:
        """Records a batch of allocations, then drops those the data node consumed: once per
        segment (dropping after each one cost the segment's allocations per allocation, ~10
        ms of the GIL for a half-second batch of single-row inserts)."""
        changed = {}
        for a in e.body["allocations"]:
            seg = self.segments.get(a["segment_id"])
            if seg is None:
                continue
            seg.allocate(Allocation(a["rows"], a["insert_ts"], a["expire_ts"]))
            seg.last_expire_ts = max(seg.last_expire_ts, a["expire_ts"])
            changed[seg.segment_id] = seg
        for seg in changed.values():
            seg.release(self.ticks.get(seg.vchannel, 0))
        return changed.values()

    def _sealed(self, e: Event) -> Iterable[Segment]:
        changed = []
        for sid in e.body["segment_ids"]:
            seg = self.segments.get(sid)
            if seg is not None and seg.advance(SegmentState.SEALED):
                seg.seal_ts, seg.seal_reason = e.ts, e.body["reason"]
                changed.append(seg)
        return changed

    def _ticked(self, e: Event) -> Iterable[Segment]:
        vch, tick = e.body["vchannel"], e.body["tick"]
        self.ticks[vch] = max(self.ticks.get(vch, 0), tick)
        rows = {r["segment_id"]: r["num_rows"] for r in e.body["segments"]}
        changed = []
        for seg in self.segments.values():
            if seg.vchannel != vch:
                continue
            before = (seg.num_rows, len(seg.allocations))
            seg.num_rows = max(seg.num_rows, rows.get(seg.segment_id, 0))
            seg.release(self.ticks[vch])
            if (seg.num_rows, len(seg.allocations)) != before:
                changed.append(seg)
        return changed

    def _flushing(self, e: Event) -> Iterable[Segment]:
        segs = (self.segments.get(sid) for sid in e.body["segment_ids"])
        return [s for s in segs if s is not None and s.advance(SegmentState.FLUSHING)]

    def _binlogs_saved(self, e: Event) -> Iterable[Segment]:
        b = e.body
        seg = self.segments.get(b["segment_id"])
        if seg is None and b.get("imported"):
            seg = self.segments[b["segment_id"]] = _imported(e)
        if seg is None:
            return []
        merge_binlogs(seg.binlogs, b)
        seg.num_rows = max(seg.num_rows, b["num_rows"])
        seg.start_position = seg.start_position or _record(b["start_position"])
        seg.dml_position = _record(b["end_position"]) or seg.dml_position
        if b["flushed"]:
            seg.binlogs["flushed"] = True
        return [seg, *self._merged(seg, b.get("compacted_from", []))]

    def _merged(self, into: Segment, segment_ids: list[int]) -> list[Segment]:
        """Marks the segments a compaction merged into `into` Dropped (`into` takes the
        largest capacity of theirs); returns those that changed."""
        segs = [s for s in map(self.segments.get, segment_ids) if s is not None]
        into.max_rows = max([into.max_rows, *(s.max_rows for s in segs)])
        return [s for s in segs if s.advance(SegmentState.DROPPED)]

    def _flushed(self, e: Event) -> Iterable[Segment]:
        seg = self.segments.get(e.body["segment_id"])
        if seg is None or not seg.advance(SegmentState.FLUSHED):
            return []
        seg.num_rows = e.body["num_rows"]
        seg.clear_allocations()
        return [seg]


def merge_binlogs(into: dict, body: dict) -> None:
    """Adds the binlogs of a BinlogPathsSaved body to a segment's, each log id once."""
    for kind in ("field_binlogs", "stats_binlogs"):
        fields = into.setdefault(kind, {})
        for fb in body[kind]:
            logs = fields.setdefault(str(fb["field_id"]), {})
            for log in fb["binlogs"]:
                logs[str(log["log_id"])] = log
    for kind in ("delta_binlogs", "ddl_binlogs"):
        logs = into.setdefault(kind, {})
        for log in body[kind]:
            logs[str(log["log_id"])] = log


def _record(value: object) -> dict | None:
    """Returns an optional record of a decoded Avro union (fastavro gives (name, record))."""
    if isinstance(value, tuple):
        value = value[1]
    return value if isinstance(value, dict) else None


def _imported(e: Event) -> Segment:
    """Returns the record of a bulk insert's or a compaction's segment: Flushed from its
    first event, never open to allocations."""
    b = e.body
    end = b["end_position"]
    end = end[1] if isinstance(end, tuple) else end
    pchannel = end["pchannel"] if end else -1
    seg = Segment(
        b["segment_id"],
        b["collection_id"],
        b["partition_id"],
        b["vchannel"],
        pchannel,
        b["num_rows"],
        e.ts,
        state=SegmentState.FLUSHED,
        seal_reason="compaction" if b.get("compacted_from") else "import",
    )
    seg.seal_ts = e.ts
    return seg
