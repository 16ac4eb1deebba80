"""The query coordinator (seed 001 s.1.2, Milvus's QueryCoord): it assigns the dml pchannels,
with the Flushed segments written from each, to the live query nodes, rebalances when one
joins or leaves, and records every decision as a `QueryChannelsAssigned` on the coord topic.

Where it runs: a processor of the datacoord process (topology `querycoord`, role datacoord),
not a process of its own. Both coordinators are singletons that follow the coord topic and
write small events on it; sharing a process saves a Python interpreter on small machines,
and the role will share datacoord's lease (one fencing for both) when standbys come. Its
state is the coord topic alone (the last assignment and the heartbeats after it), so it
keeps no store and any datacoord process restarted rebuilds it.

Liveness: each query node appends a `QueryNodeReported` (its heartbeat) every
HEARTBEAT_S with its epoch, a timestamp it took when it registered. A node not heard for
`dead_after_s` (this process's clock, from when it read the heartbeat) is declared dead: its
epoch goes to the assignment's `dead` list, its pchannels go to live nodes, and a node that
comes back with that epoch is ignored until it registers again with a newer one. A node that
registers with a newer epoch than the one it had (restarted: a new process) has its older
epoch declared dead at once, without waiting for its silence: the pchannels go to the new
epoch (which starts loading them), and the older epoch's answers are dropped by the proxies
as any dead epoch's.

Replicas: a `QueryReplicasConfigured` (load_collection with replica_number R, appended by a
proxy) asks for R copies; every pchannel gets as many copies as the largest replica_number
asked (the unit is the pchannel, which all collections share), each on another node, as
far as there are live nodes.

Ids (as Milvus's, for GetReplicas): each registration of a query node gets a numeric node
id, and each copy of a collection loaded with replica_number R a replica id, both recorded in
the assignment (querycoord.ids).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from vectorlog.processors.querycoord.assignment import Assignment, Report, advance
from vectorlog.processors.querycoord.routing import CoordFollower
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.snapshots import Blobs
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger(__name__)
#: how often a query node reports (seconds)
HEARTBEAT_S = 1.0
#: a query node not heard for this long is declared dead (seconds)
DEAD_AFTER_S = 4.0
#: how often the coordinator decides (seconds)
DECIDE_S = 0.25


class QueryCoord:
    """Follows coord, and every DECIDE_S appends the next assignment if it changed."""

    name = "querycoord"

    def __init__(
        self,
        log_: Log,
        topics: Topics,
        serdes: Serdes,
        now: Callable[[], int],
        dead_after_s: float = DEAD_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        blobs: Blobs | None = None,
    ) -> None:
        """`now()`: a hybrid timestamp for the events' ts; `clock()`: seconds, for liveness;
        `blobs`: where coord's snapshots are (it starts from the newest, not offset 0)."""
        self._log, self._topic = log_, topics.coord
        self._serde = serdes.for_topic(topics.coord)
        self._pchannels, self._now, self._clock = topics.dml_partitions, now, clock
        self.dead_after_s = dead_after_s
        self.reports: dict[str, Report] = {}
        #: the reports of epochs a newer one of the same node replaced, not yet declared dead
        self._superseded: list[Report] = []
        self.replicas: dict[int, int] = {}  # collection id -> its replica_number
        self.follower = CoordFollower(
            log_,
            self._topic,
            self._serde,
            self.name,
            self._folded,
            DECIDE_S,
            self.decide,
            blobs=blobs,
        )

    def start(self) -> None:
        self.follower.start()

    def stop(self) -> None:
        self.follower.stop()

    def close(self) -> None:
        self.stop()

    @property
    def assignment(self) -> Assignment:
        return self.follower.assignment

    def _folded(self, event: Event) -> None:
        if event.type == "QueryNodeReported":
            self.reported(event.body)
        elif event.type == "QueryReplicasConfigured":
            self.replicas[event.body["collection_id"]] = event.body["replica_number"]

    def reported(self, b: dict[str, object]) -> None:
        """Folds one heartbeat: a dead epoch, or one older than the node's known one, is
        ignored."""
        node, epoch = str(b["node"]), int(b["epoch"])  # type: ignore[call-overload]
        if (node, epoch) in self.assignment.dead:
            return
        known = self.reports.get(node)
        if known is not None and known.epoch > epoch:
            return
        if known is not None and known.epoch < epoch:
            self._superseded.append(known)
            log.info(
                "querycoord: query node %s registered again with epoch %d; its epoch %d is "
                "declared dead", node, epoch, known.epoch,
            )  # fmt: skip
        elif known is None:
            log.info("querycoord: query node %s registered with epoch %d", node, epoch)
        failed = {int(f["pchannel"]): str(f["reason"]) for f in b["failed"]}  # type: ignore[attr-defined]
        serving = frozenset(int(p) for p in b["serving"])  # type: ignore[attr-defined]
        self.reports[node] = Report(node, epoch, str(b["address"]), serving, failed, self._clock())

    def decide(self) -> Assignment:
        """Declares the silent nodes dead and appends the next assignment if it changed
        (only once coord was read to its end). Returns the assignment now in force."""
        current = self.assignment
        if not self.follower.caught_up.is_set():
            return current
        now = self._clock()
        dead = [r for r in self.reports.values() if now - r.seen > self.dead_after_s]
        for r in dead:
            log.info("querycoord: query node %s (epoch %d) declared dead", r.node, r.epoch)
            del self.reports[r.node]
        dead, self._superseded = dead + self._superseded, []
        copies = max(self.replicas.values(), default=1)
        live = list(self.reports.values())
        nxt = advance(current, self._pchannels, live, dead, copies, dict(self.replicas))
        if nxt is not current:
            self._append(nxt)
        return nxt

    def _append(self, nxt: Assignment) -> None:
        event = Event("QueryChannelsAssigned", self._now(), nxt.to_body())
        self._log.append(
            self._topic, [Append(0, self._serde.encode(event), self._serde.key(event))]
        )
        with self.follower.changed:  # its own record comes back with the same content
            self.follower.assignment = nxt
            self.follower.changed.notify_all()
        owners = {p: o.node for p, o in sorted(nxt.owners.items())}
        log.info("querycoord: assignment v%d, owners %s", nxt.version, owners)
