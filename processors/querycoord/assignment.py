"""The query coordinator's decisions, apart from the log: who should serve each dml pchannel
(`targets`), who serves its reads now (`owners`), which node epochs are dead, and which
pchannels no live node could load. Pure functions of the nodes' reports, so they are tested
without processes.

The unit moved is a dml pchannel with the Flushed segments written from it (a segment's
`pchannel` on coord): a query node's view of a pchannel is its Flushed segments loaded up to
the data node's checkpoint plus the dml after it, so a segment moves with the growing data
it continues. A pchannel's owner changes only once its new target reported it loaded and
caught up (`serving`): a read is routed to a node holding the whole pchannel, never to one
still loading it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any


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


@dataclass(frozen=True)
class Assignment:
    """One QueryChannelsAssigned: the whole state (each event replaces the previous one)."""

    version: int = 0
    targets: dict[int, Owner] = field(default_factory=dict)
    owners: dict[int, Owner] = field(default_factory=dict)
    dead: frozenset[tuple[str, int]] = frozenset()
    failed: dict[int, str] = field(default_factory=dict)  # pchannel -> why nowhere loads it

    def same_as(self, other: Assignment) -> bool:
        """Returns whether both say the same (versions aside)."""
        return replace(self, version=0) == replace(other, version=0)

    def to_body(self) -> dict[str, Any]:
        """Returns the QueryChannelsAssigned body."""

        def owners(by: dict[int, Owner]) -> list[dict[str, Any]]:
            return [
                {"pchannel": p, "node": o.node, "epoch": o.epoch, "address": o.address}
                for p, o in sorted(by.items())
            ]

        return {
            "version": self.version,
            "targets": owners(self.targets),
            "owners": owners(self.owners),
            "dead": [{"node": n, "epoch": e} for n, e in sorted(self.dead)],
            "failed": [
                {"pchannel": p, "node": "", "reason": r} for p, r in sorted(self.failed.items())
            ],
        }

    @staticmethod
    def from_body(b: dict[str, Any]) -> Assignment:
        """Returns the assignment a QueryChannelsAssigned body records."""

        def owners(rows: Iterable[dict[str, Any]]) -> dict[int, Owner]:
            return {r["pchannel"]: Owner(r["node"], r["epoch"], r["address"]) for r in rows}

        return Assignment(
            b["version"],
            owners(b["targets"]),
            owners(b["owners"]),
            frozenset((d["node"], d["epoch"]) for d in b["dead"]),
            {f["pchannel"]: f["reason"] for f in b["failed"]},
        )


#: how many dead epochs an assignment keeps (a node declared dead long ago has re-registered)
KEEP_DEAD = 64


def advance(
    current: Assignment, pchannels: int, live: list[Report], dead: Iterable[Report]
) -> Assignment:
    """Returns the next assignment: `dead` reports' epochs declared dead, every pchannel
    targeted at a live node (balanced, kept where it is when fair), and each owner moved to
    its target once the target reports serving it (kept on a live old owner until then,
    none if the old owner is dead: reads wait)."""
    gone = {r.owner.key for r in dead}
    dead_keys = frozenset(sorted(current.dead | gone, key=lambda k: k[1])[-KEEP_DEAD:])
    targets, failed = balance(pchannels, live, current.targets)
    by_key = {r.owner.key: r for r in live}
    owners: dict[int, Owner] = {}
    for p in range(pchannels):
        t = targets.get(p)
        if t is not None and p in by_key[t.key].serving:
            owners[p] = by_key[t.key].owner
            continue
        old = current.owners.get(p)
        if old is not None and old.key in by_key and p in by_key[old.key].serving:
            owners[p] = old
    nxt = Assignment(current.version, targets, owners, dead_keys, failed)
    return current if nxt.same_as(current) else replace(nxt, version=current.version + 1)


def balance(
    pchannels: int, live: list[Report], targets: dict[int, Owner]
) -> tuple[dict[int, Owner], dict[int, str]]:
    """Returns (the target of each pchannel, the pchannels every live node failed to load
    with a reason): a target on a live node that did not fail it is kept; the others go to
    the least loaded node that did not fail them; then one at a time from the most to the
    least loaded node while they differ by more than one. No live node: no targets."""
    nodes = sorted(live, key=lambda r: r.node)
    if not nodes:
        return {}, {}
    by_key = {r.owner.key: r for r in nodes}
    load: dict[tuple[str, int], list[int]] = {r.owner.key: [] for r in nodes}
    failed: dict[int, str] = {}
    for p in range(pchannels):
        t = targets.get(p)
        if t is not None and t.key in by_key and p not in by_key[t.key].failed:
            load[t.key].append(p)
            continue
        able = [r for r in nodes if p not in r.failed]
        if not able:
            failed[p] = "; ".join(f"{r.node}: {r.failed[p]}" for r in nodes)
            able = nodes
        least = min(able, key=lambda r: (len(load[r.owner.key]), r.node))
        load[least.owner.key].append(p)
    _even_out(load, by_key)
    return {p: by_key[k].owner for k, ps in load.items() for p in ps}, failed


def _even_out(
    load: dict[tuple[str, int], list[int]], by_key: dict[tuple[str, int], Report]
) -> None:
    """Moves pchannels from the most to the least loaded node until they differ by <= 1
    (a pchannel is only moved to a node that did not fail it)."""
    while True:
        most = max(load, key=lambda k: (len(load[k]), k))
        least = min(load, key=lambda k: (len(load[k]), k))
        if len(load[most]) - len(load[least]) <= 1:
            return
        movable = [p for p in load[most] if p not in by_key[least].failed]
        if not movable:
            return
        p = max(movable)
        load[most].remove(p)
        load[least].append(p)
