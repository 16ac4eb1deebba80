"""A query node of the scale-out (`vectorlog run querynode` in cluster mode): it serves the
dml pchannels the query coordinator targets at it, one `QueryNode` per pchannel (its Flushed
segments loaded from binlogs up to the data node's checkpoint, then its dml), and reports
itself on the coord topic every heartbeat with its epoch and the pchannels it serves.

A pchannel is reported served only once its QueryNode has recovered and caught up to a
timestamp taken after it started; it is released only once another node owns its reads.
A node restarted under the same name starts loading the pchannels the assignment still
targets at its older epoch as soon as it read the assignment, before the coordinator
targets them at its new epoch (which it does at once: querycoord), so its restart loads
while it registers; one the coordinator gives another node is released at the next
reconcile. A
pchannel that fails to load is reported with the reason (the coordinator tries another
node, and reports it when none can). Reads (`read`, RPC QueryShard.ShardRead) answer per
pchannel with this node's name and epoch; a pchannel not served, or any read once this
epoch was declared dead, raises NotServing (the node then registers again with a new epoch
and loads from scratch: it never serves an ownership it lost).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from vectorlog.core.errors import CollectionNotFound, InvalidArgument
from vectorlog.processors.proxy.merge import merge_results
from vectorlog.processors.querycoord.assignment import Owner
from vectorlog.processors.querycoord.errors import NotServing
from vectorlog.processors.querycoord.querycoord import HEARTBEAT_S
from vectorlog.processors.querycoord.routing import CoordFollower
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.runners.search_slots import SearchSlots
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.snapshots import Blobs
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger("vectorlog.run")
#: how long a pchannel may take to load and catch up before it is reported failed (seconds)
LOAD_TIMEOUT_S = 600.0
#: the reads a ShardRead may run on a pchannel's QueryNode
OPS = frozenset({"search", "query", "get", "count", "tsafe", "wait_tsafe"})
#: how often the node looks for a new assignment or a pchannel loaded (seconds): it starts
#: loading, and reports a pchannel served, that soon rather than at its next heartbeat
PROMPT_S = 0.1


class ShardNode:
    """The pchannels this query node serves, loads and reports (see the module docstring).

    `make(pchannel)` returns a recovered, unstarted QueryNode of one pchannel; `allocate()`
    a fresh timestamp of the oracle (epochs, catch-up targets); `stamp()` (default
    `allocate`) one for its heartbeats, which need no fresh one; `address` where this node's
    RPC listens (reported, so proxies can call it)."""

    def __init__(
        self,
        name: str,
        log_: Log,
        topics: Topics,
        serdes: Serdes,
        make: Callable[[int], QueryNode],
        allocate: Callable[[], int],
        blobs: Blobs | None = None,
        search_threads: int = 0,
        stamp: Callable[[], int] | None = None,
    ) -> None:
        """`blobs`: where coord's snapshots are (its follower starts from the newest);
        `search_threads`: at most this many pchannel reads run at once (0: no limit)."""
        self.name, self._log, self._topic = name, log_, topics.coord
        self._serde = serdes.for_topic(topics.coord)
        self._make, self._allocate = make, allocate
        self._stamp = stamp or allocate
        self.address = ""
        self.epoch = allocate()
        self.instances: dict[int, QueryNode] = {}
        self.loading: dict[int, threading.Thread] = {}
        self.failed: dict[int, str] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._slots = SearchSlots(search_threads)
        self._loaded = threading.Event()  # a pchannel loaded since the last report
        self._next_beat, self._reconciled = 0.0, -1  # the assignment version reconciled
        self.follower = CoordFollower(
            log_,
            self._topic,
            self._serde,
            "querynode-assignments",
            None,
            PROMPT_S,
            self._prompt,
            blobs=blobs,
        )

    def start(self) -> None:
        log.info("querynode %s: registered with epoch %d", self.name, self.epoch)
        self.follower.start()

    def stop(self) -> None:
        self._closing.set()
        self.follower.stop()

    def close(self) -> None:
        """Stops following and reporting, and closes every pchannel's QueryNode."""
        self.stop()
        for t in list(self.loading.values()):
            t.join(timeout=30)
        with self._lock:
            nodes, self.instances = list(self.instances.values()), {}
        for qn in nodes:
            qn.close()

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Returns {(topic, partition): next offset}: each served pchannel's dml offset, and
        the least coord offset its index loaders read next (for /metrics)."""
        with self._lock:
            nodes = list(self.instances.values())
        out: dict[tuple[str, int], int] = {}
        for qn in nodes:
            for (topic, part), nxt in qn.next_offsets().items():
                if topic == self._topic:
                    out[(topic, part)] = min(out.get((topic, part), nxt), nxt)
                elif part in qn.pchannels:
                    out[(topic, part)] = nxt
        return out

    # -- heartbeat and assignment ---------------------------------------------------------
    def _prompt(self) -> None:
        """Beats every HEARTBEAT_S, and at once when a pchannel was loaded; in between,
        reconciles as soon as a new assignment was read."""
        now = time.monotonic()
        if now >= self._next_beat or self._loaded.is_set():
            self._loaded.clear()
            self._next_beat = now + HEARTBEAT_S
            self.beat()
        elif self.follower.caught_up.is_set() and self._behind():
            self.reconcile()

    def _behind(self) -> bool:
        """Returns whether an assignment newer than the one reconciled was read."""
        return self.follower.assignment.version != self._reconciled

    def beat(self) -> None:
        """Follows the assignment (loads, releases, re-registers), then reports."""
        if self.follower.caught_up.is_set():
            self.reconcile()
        with self._lock:
            serving, failed = sorted(self.instances), dict(self.failed)
        body = {
            "node": self.name,
            "epoch": self.epoch,
            "address": self.address,
            "serving": serving,
            "failed": [{"pchannel": p, "node": self.name, "reason": r} for p, r in failed.items()],
        }
        event = Event("QueryNodeReported", self._stamp(), body)
        self._log.append(
            self._topic, [Append(0, self._serde.encode(event), self._serde.key(event))]
        )

    @property
    def me(self) -> Owner:
        return Owner(self.name, self.epoch, self.address)

    def reconcile(self) -> None:
        """Starts loading the pchannels targeted here, releases those neither targeted nor
        owned here; if this epoch was declared dead, drops everything and registers again."""
        a = self.follower.assignment
        self._reconciled = a.version
        if (self.name, self.epoch) in a.dead:
            self._reregister()
            return
        mine = {p for (p, _), o in a.targets.items() if o.key == self.me.key}
        if not mine:  # not targeted yet: what this node's older epoch was, it most likely gets
            mine = {p for (p, _), o in a.targets.items() if self._earlier_me(o)}
        owned = {p for (p, _), o in a.owners.items() if o.key == self.me.key}
        with self._lock:
            start = sorted(mine - set(self.instances) - set(self.loading) - set(self.failed))
            if start:
                log.info(
                    "querynode %s: assignment v%d: loading pchannels %s",
                    self.name,
                    a.version,
                    start,
                )
            for p in start:  # not those failed: reported, the coordinator moves them
                t = threading.Thread(target=self._load, args=(p,), name=f"load-{p}", daemon=True)
                self.loading[p] = t
                t.start()
            released = [self.instances.pop(p) for p in set(self.instances) - mine - owned]
        for qn in released:
            log.info("querynode %s: released pchannel %s", self.name, sorted(qn.pchannels))
            qn.close()

    def _earlier_me(self, o: Owner) -> bool:
        """Whether `o` is this node before its last start (its name, an older epoch)."""
        return o.node == self.name and o.epoch < self.epoch

    def _reregister(self) -> None:
        with self._lock:
            nodes, self.instances, self.failed = list(self.instances.values()), {}, {}
        for qn in nodes:
            qn.close()
        old, self.epoch = self.epoch, self._allocate()
        log.warning(
            "querynode %s: epoch %d was declared dead; registered again with epoch %d",
            self.name,
            old,
            self.epoch,
        )

    def _load(self, p: int) -> None:
        epoch, qn, t0 = self.epoch, None, time.monotonic()
        try:
            qn = self._make(p)
            t1 = time.monotonic()
            qn.start()
            qn.wait_tsafe([p], self._allocate(), LOAD_TIMEOUT_S)  # caught up to now
            t2 = time.monotonic()
            with self._lock:
                if epoch == self.epoch and not self._closing.is_set():
                    self.instances[p], qn = qn, None
                    self._loaded.set()  # report it now, not at the next heartbeat
                    log.info(
                        "querynode %s: serving pchannel %d (segments loaded in %.2f s, dml "
                        "caught up in %.2f s)", self.name, p, t1 - t0, t2 - t1,
                    )  # fmt: skip
        except Exception as exc:
            log.error("querynode %s: cannot load pchannel %d: %s", self.name, p, exc)
            with self._lock:
                self.failed[p] = f"{type(exc).__name__}: {exc}"
        finally:
            if qn is not None:
                qn.close()
            with self._lock:
                self.loading.pop(p, None)

    # -- reads (QueryShard.ShardRead) -------------------------------------------------------
    def read(
        self, op: str, pchannels: list[int], ts: int, timeout: float, args: dict[str, Any]
    ) -> dict[str, Any]:
        """Returns {"node", "epoch", "results": [[pchannel, found, result], ...], "tsafes":
        [[pchannel, its tsafe after the read], ...]}: `op` (a QueryNodeService read) with
        `args` on each pchannel's QueryNode, after waiting for its tsafe >= ts; `found` is
        False where the collection is not on that pchannel (its QueryNode raised
        CollectionNotFound: the proxy raises it if no pchannel has it); a search's found
        results are merged into one (`_premerged`).
        Raises NotServing (a pchannel not served here, or this epoch dead),
        ConsistencyTimeout, InvalidArgument (an unknown op), what the read raises."""
        if op not in OPS:
            raise InvalidArgument(f"unknown shard read {op!r}")
        epoch = self.epoch
        with self._lock:
            nodes = {p: self.instances.get(p) for p in pchannels}
        missing = sorted(p for p, qn in nodes.items() if qn is None)
        if missing or (self.name, epoch) in self.follower.assignment.dead:
            raise NotServing(self.name, epoch, missing or sorted(pchannels))
        results = [
            [p, *_read(qn, op, p, ts, timeout, args, self._slots)] for p, qn in nodes.items()
        ]
        if op == "search":
            results = _premerged(results, args)
        tsafes = [[p, qn.tsafe([p])] for p, qn in nodes.items() if qn is not None]
        return {"node": self.name, "epoch": epoch, "results": results, "tsafes": tsafes}


def _premerged(results: list[list[Any]], args: dict[str, Any]) -> list[list[Any]]:
    """Returns a search's [pchannel, found, result] with this node's found results merged
    into the first found one's place (the others' result None: merged there), as Milvus's
    shard delegator reduces before the proxy does: the answer carries one result to encode
    and decode instead of one per pchannel, and the proxy merges one per node. The merge
    is the proxy's own (`args` asks each pchannel for limit + offset from 0, so its top
    `limit` of the node's are among the overall ones); grouped searches are left to it."""
    found = [r for _, ok, r in results if ok]
    if len(found) < 2 or args.get("group_by") is not None:
        return results
    merged = merge_results(found, int(args["limit"]), 0, args.get("metric"))
    first = next(i for i, (_, ok, _) in enumerate(results) if ok)
    return [[p, ok, merged if i == first else None] for i, (p, ok, _) in enumerate(results)]


def _read(
    qn: QueryNode | None,
    op: str,
    p: int,
    ts: int,
    timeout: float,
    args: dict[str, Any],
    slots: SearchSlots,
) -> tuple[bool, Any]:
    """Returns (found, the result) of one pchannel's read (see ShardNode.read); the read
    itself (not its wait for tsafe) runs holding one of `slots`."""
    assert qn is not None
    if op == "tsafe":
        return True, qn.tsafe([p])
    qn.wait_tsafe([p], ts, timeout)
    if op == "wait_tsafe":
        return True, None
    try:
        with slots:
            return True, getattr(qn, op)(**args)
    except CollectionNotFound:
        return False, None
