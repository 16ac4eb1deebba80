"""A segment as DataCoord knows it (seed 003, 004): its channel, state, capacity, the rows the
data node consumed, the allocations still outstanding, and its binlogs.

States use seed 003's numbering (None 0, NotExist 1, Growing 2, Sealed 3, Flushed 4,
Flushing 5) and Milvus's Dropped 6 (merged into another segment by a compaction); `RANK`
orders them by progress so a transition never goes back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any

import orjson


class SegmentState(enum.IntEnum):
    NONE = 0
    NOT_EXIST = 1
    GROWING = 2
    SEALED = 3
    FLUSHED = 4
    FLUSHING = 5
    DROPPED = 6

    @property
    def label(self) -> str:
        """Returns the name MilvusClient users see, e.g. "Growing"."""
        return {1: "NotExist", 5: "Flushing"}.get(self.value, self.name.title())


#: progress order: Growing -> Sealed -> Flushing -> Flushed -> Dropped
RANK = {
    SegmentState.NONE: 0,
    SegmentState.NOT_EXIST: 0,
    SegmentState.GROWING: 1,
    SegmentState.SEALED: 2,
    SegmentState.FLUSHING: 3,
    SegmentState.FLUSHED: 4,
    SegmentState.DROPPED: 5,
}


@dataclass
class Allocation:
    """Rows of a segment handed to an insert stamped `insert_ts`, outstanding until the data
    node consumed past insert_ts (its rows are then counted in `num_rows`) or `expire_ts`."""

    rows: int
    insert_ts: int
    expire_ts: int


@dataclass
class Segment:
    """One segment's record; stored as JSON under its key."""

    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    pchannel: int
    max_rows: int
    opened_ts: int
    state: SegmentState = SegmentState.GROWING
    num_rows: int = 0  # consumed by the data node
    allocations: dict[str, Allocation] = field(default_factory=dict)  # key: f"{insert_ts}"
    seal_ts: int = 0
    seal_reason: str = ""
    last_expire_ts: int = 0
    binlogs: dict[str, Any] = field(default_factory=dict)  # from BinlogPathsSaved
    start_position: dict[str, Any] | None = None
    dml_position: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        #: the rows of `allocations`, kept by `allocate`, `release` and `clear_allocations`
        self._allocated = sum(a.rows for a in self.allocations.values())

    @property
    def allocated(self) -> int:
        """Rows handed out and not yet consumed by the data node (kept as allocations come
        and go: summing them cost each insert the ~1 s of allocations outstanding)."""
        return self._allocated

    def allocate(self, allocation: Allocation) -> None:
        """Records an allocation (keyed by its insert ts: recording it again changes nothing)."""
        key = str(allocation.insert_ts)
        old = self.allocations.get(key)
        self.allocations[key] = allocation
        self._allocated += allocation.rows - (old.rows if old is not None else 0)

    def clear_allocations(self) -> None:
        """Drops every allocation (the segment was flushed: its rows are counted)."""
        self.allocations.clear()
        self._allocated = 0

    def advance(self, state: SegmentState) -> bool:
        """Moves to `state` if that is progress; returns whether it moved."""
        if RANK[state] <= RANK[self.state]:
            return False
        self.state = state
        return True

    def release(self, tick: int) -> None:
        """Drops the allocations the data node has consumed (or that expired) by `tick`."""
        self.allocations = {
            k: a for k, a in self.allocations.items() if a.insert_ts > tick and a.expire_ts > tick
        }
        self._allocated = sum(a.rows for a in self.allocations.values())

    def to_json(self) -> bytes:
        """Returns the record as JSON (orjson: a growing segment under single-row inserts
        holds ~1,000 allocations, re-stored on each allocation batch; json.dumps took ~1.2
        ms of the GIL for them, orjson ~0.25)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}  # asdict's deep copy: slow
        d["state"] = int(self.state)
        d["allocations"] = {k: vars(a) for k, a in self.allocations.items()}
        return orjson.dumps(d, option=orjson.OPT_NON_STR_KEYS)

    @classmethod
    def from_json(cls, raw: bytes) -> Segment:
        """Returns the segment stored as `raw` (by `to_json`, or by json.dumps before it)."""
        d = orjson.loads(raw)
        d["state"] = SegmentState(d["state"])
        d["allocations"] = {k: Allocation(**a) for k, a in d["allocations"].items()}
        return cls(**d)

    def info(self) -> dict[str, Any]:
        """Returns MilvusClient-shaped segment info (state as a name), plus `binlog_bytes`:
        the bytes of its insert, delta and stats binlogs (the console shows them)."""
        return {
            "segment_id": self.segment_id,
            "collection_id": self.collection_id,
            "partition_id": self.partition_id,
            "insert_channel": self.vchannel,
            "num_rows": self.num_rows,
            "state": self.state.label,
            "start_position": self.start_position,
            "dml_position": self.dml_position,
            "max_row_num": self.max_rows,
            "last_expire_time": self.last_expire_ts,
            "binlog_bytes": binlog_bytes(self.binlogs),
        }


def binlog_bytes(binlogs: dict[str, Any]) -> dict[str, int]:
    """Returns {"insert", "delta", "stats"}: the bytes of a segment's binlog files of each
    kind (0 before its first BinlogPathsSaved)."""

    def per_field(kind: str) -> int:
        fields = binlogs.get(kind, {}).values()
        return sum(log["size"] for logs in fields for log in logs.values())

    delta = sum(log["size"] for log in binlogs.get("delta_binlogs", {}).values())
    return {
        "insert": per_field("field_binlogs"),
        "delta": delta,
        "stats": per_field("stats_binlogs"),
    }
