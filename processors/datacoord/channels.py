"""The data channel coordinator (seed 004 "channel allocation", issue 24): it divides the dml
pchannels among the live data nodes and records each division as a `DataChannelsAssigned`
on the coord topic; every reader of coord fences by it (storage.channel_fence).

Where it runs: a processor of the datacoord process (topology `datachannels`), beside the
query coordinator and for the same reasons; its state is the coord topic alone. Liveness:
each data node appends a `DataNodeReported` every HEARTBEAT_S with its epoch; one not heard
for `dead_after_s` is declared dead (its epoch listed in the assignment's `dead`: it must
register again), and its pchannels go to the live nodes at once. Moving a pchannel needs no
hand-over: from the assignment on, the old owner's writes are fenced, and the new owner
starts from the last checkpoint of it accepted before the assignment.

Balance: an owner that is live keeps its pchannels; the others go to the least loaded
node; then one at a time from the most to the least loaded while they differ by more than
one. No data node ever reported: no assignment (one data node writes every pchannel
unfenced, as in Standalone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.schemas.serde import Event
from vectorlog.storage.channel_fence import ChannelFence, Writer
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.snapshots import Blobs, FenceMemo, fresh_start, resume_fence
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger(__name__)
#: how often a data node reports (seconds)
HEARTBEAT_S = 1.0
#: a data node not heard for this long is declared dead (seconds)
DEAD_AFTER_S = 4.0
#: how often the coordinator decides (seconds)
DECIDE_S = 0.25
#: how many dead registrations an assignment keeps
KEEP_DEAD = 64


def divide(owners: dict[int, Writer], pchannels: int, live: list[Writer]) -> dict[int, Writer]:
    """Returns the owner of each pchannel among `live` registrations (see the module
    docstring: live owners keep theirs, then balanced). No live node: no owners."""
    if not live:
        return {}
    load: dict[Writer, list[int]] = {w: [] for w in sorted(live)}
    for p in range(pchannels):
        if owners.get(p) in load:
            load[owners[p]].append(p)
    placed = {p for ps in load.values() for p in ps}
    for p in range(pchannels):
        if p not in placed:
            min(load.items(), key=lambda kv: (len(kv[1]), kv[0]))[1].append(p)
    while True:
        most = max(load, key=lambda w: (len(load[w]), w))
        least = min(load, key=lambda w: (len(load[w]), w))
        if len(load[most]) - len(load[least]) <= 1:
            break
        p = max(load[most])
        load[most].remove(p)
        load[least].append(p)
    return {p: w for w, ps in load.items() for p in ps}


@dataclass
class Heard:
    """A data node's latest heartbeat: its epoch and when this coordinator read it."""

    epoch: int
    seen: float


class DataChannelCoord(ProcessorBase):
    """Follows coord from its start; once caught up, every DECIDE_S appends the next
    DataChannelsAssigned if it changed (`fence` is the one in force)."""

    name = "datachannels"

    def __init__(
        self,
        log_: Log,
        topics: Topics,
        serdes: Serdes,
        now: Callable[[], int],
        dead_after_s: float = DEAD_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        role: str = "datanode",
        blobs: Blobs | None = None,
    ) -> None:
        """`now()`: a hybrid timestamp for the events' ts; `clock()`: seconds, for liveness;
        `role`: whose nodes it divides the pchannels among (datanode, or indexnode: their
        index builds, by the segments' pchannels); `blobs`: where coord's snapshots are (it
        starts from the newest one and the records after it, not from offset 0)."""
        self._blobs = blobs
        self.role = role
        self.name = f"{role}-channels"
        self._log, self._topic = log_, topics.coord
        self._serde = serdes.for_topic(topics.coord)
        self._pchannels, self._now, self._clock = topics.dml_partitions, now, clock
        self.dead_after_s = dead_after_s
        self.heard: dict[str, Heard] = {}
        self.fence = ChannelFence(role=role)
        self.offset = -1
        self.records_read = 0  # coord records applied (a snapshot's among them)
        #: set once a round read to coord's end as of `open` (an empty poll alone proves
        #: nothing: Kafka's first fetch may come back empty)
        self.caught_up = threading.Event()
        self._end = 0
        self._fences = FenceMemo()  # the fresh start's: its reader starts there
        self._source = RecordSource(
            log_, lambda: {self._topic: {0: self.offset}}, resume_fence(log_, blobs, self._fences)
        )
        self.loop = ProcessorLoop(self, tick_s=DECIDE_S, join_timeout_s=10)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def close(self) -> None:
        self.stop()

    def open(self) -> None:
        if self.offset < 0:
            records, offset = fresh_start(self._log, self._topic, self._blobs, self._fences)
            for rec in records:
                self._apply(rec)
            self.offset = offset
        self._end = self._log.end_offsets(self._topic).get(0, 0)
        self._source.open()

    def reset(self) -> None:
        self._source.reset()

    def step(self) -> bool:
        records = self._source.poll(self._topic, 1000, timeout=self.loop.idle_wait_s)
        for rec in records:
            self.offset = rec.offset + 1
            self._apply(rec)
        if len(records) < 1000 and self.offset >= self._end:
            self.caught_up.set()
        return bool(records)

    def _apply(self, rec: Record) -> None:
        """Folds one coord record: an assignment or a heartbeat of its role."""
        self.records_read += 1
        try:
            event = self._serde.decode(rec.value)
        except Exception:  # datacoord dead-letters coord; this reader only skips
            return
        if event.body.get("role", "datanode") != self.role:
            return
        if event.type == "DataChannelsAssigned":
            self.fence.fold(event.body)
        elif event.type == "DataNodeReported":
            self.reported(str(event.body["node"]), int(event.body["epoch"]))

    def reported(self, node: str, epoch: int) -> None:
        """Folds one heartbeat: a dead registration, or one older than the node's known
        one, is ignored."""
        known = self.heard.get(node)
        if (node, epoch) in self.fence.dead or (known is not None and known.epoch > epoch):
            return
        self.heard[node] = Heard(epoch, self._clock())

    def tick(self) -> None:
        self.decide()

    def decide(self) -> dict[int, Writer]:
        """Declares the silent nodes dead and appends the next assignment if it changed
        (only once coord was read to its end). Returns the owners in force."""
        if not self.caught_up.is_set() or not self.heard:
            return self.fence.owners
        now = self._clock()
        gone = {(n, h.epoch) for n, h in self.heard.items() if now - h.seen > self.dead_after_s}
        for node, epoch in gone:
            log.info("datachannels: %s %s (epoch %d) declared dead", self.role, node, epoch)
            del self.heard[node]
        live = [(n, h.epoch) for n, h in self.heard.items()]
        owners = divide(self.fence.owners, self._pchannels, live)
        dead = frozenset(sorted(self.fence.dead | gone, key=lambda w: w[1])[-KEEP_DEAD:])
        if owners != self.fence.owners or dead != self.fence.dead:
            self._append(owners, dead)
        return self.fence.owners

    def _append(self, owners: dict[int, Writer], dead: frozenset[Writer]) -> None:
        nxt = ChannelFence(owners, dead, self.fence.version + 1, self.role)
        event = Event("DataChannelsAssigned", self._now(), nxt.to_body())
        self._log.append(
            self._topic, [Append(0, self._serde.encode(event), self._serde.key(event))]
        )
        self.fence = nxt  # its own record comes back with the same content
        log.info("datachannels: %s assignment v%d, owners %s", self.role, nxt.version, owners)
