"""The log's past as the console shows it: a follower that reads one topic incrementally
through the replay library (the topic's snapshot first where records were deleted, then on
each refresh only the records appended since), and the folds it feeds: on ddl, every
collection's names and DDL moments; on coord, each segment's states and rows over time
(Growing, Sealed, Flushing, Flushed, Dropped with their timestamps), the flushes and the
index builds. Every fold is idempotent: a snapshot read again after the topic was truncated
further changes nothing."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vectorlog.jobs.replay import Filters, Positions, replay
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.errors import OffsetOutOfRange
from vectorlog.streams.log.base import Log, Record
from vectorlog.streams.snapshots import Blobs

#: a follower reads its topic again at most this often (0: on every call; reading nothing
#: new costs one end-offsets call, and a page must show what was just written)
REFRESH_S = 0.0
#: reads of a topic made again when retention deleted records during one
RETRIES = 3
#: DDL events that are about the cluster, not one collection's schema
NOT_MOMENTS = frozenset({"RangeReserved", "TimeTick"})


class Follower:
    """Feeds `apply` every event of a topic, read incrementally; `refresh` reads what was
    appended since the last one (at most every `every_s` seconds)."""

    def __init__(
        self,
        log: Log,
        topic: str,
        serde: EventSerde,
        blobs: Blobs | None,
        apply: Callable[[Event], None],
        every_s: float = REFRESH_S,
    ) -> None:
        self.log, self.topic, self.serde, self.blobs = log, topic, serde, blobs
        self.apply, self.every_s = apply, every_s
        self.lock = threading.RLock()
        self._positions = Positions(topic)
        self._refreshed = -math.inf

    def refresh(self) -> None:
        """Applies the events appended since the last refresh, if that is `every_s` old.
        Raises VectorlogError (SnapshotMissing, LogError) if the topic cannot be read."""
        with self.lock:
            if time.monotonic() - self._refreshed < self.every_s:
                return
            for attempt in range(RETRIES):
                try:
                    self._read()
                    break
                except OffsetOutOfRange:  # retention ran between replay's check and its read
                    if attempt == RETRIES - 1:
                        raise
            self._refreshed = time.monotonic()

    def _read(self) -> None:
        """Applies the events after the positions (the snapshot first where records were
        deleted); the positions move as it goes, so a read cut short goes on from there."""
        positions, blobs = self._positions, self.blobs
        items = replay(self.log, self.topic, self.serde, Filters(), positions, _skip, blobs)
        for item in items:
            self.apply(item.event)


def _skip(record: Record, reason: str) -> None:
    """A record that does not decode: its consumers dead-lettered it; the console skips it."""


@dataclass
class Moment:
    """One DDL event of a collection: when, what, and a one-line summary."""

    ts: int
    type: str
    text: str


class DdlFold:
    """Collections as the ddl topic names them: id -> name (renames followed), creation
    and drop ts, and each collection's DDL moments."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.created: dict[int, int] = {}
        self.dropped: dict[int, int] = {}
        self.moments: dict[int, dict[tuple[int, str], Moment]] = {}

    def apply(self, e: Event) -> None:
        b = e.body
        if e.type == "CollectionCreated":
            self.names[int(b["collection_id"])] = b["collection_name"]
            self.created.setdefault(int(b["collection_id"]), e.ts)
        elif e.type == "CollectionRenamed":
            self.names[int(b["collection_id"])] = b["new_name"]
        elif e.type == "CollectionDropped":
            self.dropped.setdefault(int(b["collection_id"]), e.ts)
        if e.collection_id and e.type not in NOT_MOMENTS:
            moments = self.moments.setdefault(e.collection_id, {})
            moments.setdefault((e.ts, e.type), Moment(e.ts, e.type, _summary(e)))


def _summary(e: Event) -> str:
    """Returns a DDL event's one-line summary (the names it carries)."""
    keys = ("collection_name", "new_name", "partition_name", "index_name", "alias", "field_name")
    return ", ".join(f"{k}={e.body[k]}" for k in keys if isinstance(e.body.get(k), str))


@dataclass
class SegmentLife:
    """One segment's states and row counts over time, as the coord topic tells them."""

    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    states: list[tuple[str, int]] = field(default_factory=list)  # (state, ts), in order
    rows: list[tuple[int, int]] = field(default_factory=list)  # (ts, rows) when they grew
    allocated: dict[int, int] = field(default_factory=dict)  # insert ts -> rows handed out
    origin: str = "insert"  # insert | import | compaction
    seal_reason: str = ""

    def enter(self, state: str, ts: int) -> None:
        """Records `state` from `ts` on, once."""
        if state not in (s for s, _ in self.states):
            self.states.append((state, ts))

    def grew(self, ts: int, rows: int) -> None:
        if not self.rows or rows > self.rows[-1][1]:
            self.rows.append((ts, rows))

    def allocate(self, insert_ts: int, rows: int) -> None:
        """Records rows of an insert stamped `insert_ts` (DataCoord opens a segment for an
        insert, just after the insert's ts: the segment is Growing from that insert on)."""
        self.allocated[insert_ts] = rows
        if self.states and self.states[0][0] == "Growing" and insert_ts < self.states[0][1]:
            self.states[0] = ("Growing", insert_ts)

    def at(self, ts: int) -> tuple[str, int] | None:
        """Returns (state, rows) as of `ts`, None if the segment did not exist yet: rows
        the data node counted by then, or the rows of the inserts stamped by then if more
        (the data node counts them a tick later)."""
        states = [s for s, t in self.states if t <= ts]
        if not states:
            return None
        counted = [n for t, n in self.rows if t <= ts]
        inserted = sum(n for t, n in self.allocated.items() if t <= ts)
        return states[-1], max(counted[-1] if counted else 0, inserted)


@dataclass
class Flush:
    """A flush: the segments it sealed at `ts` (a flush completes once they are Flushed)."""

    ts: int
    collection_id: int
    segment_ids: list[int]


@dataclass
class IndexBuilds:
    """The segment indexes built for one index of a collection, from the coord topic."""

    collection_id: int
    index_id: int
    index_name: str
    index_type: str
    builds: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    first_ts: int = 0
    last_ts: int = 0
    dropped_ts: int = 0

    def add(self, e: Event) -> None:
        b = e.body
        key = (int(b["segment_id"]), int(b["build_id"]))
        if key not in self.builds:
            self.builds[key] = (int(b["num_rows"]), int(b["build_ms"]))
            self.first_ts = min(self.first_ts or e.ts, e.ts)
            self.last_ts = max(self.last_ts, e.ts)


class CoordFold:
    """Segments over time, flushes and index builds, from the coord topic's events."""

    def __init__(self) -> None:
        self.segments: dict[int, SegmentLife] = {}
        self.flushes: dict[int, Flush] = {}
        self.indexes: dict[tuple[int, int], IndexBuilds] = {}

    def apply(self, e: Event) -> None:
        handler = getattr(self, "_" + e.type, None)
        if handler is not None:
            handler(e, e.body)

    def _SegmentOpened(self, e: Event, b: dict[str, Any]) -> None:
        sid = int(b["segment_id"])
        life = self.segments.setdefault(
            sid, SegmentLife(sid, int(b["collection_id"]), int(b["partition_id"]), b["vchannel"])
        )
        life.enter("Growing", e.ts)

    def _SegmentsAllocated(self, e: Event, b: dict[str, Any]) -> None:
        for a in b["allocations"]:
            life = self.segments.get(int(a["segment_id"]))
            if life is not None:
                life.allocate(int(a["insert_ts"]), int(a["rows"]))

    def _SegmentsSealed(self, e: Event, b: dict[str, Any]) -> None:
        sealed = [self.segments[s] for s in b["segment_ids"] if s in self.segments]
        for life in sealed:
            life.enter("Sealed", e.ts)
            life.seal_reason = life.seal_reason or b["reason"]
        if b["reason"] == "flush" and sealed:
            ids = [life.segment_id for life in sealed]
            self.flushes.setdefault(e.ts, Flush(e.ts, sealed[0].collection_id, ids))

    def _SegmentsFlushStarted(self, e: Event, b: dict[str, Any]) -> None:
        for sid in b["segment_ids"]:
            if sid in self.segments:
                self.segments[sid].enter("Flushing", e.ts)

    def _SegmentFlushed(self, e: Event, b: dict[str, Any]) -> None:
        life = self.segments.get(int(b["segment_id"]))
        if life is not None:
            life.grew(e.ts, int(b["num_rows"]))
            life.enter("Flushed", e.ts)

    def _DataNodeTicked(self, e: Event, b: dict[str, Any]) -> None:
        for row in b["segments"]:
            life = self.segments.get(int(row["segment_id"]))
            if life is not None:
                life.grew(e.ts, int(row["num_rows"]))

    def _BinlogPathsSaved(self, e: Event, b: dict[str, Any]) -> None:
        sid = int(b["segment_id"])
        if sid not in self.segments and b.get("imported"):
            origin = "compaction" if b.get("compacted_from") else "import"
            life = SegmentLife(sid, int(b["collection_id"]), int(b["partition_id"]), b["vchannel"])
            life.origin, self.segments[sid] = origin, life
            life.enter("Flushed", e.ts)
        if sid in self.segments:
            self.segments[sid].grew(e.ts, int(b["num_rows"]))
        for merged in b.get("compacted_from") or []:
            if merged in self.segments:
                self.segments[merged].enter("Dropped", e.ts)

    def _SegmentIndexed(self, e: Event, b: dict[str, Any]) -> None:
        key = (int(b["collection_id"]), int(b["index_id"]))
        if key not in self.indexes:
            self.indexes[key] = IndexBuilds(*key, b["index_name"], b["index_type"])
        self.indexes[key].add(e)

    def _SegmentIndexesDropped(self, e: Event, b: dict[str, Any]) -> None:
        for (cid, iid), builds in self.indexes.items():
            if cid == b["collection_id"] and b["index_id"] in (iid, -1):
                builds.dropped_ts = builds.dropped_ts or e.ts


class History:
    """The ddl and coord folds of one cluster, each kept current by its Follower."""

    def __init__(self, cluster: Any) -> None:
        topics, serdes = cluster.topics, cluster.serdes
        blobs = getattr(cluster, "objects", None)
        self.ddl, self.coord = DdlFold(), CoordFold()
        self._ddl = Follower(
            cluster.log, topics.ddl, serdes.for_topic(topics.ddl), blobs, self.ddl.apply
        )
        self._coord = Follower(
            cluster.log, topics.coord, serdes.for_topic(topics.coord), blobs, self.coord.apply
        )

    @contextlib.contextmanager
    def current(self) -> Any:
        """Refreshes both folds, then holds them still while the caller reads them. Raises
        VectorlogError if a topic cannot be read."""
        with self._ddl.lock, self._coord.lock:
            self._ddl.refresh()
            self._coord.refresh()
            yield self

    def collection_ids(self, name: str) -> set[int]:
        """Returns every id a collection called `name` had (call within `current`)."""
        return {i for i, n in self.ddl.names.items() if n == name}
