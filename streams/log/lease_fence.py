"""Read-side fencing of a leader's appends (issue 23): a record appended under a lease carries
its role and epoch in a header, and a reader hides a record of an older epoch of a role than
one before it on that partition.

Why on the read side: an append the old leader had handed to its producer (librdkafka's queue)
before it was paused is delivered when it resumes, after a standby took over; the lease check
of `streams.log.fenced` ran before the pause and cannot stop it. Kafka's own zombie fencing
(a transactional.id per role, the new leader's init_transactions bumping the producer epoch)
does not work on the test broker: Tansu shows a transaction the zombie left open to
read_committed consumers even after a new producer of its transactional.id committed, and
the embedded log has no transactions. A header works on both backends and any broker.

The new leader appends a takeover marker (`takeover_marker`) to each partition of the topics
it writes before it recovers from them: what the old epoch landed before the marker, the new
leader recovers; what lands after it is hidden. A hidden record is returned in its place
(offsets stay dense, so a read up to an offset ends) as a TimeTick with ts 0, which every
consumer ignores (as `streams.scan`'s end marker), naming the lease and epoch it was appended
under.

Which records a reader hides is a function of the log alone: a record of (role, e) at offset o
is hidden iff a record of role with an epoch above e lies before o on its partition (the
marker is the first of its epoch). The fence state at a position (`FenceState`: per
partition, the newest epoch of each role before it) is therefore the same for every reader
there. A reader learns it from what it reads; one that starts mid-log is given the state at
its start (`seeded`). For coord and ddl, the topics with markers, `streams.snapshots` keeps
each snapshot's state in the snapshot (`fence_records`: TimeTicks with ts 0 in the
TimeTick's own lease and epoch fields) and works out the state at any offset from the newest
snapshot at or below it and the records from there (`snapshots.fence_at`: at most one
snapshot interval is read). So a reader that starts past the marker, from a snapshot, from a
processor's stored position or in a processor's recovery, hides a late record of an older
epoch as one that read the marker does. That state is derived, never stored with the
positions: a reader started where no processor stored anything (a snapshot's offset, the end
of a recovery read) gets it all the same. A reader of the dml topic (the leaders' time ticks)
keeps the view of what it read since its start; streams.msgstream drops an older epoch's
ticks from the minimum on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar, runtime_checkable

from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Append, Headers, Record

#: the header of a record appended under a lease: b"ROLE:EPOCH" (one per lease held)
LEASE_HEADER = "vectorlog-lease"
#: the source of a takeover marker and of a hidden record's stand-in
TAKEOVER_SOURCE = "lease-takeover"
FENCED_SOURCE = "lease-fenced"
#: the source of the record a snapshot keeps its fence state in (`fence_record`)
FENCE_STATE_SOURCE = "lease-fence-state"

#: per partition, the newest epoch of each role among the records before a position
FenceState = dict[int, dict[str, int]]


def lease_headers(leases: list[tuple[str, int]]) -> Headers:
    """Returns the headers naming each (role, epoch) an append is made under."""
    return tuple((LEASE_HEADER, f"{role}:{epoch}".encode()) for role, epoch in leases)


def leases_of(rec: Record) -> list[tuple[str, int]]:
    """Returns the (role, epoch) pairs `rec` was appended under (none: not under a lease)."""
    out = []
    for name, value in rec.headers:
        if name == LEASE_HEADER:
            role, _, epoch = value.decode(errors="replace").rpartition(":")
            if role and epoch.isdigit():
                out.append((role, int(epoch)))
    return out


def marker(source: str, body: dict[str, object] | None = None) -> bytes:
    """Returns a TimeTick with ts 0 from `source` (it promises nothing; consumers ignore it)."""
    return EventSerde().encode(Event("TimeTick", 0, {"source": source, **(body or {})}))


def takeover_marker(partitions: int) -> list[Append]:
    """Returns one takeover marker per partition, to append through the new leader's lease."""
    return [Append(p, marker(TAKEOVER_SOURCE)) for p in range(partitions)]


def fold(state: FenceState, records: Iterable[Record]) -> FenceState:
    """Returns `state` (changed in place) with the leases of `records` taken in."""
    for rec in records:
        for role, epoch in leases_of(rec) if rec.headers else ():
            newest = state.setdefault(rec.partition, {})
            newest[role] = max(epoch, newest.get(role, -1))
    return state


def fence_records(state: FenceState, partition: int = 0) -> list[bytes]:
    """Returns TimeTicks with ts 0 (consumers ignore them) that keep the newest epoch of each
    role in `state` of `partition`, one per role."""
    roles = sorted(state.get(partition, {}).items())
    return [marker(FENCE_STATE_SOURCE, {"lease": role, "epoch": epoch}) for role, epoch in roles]


def kept_state(values: Iterable[bytes], partition: int = 0) -> FenceState:
    """Returns the state the `fence_records` that `values` start with keep (empty: none)."""
    roles: dict[str, int] = {}
    for value in values:
        kept = kept_lease(value)
        if kept is None:
            break
        roles[kept[0]] = max(kept[1], roles.get(kept[0], -1))
    return {partition: roles} if roles else {}


def kept_lease(value: bytes) -> tuple[str, int] | None:
    """Returns the (role, epoch) a `fence_records` record keeps, None if `value` is not one."""
    try:
        event = EventSerde().decode(value)
    except (MalformedEvent, ValueError, TypeError, KeyError):
        return None
    if event.type != "TimeTick" or event.body.get("source") != FENCE_STATE_SOURCE:
        return None
    return str(event.body.get("lease", "")), int(event.body.get("epoch", 0))


class LeaseFence:
    """One reader's view: per partition, the newest epoch read (or seeded) of each role."""

    def __init__(self) -> None:
        self._newest: FenceState = {}

    def seed(self, state: FenceState) -> None:
        """Takes in `state`, the fence state at the positions the reader starts from."""
        for p, roles in state.items():
            newest = self._newest.setdefault(p, {})
            for role, epoch in roles.items():
                newest[role] = max(epoch, newest.get(role, -1))

    def admit(self, records: list[Record]) -> list[Record]:
        """Returns `records`, each one of an older epoch than one read before it on its
        partition replaced by its stand-in."""
        return [self._admit(r) if r.headers else r for r in records]

    def _admit(self, rec: Record) -> Record:
        newest = self._newest.setdefault(rec.partition, {})
        stale = None
        for role, epoch in leases_of(rec):
            if epoch < newest.get(role, -1):
                stale = (role, epoch)
            else:
                newest[role] = epoch
        if stale is None:
            return rec
        body = {"lease": stale[0], "epoch": stale[1]}
        return Record(rec.topic, rec.partition, rec.offset, marker(FENCED_SOURCE, body))

    def forget(self, partition: int) -> None:
        """Drops what was read of `partition` (a seek may go back before a takeover)."""
        self._newest.pop(partition, None)


class NoFence(LeaseFence):
    """A fence that hides nothing: a reader whose records are fenced by their readers
    (streams.log.shared_tail)."""

    def admit(self, records: list[Record]) -> list[Record]:
        return records


@runtime_checkable
class Unfenceable(Protocol):
    """A reader whose fence can be dropped: it returns every record as it is on the log."""

    def drop_fence(self) -> None: ...


@runtime_checkable
class Seedable(Protocol):
    """A reader with a `LeaseFence` that can be given the fence state at its start."""

    def seed_fence(self, state: FenceState) -> None: ...


R = TypeVar("R")


def seeded(reader: R, state: FenceState | None) -> R:
    """Returns `reader`, given `state` (the fence state at its start) if it has a fence
    (after a `seek`, seed it again: a seek drops what the fence knew of the partition)."""
    if state and isinstance(reader, Seedable):
        reader.seed_fence(state)
    return reader
