"""Fencing of the data nodes' writes on the coord topic (several data nodes, issue 24).

datacoord divides the dml pchannels among the live data nodes and records each division as a
`DataChannelsAssigned` on coord; a data node stamps its `BinlogPathsSaved` and
`ChannelCheckpointed` with its registration (`writer`: name, epoch). Coord has one partition,
so every reader sees the same order, and decides the same way: an event of a pchannel whose
owner, as of the last assignment before it, is another registration is fenced (a node
declared dead, or that lost the pchannel, and wrote before it noticed). Its files are then
orphans, deleted by the next data node recovery. Events without a writer (one data node:
Standalone, a cluster with one data node, the Spark engine) are never fenced.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from vectorlog.schemas.serde import Event

#: a data node registration: (name, epoch)
Writer = tuple[str, int]
#: the DataChannelsAssigned role that fences (the index nodes' assignment only divides work)
FENCING_ROLE = "datanode"


def union_value(value: Any) -> Any:
    """Returns the value of a decoded Avro union (fastavro gives (record name, value))."""
    return value[1] if isinstance(value, tuple) else value


def writer_of(body: dict[str, Any]) -> Writer | None:
    """Returns the registration that wrote an event body (None: a single data node's)."""
    w = union_value(body.get("writer"))
    return None if not w else (str(w["node"]), int(w["epoch"]))


def writer_body(writer: Writer | None) -> dict[str, Any] | None:
    """Returns the `writer` field of a registration (None: no writer)."""
    return None if writer is None else {"node": writer[0], "epoch": writer[1]}


def saved_pchannel(body: dict[str, Any]) -> int | None:
    """Returns the pchannel of a BinlogPathsSaved body (from its positions; None: none)."""
    for key in ("end_position", "start_position"):
        pos = union_value(body.get(key))
        if pos:
            return int(pos["pchannel"])
    return None


@dataclass
class ChannelFence:
    """The last DataChannelsAssigned read (owners by pchannel, dead registrations), and the
    verdict on each data node write after it."""

    owners: dict[int, Writer] = field(default_factory=dict)
    dead: frozenset[Writer] = frozenset()
    version: int = 0
    role: str = FENCING_ROLE  # whose assignment this is

    def admit(self, event: Event) -> Event | None:
        """Returns `event` as readers apply it: a DataChannelsAssigned is folded in (and
        returned); a BinlogPathsSaved of a pchannel another registration owns is None; a
        ChannelCheckpointed keeps only the positions of pchannels its writer owns (None if
        it keeps none); any other event is returned as is."""
        if event.type == "DataChannelsAssigned":
            if event.body.get("role", FENCING_ROLE) == self.role:
                self.fold(event.body)
            return event
        if event.type not in ("BinlogPathsSaved", "ChannelCheckpointed"):
            return event
        writer = writer_of(event.body)
        if writer is None:
            return event
        if event.type == "BinlogPathsSaved":
            return event if self.owns(writer, saved_pchannel(event.body)) else None
        kept = [p for p in event.body["positions"] if self.owns(writer, p["pchannel"])]
        if not kept:
            return None
        return replace(event, body={**event.body, "positions": kept})

    def owns(self, writer: Writer, pchannel: int | None) -> bool:
        """Returns whether `writer` owns `pchannel` in the last assignment read."""
        return pchannel is not None and self.owners.get(pchannel) == writer

    def fold(self, body: dict[str, Any]) -> None:
        """Takes a DataChannelsAssigned body (of this fence's role: the caller checks) as the
        assignment in force (an older version than the one held is ignored)."""
        if body["version"] < self.version:
            return
        self.version = body["version"]
        self.owners = {o["pchannel"]: (o["node"], o["epoch"]) for o in body["owners"]}
        self.dead = frozenset((d["node"], d["epoch"]) for d in body["dead"])

    def to_body(self) -> dict[str, Any]:
        """Returns the DataChannelsAssigned body of the assignment held."""
        return {
            "version": self.version,
            "owners": [
                {"pchannel": p, "node": n, "epoch": e} for p, (n, e) in sorted(self.owners.items())
            ],
            "dead": [{"node": n, "epoch": e} for n, e in sorted(self.dead)],
            "role": self.role,
        }
