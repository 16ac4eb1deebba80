"""The query coordination as other processes see it: a follower of the coord topic that
folds the query coordinator's latest `QueryChannelsAssigned` (and hands every coord event of
interest to a callback), for the query nodes (what to load, whether they were declared dead)
and the proxies (where to send each pchannel's reads)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from vectorlog.processors.querycoord.assignment import Assignment
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Log
from vectorlog.streams.snapshots import Blobs, FenceMemo, fresh_start, resume_fence

log = logging.getLogger(__name__)
#: coord records read per round
BATCH = 1000
#: the coord events about query coordination
TYPES = frozenset({"QueryNodeReported", "QueryChannelsAssigned", "QueryReplicasConfigured"})


class CoordFollower(ProcessorBase):
    """Reads coord from its start on its own thread; `assignment` is the newest one read,
    `caught_up` is set once a round read to coord's end as of `open`; `on_event(event)` gets every
    QueryNodeReported and QueryChannelsAssigned in log order (on the follower's thread)."""

    def __init__(
        self,
        log_: Log,
        topic: str,
        serde: EventSerde,
        name: str,
        on_event: Callable[[Event], None] | None = None,
        tick_s: float | None = None,
        on_tick: Callable[[], object] | None = None,
        types: frozenset[str] = TYPES,
        blobs: Blobs | None = None,
    ) -> None:
        """`on_tick()` runs on the follower's thread every `tick_s` seconds; `types`: the
        coord events handed to `on_event`; `blobs`: where coord's snapshots are (the follower
        starts from the newest one and the records after it, not from offset 0)."""
        self._types, self._blobs = types, blobs
        self._log, self._topic, self._serde = log_, topic, serde
        self.name, self._on_event, self._on_tick = name, on_event, on_tick
        self.assignment = Assignment()
        self.offset = -1  # the next coord offset to read; -1: the topic's start
        #: coord's end when the follower opened: `caught_up` waits for a read past it (a
        #: short or empty poll alone proves nothing: Kafka's first fetch may come back empty)
        self._end = 0
        self.records_read = 0  # coord records applied (a snapshot's among them)
        self.caught_up = threading.Event()
        self.changed = threading.Condition()  # notified after each new assignment
        self._fences = FenceMemo()  # the fresh start's: its reader starts there
        self._source = RecordSource(
            log_, lambda: {self._topic: {0: self.offset}}, resume_fence(log_, blobs, self._fences)
        )
        self.loop = ProcessorLoop(self, tick_s=tick_s, join_timeout_s=10)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def open(self) -> None:
        if self.offset < 0:
            records, offset = fresh_start(self._log, self._topic, self._blobs, self._fences)
            for rec in records:
                self._apply(rec.value)
            self.offset = offset
        self._end = self._log.end_offsets(self._topic).get(0, 0)
        self._source.open()

    def reset(self) -> None:
        self._source.reset()

    def tick(self) -> None:
        if self._on_tick is not None:
            self._on_tick()

    def step(self) -> bool:
        records = self._source.poll(self._topic, BATCH, timeout=self.loop.idle_wait_s)
        for rec in records:
            self._apply(rec.value)
            self.offset = rec.offset + 1
        if len(records) < BATCH and self.offset >= self._end:
            self.caught_up.set()
        return bool(records)

    def _apply(self, value: bytes) -> None:
        self.records_read += 1
        try:
            event = self._serde.decode(value)
        except Exception as exc:  # datacoord dead-letters coord; this reader only skips
            log.debug("%s skips an undecodable coord record: %s", self.name, exc)
            return
        if event.type not in self._types:
            return
        if event.type == "QueryChannelsAssigned":
            nxt = Assignment.from_body(event.body)
            if nxt.version >= self.assignment.version:
                with self.changed:
                    self.assignment = nxt
                    self.changed.notify_all()
        if self._on_event is not None:
            self._on_event(event)

    def wait_change(self, version: int, timeout: float) -> Assignment:
        """Returns the assignment once its version passes `version`, or after `timeout`."""
        with self.changed:
            self.changed.wait_for(lambda: self.assignment.version > version, timeout)
            return self.assignment
