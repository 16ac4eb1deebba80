"""A data node of the scale-out (`vectorlog run datanode` in cluster mode): it writes the dml
pchannels datacoord assigns it (processors/datacoord/channels.py), one `DataNode` per
pchannel, and reports itself on the coord topic every heartbeat with its epoch.

Taking a pchannel starts a DataNode on an empty state store of its own (`DIR/p<N>`, wiped
first): it starts from the pchannel's last checkpoint coord accepted, whoever wrote it
(processors/datanode/takeover.py). A pchannel no longer assigned here is stopped at once: its
writes from then on are fenced anyway. If this epoch was declared dead (the node was not
heard for too long) everything is stopped and the node registers again with a new epoch.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from vectorlog.processors.datacoord.channels import HEARTBEAT_S
from vectorlog.processors.datanode.datanode import DataNode
from vectorlog.processors.querycoord.routing import CoordFollower
from vectorlog.schemas.serde import Event
from vectorlog.storage.channel_fence import ChannelFence, Writer
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.snapshots import Blobs
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger("vectorlog.run")

#: make(pchannel, state_dir, writer) -> (a recovered, unstarted DataNode writing that
#: pchannel, what closes it and its state store)
MakeDataNode = Callable[[int, Path, Writer], tuple[DataNode, Callable[[], None]]]


class ChannelDataNode:
    """The pchannels this data node writes, started and stopped as assigned (see the module
    docstring); `allocate()` returns a fresh timestamp (its epochs)."""

    def __init__(
        self,
        name: str,
        log_: Log,
        topics: Topics,
        serdes: Serdes,
        state_dir: Path,
        make: MakeDataNode,
        allocate: Callable[[], int],
        blobs: Blobs | None = None,
        stamp: Callable[[], int] | None = None,
    ) -> None:
        """`blobs`: where coord's snapshots are (its follower starts from the newest);
        `stamp()` (default `allocate`): its heartbeats' timestamps (need not be fresh)."""
        self.name, self._log, self._topic = name, log_, topics.coord
        self._serde = serdes.for_topic(topics.coord)
        self._dir, self._make, self._allocate = state_dir, make, allocate
        self._stamp = stamp or allocate
        self.epoch = allocate()
        self.fence = ChannelFence()
        self.instances: dict[int, DataNode] = {}
        self._closers: dict[int, Callable[[], None]] = {}
        self.starting: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.follower = CoordFollower(
            log_,
            self._topic,
            self._serde,
            "datanode-assignments",
            self._folded,
            HEARTBEAT_S,
            self.beat,
            frozenset({"DataChannelsAssigned"}),
            blobs,
        )

    @property
    def me(self) -> Writer:
        return (self.name, self.epoch)

    def start(self) -> None:
        log.info("datanode %s: registered with epoch %d", self.name, self.epoch)
        self.follower.start()

    def stop(self) -> None:
        self._closing.set()
        self.follower.stop()

    def close(self) -> None:
        """Stops following and reporting, and closes every pchannel's DataNode."""
        self.stop()
        for t in list(self.starting.values()):
            t.join(timeout=60)
        self._close_all()

    def _close_all(self) -> None:
        with self._lock:
            closers, self.instances, self._closers = list(self._closers.values()), {}, {}
        for close in closers:
            close()

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Returns {(topic, partition): next offset} of every pchannel written here (for
        /metrics; coord's: the least of theirs)."""
        with self._lock:
            nodes = list(self.instances.values())
        out: dict[tuple[str, int], int] = {}
        for dn in nodes:
            for (topic, part), nxt in dn.next_offsets().items():
                if topic != self._topic:
                    out[(topic, part)] = nxt
                else:
                    out[(topic, part)] = min(out.get((topic, part), nxt), nxt)
        return out

    def _folded(self, event: Event) -> None:
        self.fence.admit(event)  # the data nodes' assignment only

    # -- heartbeat and assignment -----------------------------------------------------------
    def beat(self) -> None:
        """Follows the assignment (starts, stops, re-registers), then reports."""
        if self.follower.caught_up.is_set():
            self.reconcile()
        with self._lock:
            writing = sorted(self.instances)
        body = {"node": self.name, "epoch": self.epoch, "writing": writing}
        event = Event("DataNodeReported", self._stamp(), body)
        self._log.append(
            self._topic, [Append(0, self._serde.encode(event), self._serde.key(event))]
        )

    def reconcile(self) -> None:
        """Starts the pchannels assigned here, stops the others; if this epoch was declared
        dead, stops everything and registers again."""
        fence = self.fence
        if self.me in fence.dead:
            self._reregister()
            return
        mine = {p for p, w in fence.owners.items() if w == self.me}
        with self._lock:
            for p in sorted(mine - set(self.instances) - set(self.starting)):
                t = threading.Thread(target=self._take, args=(p,), name=f"take-{p}", daemon=True)
                self.starting[p] = t
                t.start()
            released = sorted(set(self.instances) - mine)
            closers = [self._closers.pop(p) for p in released]
            for p in released:
                del self.instances[p]
        for p, close in zip(released, closers, strict=True):
            log.info("datanode %s: released pchannel %d", self.name, p)
            close()

    def _reregister(self) -> None:
        self._close_all()
        old, self.epoch = self.epoch, self._allocate()
        log.warning(
            "datanode %s: epoch %d was declared dead; registered again with epoch %d",
            self.name,
            old,
            self.epoch,
        )

    def _take(self, p: int) -> None:
        writer, close = self.me, None
        try:
            folder = self._dir / f"p{p}"
            shutil.rmtree(folder, ignore_errors=True)
            dn, close = self._make(p, folder, writer)
            with self._lock:
                if writer == self.me and not self._closing.is_set():
                    dn.start()
                    self.instances[p], self._closers[p], close = dn, close, None
                    log.info("datanode %s: writing pchannel %d", self.name, p)
        except Exception as exc:  # retried at the next heartbeat
            log.error("datanode %s: cannot take pchannel %d: %s", self.name, p, exc)
        finally:
            if close is not None:
                close()
            with self._lock:
                self.starting.pop(p, None)


class IndexNodeMember:
    """An index node's membership of the scale-out: it reports itself on coord every
    heartbeat (a DataNodeReported of role indexnode) and follows datacoord's division of the
    pchannels among the index nodes; `owns(pchannel)` says whether it builds the indexes of
    that pchannel's segments (another node's builds come to it when that node dies). A
    registration declared dead registers again with a new epoch."""

    ROLE = "indexnode"

    def __init__(
        self,
        name: str,
        log_: Log,
        topics: Topics,
        serdes: Serdes,
        allocate: Callable[[], int],
        blobs: Blobs | None = None,
        stamp: Callable[[], int] | None = None,
    ) -> None:
        """`blobs`: where coord's snapshots are (its follower starts from the newest);
        `stamp()` (default `allocate`): its heartbeats' timestamps (need not be fresh)."""
        self.name, self._log, self._topic = name, log_, topics.coord
        self._serde = serdes.for_topic(topics.coord)
        self._allocate, self._stamp = allocate, stamp or allocate
        self.epoch = allocate()
        self.fence = ChannelFence(role=self.ROLE)
        self.follower = CoordFollower(
            log_,
            self._topic,
            self._serde,
            "indexnode-assignments",
            self._folded,
            HEARTBEAT_S,
            self.beat,
            frozenset({"DataChannelsAssigned"}),
            blobs,
        )

    def start(self) -> None:
        log.info("indexnode %s: registered with epoch %d", self.name, self.epoch)
        self.follower.start()

    def stop(self) -> None:
        self.follower.stop()

    def close(self) -> None:
        self.stop()

    def _folded(self, event: Event) -> None:
        self.fence.admit(event)  # the index nodes' assignment only

    def owns(self, pchannel: int) -> bool:
        """Returns whether this node builds the indexes of `pchannel`'s segments."""
        return self.fence.owners.get(pchannel) == (self.name, self.epoch)

    def beat(self) -> None:
        """Registers again if declared dead, then reports."""
        if (self.name, self.epoch) in self.fence.dead:
            old, self.epoch = self.epoch, self._allocate()
            log.warning("indexnode %s: epoch %d declared dead; now %d", self.name, old, self.epoch)
        mine = sorted(p for p in self.fence.owners if self.owns(p))
        body = {"node": self.name, "epoch": self.epoch, "writing": mine, "role": self.ROLE}
        event = Event("DataNodeReported", self._stamp(), body)
        self._log.append(
            self._topic, [Append(0, self._serde.encode(event), self._serde.key(event))]
        )
