"""The query coordinator's decisions, apart from the log: who should serve each dml pchannel
(`targets`), who serves its reads now (`owners`), which node epochs are dead, and which
pchannels no live node could load. Pure functions of the nodes' reports, so they are tested
without processes.

The unit moved is a dml pchannel with the Flushed segments written from it (a segment's
`pchannel` on coord): a query node's view of a pchannel is its Flushed segments loaded up to
the data node's checkpoint plus the dml after it, so a segment moves with the growing data
it continues. A pchannel's owner changes only once its new target reported it loaded and
caught up (`serving`): a read is routed to a node holding the whole pchannel, never to one
still loading it. With `replicas` R > 1 each pchannel has R copies (slots (pchannel,
replica)), each on another node: a read goes to one copy, and to another if its node fails.
It also carries the numeric ids GetReplicas answers with (querycoord.ids): each live
registration's node id and each loaded collection's replica ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from vectorlog.processors.querycoord.ids import NodeKey, number_nodes, number_replicas


@dataclass(frozen=True)
class Owner:
    """A query node registration (name, epoch, RPC address) as the server of a pchannel."""

    node: str
    epoch: int
    address: str = ""

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.epoch)


@dataclass
class Report:
    """A query node's latest heartbeat: what it serves and failed to load, when it came."""

    node: str
    epoch: int
    address: str
    serving: frozenset[int] = frozenset()
    failed: dict[int, str] = field(default_factory=dict)  # pchannel -> reason
    seen: float = 0.0  # monotonic time the coordinator read it

    @property
    def owner(self) -> Owner:
        return Owner(self.node, self.epoch, self.address)


#: a copy of a pchannel: (pchannel, replica)
Slot = tuple[int, int]


@dataclass(frozen=True)
class Assignment:
    """One QueryChannelsAssigned: the whole state (each event replaces the previous one)."""

    version: int = 0
    targets: dict[Slot, Owner] = field(default_factory=dict)
    owners: dict[Slot, Owner] = field(default_factory=dict)
    dead: frozenset[tuple[str, int]] = frozenset()
    failed: dict[int, str] = field(default_factory=dict)  # pchannel -> why nowhere loads it
    replicas: int = 1
    node_ids: dict[NodeKey, int] = field(default_factory=dict)  # live registrations' ids
    next_node_id: int = 1
    collections: dict[int, tuple[int, ...]] = field(default_factory=dict)  # replica ids
    next_replica_id: int = 1

    def copies(self, pchannel: int) -> list[Owner]:
        """Returns the owners of a pchannel's copies, by replica."""
        return [o for (p, _), o in sorted(self.owners.items()) if p == pchannel]

    def same_as(self, other: Assignment) -> bool:
        """Returns whether both say the same (versions aside)."""
        return replace(self, version=0) == replace(other, version=0)

    def to_body(self) -> dict[str, Any]:
        """Returns the QueryChannelsAssigned body."""

        def owners(by: dict[Slot, Owner]) -> list[dict[str, Any]]:
            return [
                {
                    "pchannel": p,
                    "replica": r,
                    "node": o.node,
                    "epoch": o.epoch,
                    "address": o.address,
                }
                for (p, r), o in sorted(by.items())
            ]

        return {
            "version": self.version,
            "replicas": self.replicas,
            "targets": owners(self.targets),
            "owners": owners(self.owners),
            "dead": [{"node": n, "epoch": e} for n, e in sorted(self.dead)],
            "failed": [
                {"pchannel": p, "node": "", "reason": r} for p, r in sorted(self.failed.items())
            ],
            "nodes": [
                {"node": n, "epoch": e, "node_id": i} for (n, e), i in sorted(self.node_ids.items())
            ],
            "next_node_id": self.next_node_id,
            "collections": [
                {"collection_id": c, "replica_ids": list(ids)}
                for c, ids in sorted(self.collections.items())
            ],
            "next_replica_id": self.next_replica_id,
        }

    @staticmethod
    def from_body(b: dict[str, Any]) -> Assignment:
        """Returns the assignment a QueryChannelsAssigned body records."""

        def owners(rows: Iterable[dict[str, Any]]) -> dict[Slot, Owner]:
            return {
                (r["pchannel"], r["replica"]): Owner(r["node"], r["epoch"], r["address"])
                for r in rows
            }

        return Assignment(
            b["version"],
            owners(b["targets"]),
            owners(b["owners"]),
            frozenset((d["node"], d["epoch"]) for d in b["dead"]),
            {f["pchannel"]: f["reason"] for f in b["failed"]},
            b["replicas"],
            {(n["node"], n["epoch"]): n["node_id"] for n in b.get("nodes", ())},
            b.get("next_node_id", 1),
            {c["collection_id"]: tuple(c["replica_ids"]) for c in b.get("collections", ())},
            b.get("next_replica_id", 1),
        )


#: how many dead epochs an assignment keeps (a node declared dead long ago has re-registered)
KEEP_DEAD = 64


def advance(
    current: Assignment,
    pchannels: int,
    live: list[Report],
    dead: Iterable[Report],
    replicas: int | None = None,
    wanted: dict[int, int] | None = None,
) -> Assignment:
    """Returns the next assignment: `dead` reports' epochs declared dead, every copy of
    every pchannel (`replicas` of each; None: as `current`) targeted at a live node (each
    copy of a pchannel on another node, balanced, kept where it is when fair), and each
    owner moved to its target once the target reports serving it (kept on a live old owner
    until then, none if the old owner is dead: reads wait, or go to another copy). Each
    live registration has a node id, each collection of `wanted` (collection id ->
    replica_number; None: as `current`) its replica ids (querycoord.ids)."""
    copies = current.replicas if replicas is None else replicas
    gone = {r.owner.key for r in dead}
    dead_keys = frozenset(sorted(current.dead | gone, key=lambda k: k[1])[-KEEP_DEAD:])
    slots = [(p, r) for p in range(pchannels) for r in range(copies)]
    targets, failed = balance(slots, live, current.targets)
    by_key = {r.owner.key: r for r in live}
    owners: dict[Slot, Owner] = {}
    for slot in slots:
        t = targets.get(slot)
        if t is not None and slot[0] in by_key[t.key].serving:
            owners[slot] = by_key[t.key].owner
            continue
        old = current.owners.get(slot)
        if old is not None and old.key in by_key and slot[0] in by_key[old.key].serving:
            owners[slot] = old
    seen: set[tuple[int, tuple[str, int]]] = set()
    for slot, o in sorted(owners.items()):  # one copy of a pchannel per node
        if (slot[0], o.key) in seen:
            del owners[slot]
        seen.add((slot[0], o.key))
    node_ids, next_node = number_nodes(current.node_ids, current.next_node_id, by_key)
    loaded = {c: len(ids) for c, ids in current.collections.items()} if wanted is None else wanted
    replica_ids, next_replica = number_replicas(
        current.collections, current.next_replica_id, loaded
    )
    nxt = Assignment(
        current.version, targets, owners, dead_keys, failed, copies,
        node_ids, next_node, replica_ids, next_replica,
    )  # fmt: skip
    return current if nxt.same_as(current) else replace(nxt, version=current.version + 1)


def balance(
    slots: list[Slot], live: list[Report], targets: dict[Slot, Owner]
) -> tuple[dict[Slot, Owner], dict[int, str]]:
    """Returns (the target of each slot, the pchannels every live node failed to load with
    a reason): a target on a live node that did not fail it, holding no other copy of that
    pchannel, is kept; the others go to the least loaded node that did not fail them and
    holds no copy of the pchannel (none such: the slot stays unassigned); then one at a time
    from the most to the least loaded node while they differ by more than one. No live
    node: no targets."""
    nodes = sorted(live, key=lambda r: r.node)
    if not nodes:
        return {}, {}
    by_key = {r.owner.key: r for r in nodes}
    load: dict[tuple[str, int], list[Slot]] = {r.owner.key: [] for r in nodes}
    failed: dict[int, str] = {}

    def holds(key: tuple[str, int], p: int) -> bool:
        return any(q == p for q, _ in load[key])

    placed = set()
    for slot in slots:  # first the targets that stay
        p, t = slot[0], targets.get(slot)
        keep = t is not None and t.key in by_key and p not in by_key[t.key].failed
        if keep and t is not None and not holds(t.key, p):
            load[t.key].append(slot)
            placed.add(slot)
    for slot in slots:
        p = slot[0]
        if slot in placed:
            continue
        able = [r for r in nodes if p not in r.failed]
        if not able:
            failed[p] = "; ".join(f"{r.node}: {r.failed[p]}" for r in nodes)
            able = nodes
        free = [r for r in able if not holds(r.owner.key, p)]
        if free:
            least = min(free, key=lambda r: (len(load[r.owner.key]), r.node))
            load[least.owner.key].append(slot)
    _even_out(load, by_key)
    return {slot: by_key[k].owner for k, ss in load.items() for slot in ss}, failed


def _even_out(
    load: dict[tuple[str, int], list[Slot]], by_key: dict[tuple[str, int], Report]
) -> None:
    """Moves slots from the most to the least loaded node until they differ by <= 1 (a
    slot only to a node that did not fail its pchannel and holds no copy of it)."""
    while True:
        most = max(load, key=lambda k: (len(load[k]), k))
        least = min(load, key=lambda k: (len(load[k]), k))
        if len(load[most]) - len(load[least]) <= 1:
            return
        held = {p for p, _ in load[least]}
        movable = [s for s in load[most] if s[0] not in by_key[least].failed and s[0] not in held]
        if not movable:
            return
        s = max(movable)
        load[most].remove(s)
        load[least].append(s)
