"""Records of the lease topic and the state they add up to (issue 7, item 3; issue 23: one
lease per role, e.g. rootcoord and datacoord, on the same topic).

Every reader that applies the same records of a role in log order agrees on its holder: a
decision uses only what the records say (their wall times, not the reader's clock).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

OPS = frozenset({"claim", "renew", "release"})


@dataclass(frozen=True)
class LeaseRecord:
    """One record: a claim, a renewal (`epoch`: the offset of the claim it holds under) or a
    release. `ttl_ms` None: the lease never expires (the log itself is exclusive, and such a
    claim is `force`d). `evicts`: a holder on this host whose process is gone. `role`: whose
    lease it is (records without one are rootcoord's); `address`: where the holder serves its
    RPCs, if it says."""

    op: str
    instance: str
    host: str
    pid: int
    at: int  # wall clock, Unix ms, when the record was written
    ttl_ms: int | None
    pid_start: int | None = None  # the process's start time (Linux clock ticks), if known
    epoch: int | None = None
    evicts: str | None = None
    force: bool = False
    role: str = "rootcoord"
    address: str | None = None

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> LeaseRecord | None:
        """Returns the record in `raw`, or None if it is not one (such bytes are ignored)."""
        try:
            rec = cls(**json.loads(raw))
        except (ValueError, TypeError, RecursionError):
            return None
        return rec if rec.op in OPS and _well_typed(rec) else None

    def describe(self) -> str:
        return f"host {self.host} pid {self.pid} (instance {self.instance})"


def _well_typed(rec: LeaseRecord) -> bool:
    kinds = {"op": str, "instance": str, "host": str, "pid": int, "at": int, "force": bool}
    kinds["role"] = str
    optional = {"ttl_ms": int, "pid_start": int, "epoch": int, "evicts": str, "address": str}
    for f in fields(rec):
        value = getattr(rec, f.name)
        if f.name in optional and value is None:
            continue
        kind = kinds.get(f.name) or optional[f.name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return False
    return True


@dataclass(frozen=True)
class Holder:
    """Who holds the lease: its latest claim or renewal, and the epoch it holds under."""

    record: LeaseRecord
    epoch: int

    def expired_at(self, at_ms: int) -> bool:
        """Returns whether its lease expired before wall time `at_ms`."""
        ttl = self.record.ttl_ms
        return ttl is not None and self.record.at + ttl < at_ms

    def describe(self, now_ms: int) -> str:
        ttl = self.record.ttl_ms
        last = f"renewed {(now_ms - self.record.at) / 1000:.1f}s ago"
        return f"{self.record.describe()}, {last}, lease " + (
            f"ttl {ttl / 1000:g}s" if ttl is not None else "without expiry"
        )


class LeaseState:
    """The holder after the records applied so far, in log order.

    A claim wins if nobody holds the lease, the holder's lease expired before the claim was
    written, it evicts the holder (same host, process gone) or it is forced; its offset is
    its epoch. A renewal counts if it is the holder's (same instance and epoch) or under an
    epoch newer than any seen (its claim was before the records read); a release ends the
    holder of its epoch or older. Anything else is void."""

    def __init__(self) -> None:
        self.holder: Holder | None = None
        self.top_epoch = -1

    def apply(self, rec: LeaseRecord, offset: int) -> None:
        h = self.holder
        if rec.op == "claim":
            if h is None or rec.force or h.expired_at(rec.at) or _evicts(rec, h):
                self.holder, self.top_epoch = Holder(rec, offset), offset
        elif rec.epoch is None:
            return
        elif rec.op == "renew":
            ours = h is not None and (h.epoch, h.record.instance) == (rec.epoch, rec.instance)
            if ours or rec.epoch > self.top_epoch:
                self.holder, self.top_epoch = Holder(rec, rec.epoch), max(self.top_epoch, rec.epoch)
        else:  # release
            self.top_epoch = max(self.top_epoch, rec.epoch)
            if h is not None and h.epoch <= rec.epoch:
                self.holder = None


def _evicts(claim: LeaseRecord, holder: Holder) -> bool:
    return claim.evicts == holder.record.instance and claim.host == holder.record.host


def process_start(pid: int) -> int | None:
    """Returns the start time of process `pid` (clock ticks after boot), None if unknown."""
    info = _proc_stat(pid)
    return None if info is None else info[1]


def process_gone(pid: int, start: int | None) -> bool:
    """Returns whether process `pid` of this host, started at `start`, no longer runs (a
    zombie, or another process that reused the pid, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists, run by another user
    info = _proc_stat(pid)
    if info is None:
        return False
    state, started = info
    return state == "Z" or (start is not None and started != start)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """Returns (state, start time) from /proc/<pid>/stat, None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        rest = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        return rest[0], int(rest[19])
    except (OSError, ValueError, IndexError):
        return None
