"""Read-side fencing of a leader's appends (issue 23): a record appended under a lease carries
its role and epoch in a header, and a reader hides a record of an older epoch of a role than
one it already read on that partition.

Why on the read side: an append the old leader had handed to its producer (librdkafka's queue)
before it was paused is delivered when it resumes, after a standby took over; the lease check
of `streams.log.fenced` ran before the pause and cannot stop it. Kafka's own zombie fencing
(a transactional.id per role, the new leader's init_transactions bumping the producer epoch)
does not work on the test broker: Tansu shows a transaction the zombie left open to
read_committed consumers even after a new producer of its transactional.id committed, and
the embedded log has no transactions. A header works on both backends and any broker.

The new leader appends a takeover marker (`takeover_marker`) to each partition of the topics
it writes before it recovers from them: what the old epoch landed before the marker, the new
leader recovers; what lands after it, every reader that read the marker hides. A hidden
record is returned in its place (offsets stay dense, so a read up to an offset ends) as a
TimeTick with ts 0, which every consumer ignores (as `streams.scan`'s end marker), naming the
lease and epoch it was appended under. A reader that starts past the marker and before a late
record has not read the marker and cannot hide it (a reader's fence is its own, in memory).

Closing that gap (issue 23, left open): a reader must know the epoch in force AT its start
position on each partition, i.e. the newest epoch of each role among the records before it.
Neither cheap source gives it: the lease topic knows the newest claim but not where its marker
landed (a reader starting before the marker must still admit the older epoch's legitimate
records between it and the marker), and reading back from the position finds the marker only
after an unbounded distance (coord carries every query node's heartbeat, untagged; a cluster
whose leader has run for long has its marker far back). What it would take: the new leader
records its markers' offsets on the lease topic (a "marked" record after the markers, before
any other write of its epoch), each log keeps an index of those records followed from the
lease topic, and a reader hides a record of (role, e) at offset o iff the index has a marker
of role with an epoch > e before o on its partition; a record of e read while a newer claim
is known but its "marked" record is not yet, waits for it (or reads back to the claim's
marker, which is then near). That needs the lease topic's end on Kafka without the high
watermark and without appending (DESIGN.md s.6b), and tests of a reader created after a
takeover on both backends; or, instead, every processor stores its readers' fence state with
its positions (principle 2), snapshots included.
"""

from __future__ import annotations

from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Append, Headers, Record

#: the header of a record appended under a lease: b"ROLE:EPOCH" (one per lease held)
LEASE_HEADER = "vectorlog-lease"
#: the source of a takeover marker and of a hidden record's stand-in
TAKEOVER_SOURCE = "lease-takeover"
FENCED_SOURCE = "lease-fenced"


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


class LeaseFence:
    """One reader's view: per partition, the newest epoch read of each role."""

    def __init__(self) -> None:
        self._newest: dict[int, dict[str, int]] = {}

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
