"""Snapshots of a single-partition topic (coord, ddl): the records that rebuild every consumer's
state as of an offset, kept as one file under the storage root, so that the topic's records
below that offset may be deleted (`TopicSnapshotter`, with a topic's `Fold`). A reader starting
below the topic's first kept record takes the snapshot, then the records from its offset on
("snapshot + tail").

File layout: `log_snapshots/{topic}/{offset:020d}`, the records' values each framed as a
big-endian u32 length and the bytes. A snapshot is written (atomically: the store writes a
temporary file and renames it) before any record below its offset is deleted.

On a log that keeps its records (Kafka, issue 23) snapshots are written all the same, and a
fresh reader (one starting at offset 0) takes the newest one, then the records from its
offset on, instead of the whole topic: a process starting on Kafka reads coord and ddl from
the storage root and the tail, not from offset 0 (`TopicSnapshotter` in its keeping mode).

A snapshot is applied all or nothing as to a consumer's stored position: only its last record
is at offset `S - 1` (S: the snapshot's offset); the others are at `before - 1` (`before`: the
position the reader started from), so a consumer storing `record.offset + 1` with the state
derived from each record keeps its old position until the whole snapshot is applied, and a
restart after a partial apply reads the snapshot again from its start (consumers re-apply
what they already hold idempotently). Each snapshot record has the SNAPSHOT_HEADER.

A snapshot keeps the lease fence state at its offset (streams.log.lease_fence) in its first
records, a TimeTick with ts 0 per role (consumers ignore them): a reader that goes on from a
snapshot, or from any offset (`fence_at`: the newest snapshot at or below it, then the
records up to it), starts with the fence every reader has there, so it hides a fenced
leader's late record although it never read the takeover marker before it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from vectorlog.core.faults import crash_point
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.errors import LogError, OffsetOutOfRange
from vectorlog.streams.log.base import Append, Log, Record, Truncatable, start_offsets
from vectorlog.streams.log.lease_fence import (
    FenceState,
    fence_records,
    kept_lease,
    kept_state,
    seeded,
)
from vectorlog.streams.log.lease_fence import fold as fold_leases
from vectorlog.streams.periodic import Periodic
from vectorlog.streams.scan import END_MARKER_SOURCE, read_all, read_to_end, up_to

PREFIX = "log_snapshots/"
#: the header every snapshot record has (a consumer may tell one from a record of the log)
SNAPSHOT_HEADER = ("vectorlog-snapshot", b"1")
#: crash point passed after each snapshot record read_from yielded (a consumer applied it)
AFTER_RECORD = "snapshots.after_record"
_LEN = struct.Struct(">I")


class Blobs(Protocol):
    """Where snapshots live (the object store of binlogs satisfies it)."""

    def put(self, path: str, data: bytes) -> None: ...
    def get(self, path: str) -> bytes: ...
    def list(self, prefix: str = "") -> list[str]: ...
    def delete(self, path: str) -> None: ...


class SnapshotMissing(LogError):
    """Records of a topic were deleted, but no snapshot stands in for them."""

    def __init__(self, topic: str, start: int) -> None:
        super().__init__(
            f"{topic}: records below offset {start} were deleted, and no snapshot is at it"
        )


def snapshot_path(topic: str, offset: int) -> str:
    """Returns the path of `topic`'s snapshot as of `offset`."""
    return f"{PREFIX}{topic}/{offset:020d}"


def write_snapshot(blobs: Blobs, topic: str, offset: int, values: list[bytes]) -> None:
    """Stores `values` as `topic`'s snapshot as of `offset`. Raises what the store raises."""
    blobs.put(snapshot_path(topic, offset), b"".join(_LEN.pack(len(v)) + v for v in values))


def delete_snapshots_before(blobs: Blobs, topic: str, offset: int) -> None:
    """Deletes `topic`'s snapshots older than the one as of `offset` (call only once the
    records below `offset` are deleted: until then readers may need the older one)."""
    for path in blobs.list(f"{PREFIX}{topic}/"):
        if path < snapshot_path(topic, offset):
            blobs.delete(path)


def snapshot_at(blobs: Blobs, topic: str, offset: int) -> list[bytes] | None:
    """Returns the values of `topic`'s snapshot as of `offset`, None if there is none."""
    path = snapshot_path(topic, offset)
    if path not in blobs.list(f"{PREFIX}{topic}/"):
        return None
    data, out, at = blobs.get(path), [], 0
    while at < len(data):
        (n,) = _LEN.unpack_from(data, at)
        out.append(data[at + 4 : at + 4 + n])
        at += 4 + n
    return out


def mark_end(log: Log, topic: str) -> int:
    """Appends an end marker to partition 0 of `topic` (a TimeTick every consumer ignores,
    see scan.read_to_end); returns its offset: every record below it was appended before
    (a Kafka high watermark may lag). Raises LogError."""
    marker = EventSerde().encode(Event("TimeTick", 0, {"source": END_MARKER_SOURCE}))
    return log.append(topic, [Append(0, marker)])[0]


def newest_snapshot(blobs: Blobs, topic: str) -> int | None:
    """Returns the offset of `topic`'s newest snapshot, None if it has none."""
    paths = blobs.list(f"{PREFIX}{topic}/")
    offsets = [int(p.rpartition("/")[2]) for p in paths if p.rpartition("/")[2].isdigit()]
    return max(offsets, default=None)


def stand_in(log: Log, topic: str, blobs: Blobs | None, offset: int) -> tuple[list[Record], int]:
    """Returns the snapshot records a reader of partition 0 from `offset` takes first and the
    offset it reads on from: below the first kept record, the snapshot at it (records were
    deleted); from offset 0 on a topic with a newer snapshot, that one (a fresh reader skips
    what it folds); else none, and `offset`. The last snapshot record is at the snapshot's
    offset - 1, the others at `offset - 1` (see the module docstring). Raises
    SnapshotMissing."""
    start = start_offsets(log, topic).get(0, 0)
    if offset < start:  # records below it were deleted: their snapshot stands in for them
        return snapshot_records(blobs, topic, start, offset), start
    newest = newest_snapshot(blobs, topic) if blobs is not None and offset == 0 else None
    if blobs is not None and newest is not None and newest > start:
        values = snapshot_at(blobs, topic, newest)
        if values is not None:  # else replaced meanwhile by a newer one: read the records
            return as_records(topic, values, newest, offset), newest
    return [], offset


class FenceMemo:
    """The lease fence state at an offset of each single-partition topic, as a reader left it
    (`read_from` at its end, `resume_fence` at each start): a consumer that goes on from
    there takes it instead of working it out again (`fence_at`'s `since`)."""

    def __init__(self) -> None:
        self._at: dict[str, tuple[int, FenceState]] = {}

    def note(self, topic: str, offset: int, state: FenceState) -> None:
        """Remembers `state` as the fence state at `offset` of `topic`."""
        self._at[topic] = (offset, {p: dict(roles) for p, roles in state.items()})

    def get(self, topic: str) -> tuple[int, FenceState] | None:
        """Returns (offset, the fence state there) last noted for `topic`, None if none."""
        return self._at.get(topic)


def fresh_start(
    log: Log, topic: str, blobs: Blobs | None, memo: FenceMemo | None = None
) -> tuple[list[Record], int]:
    """Returns what a follower with no stored position applies first and the offset it reads
    on from: the newest snapshot (or the one standing in for deleted records) and the offset
    after it (see `stand_in`); without `blobs`, none and the topic's first kept offset.
    `memo`: given the fence state at that offset (the snapshot's; none below a topic's first
    kept record without one), so the follower's reader does not read the snapshot again.
    Raises SnapshotMissing, LogError."""
    records: list[Record] = []
    if blobs is None:
        offset = start_offsets(log, topic).get(0, 0)
    else:
        records, offset = stand_in(log, topic, blobs, 0)
    if memo is not None:
        memo.note(topic, offset, kept_fence(records))
    return records, offset


def read_from(
    log: Log,
    topic: str,
    blobs: Blobs | None,
    offset: int = 0,
    timeout: float = 60.0,
    memo: FenceMemo | None = None,
    before: int | None = None,
) -> Iterator[Record]:
    """Yields partition 0 of `topic` from `offset` to its end (see `read_to_end`), after the
    snapshot that stands in for the records below where it reads from (`stand_in`); `memo`:
    given the fence state after the last record once every record was yielded (a consumer
    resuming there reads nothing to work it out). `before`: read only up to that offset
    (records known to be on the log), appending no end marker. Raises SnapshotMissing,
    LogError."""
    records, offset = stand_in(log, topic, blobs, offset)
    fence = kept_fence(records) if records else fence_at(log, topic, blobs, offset, timeout)
    state = {p: dict(roles) for p, roles in fence.items()}
    for rec in records:
        yield rec
        crash_point(AFTER_RECORD)
    if before is None:
        tail = read_to_end(log, topic, timeout, {0: offset}, fence)
    else:
        tail = _read_below(log, topic, offset, before, fence, timeout)
    for rec in tail:
        fold_leases(state, [rec])
        offset = rec.offset + 1
        yield rec
    if memo is not None:
        memo.note(topic, offset, state)


def _read_below(
    log: Log, topic: str, offset: int, before: int, fence: FenceState, timeout: float
) -> Iterator[Record]:
    """Yields partition 0 of `topic` from `offset` up to `before`, appending nothing. Raises
    LogError if it is not read within `timeout` seconds."""
    if offset >= before:
        return
    reader = seeded(log.reader(topic, {0: offset}), fence)
    try:
        deadline = time.monotonic() + timeout
        for rec in up_to(reader, topic, {0: offset}, {0: before}, deadline):
            if rec.offset >= before:
                return
            yield rec
    finally:
        reader.close()


def kept_fence(records: Sequence[Record]) -> FenceState:
    """Returns the lease fence state a snapshot's records keep (empty: none kept)."""
    return kept_state(r.value for r in records)


def fence_at(
    log: Log,
    topic: str,
    blobs: Blobs | None,
    offset: int,
    timeout: float = 60.0,
    since: tuple[int, FenceState] | None = None,
    seen: Callable[[Record], None] | None = None,
) -> FenceState:
    """Returns the lease fence state at `offset` of partition 0 of `topic`: the one kept in
    the newest snapshot at or below it, with the leases of the records from there up to
    `offset` taken in (streams.log.lease_fence); `since`: an offset at or below `offset` and
    the state there (an earlier answer), to read from instead while its records are kept (a
    snapshot may have deleted them since); `seen`: called with each record read below
    `offset`, in order (as they are on the log: no fence applied). Raises LogError if those
    are not read within `timeout`."""
    if since is not None and since[0] <= offset:
        try:
            return _fence_from(log, topic, offset, timeout, since, seen)
        except OffsetOutOfRange:  # folded into a snapshot since: start from that
            pass
    base = _fence_base(log, topic, blobs, offset)
    return _fence_from(log, topic, offset, timeout, base, seen)


def _fence_from(
    log: Log,
    topic: str,
    offset: int,
    timeout: float,
    start: tuple[int, FenceState],
    seen: Callable[[Record], None] | None = None,
) -> FenceState:
    """Returns the lease fence state at `offset`, read from `start` (an offset at or below
    it and the state there), handing `seen` each record read below `offset`. Raises
    LogError, OffsetOutOfRange (the records from there were deleted)."""
    base, state = start[0], {p: dict(roles) for p, roles in start[1].items()}
    if base >= offset:
        return state
    reader, deadline = log.reader(topic, {0: base}), time.monotonic() + timeout
    try:
        while base < offset:
            if time.monotonic() > deadline:
                raise LogError(f"did not read {topic!r} up to offset {offset} in time")
            got = reader.poll(1000, 0.2)
            below = [r for r in got if r.offset < offset]
            fold_leases(state, below)
            if seen is not None:
                for rec in below:
                    seen(rec)
            base = max([base, *(r.offset + 1 for r in got)])
    finally:
        reader.close()
    return state


def _fence_base(log: Log, topic: str, blobs: Blobs | None, offset: int) -> tuple[int, FenceState]:
    """Returns where `fence_at` reads from and the state there: the newest snapshot at or
    below `offset` and the state it keeps, else the topic's first kept offset and none."""
    start = start_offsets(log, topic).get(0, 0)
    if offset <= 0 or blobs is None:
        return max(start, 0), {}
    paths = blobs.list(f"{PREFIX}{topic}/")
    offsets = [int(p.rpartition("/")[2]) for p in paths if p.rpartition("/")[2].isdigit()]
    at = max((o for o in offsets if start <= o <= offset), default=None)
    values = None if at is None else snapshot_at(blobs, topic, at)
    if at is None or values is None:  # none (or replaced meanwhile): from the first kept
        return start, {}
    return at, kept_state(values)


def take_in(state: FenceState, rec: Record) -> bool:
    """Takes `rec` into `state`, making it the fence state after `rec`: the state a snapshot
    record keeps, or the leases of a record of the log. Returns whether `rec` was one of a
    snapshot's records keeping the state (it is no event)."""
    kept = kept_lease(rec.value) if is_snapshot(rec) else None
    if kept is None:
        fold_leases(state, [rec])
        return False
    roles = state.setdefault(rec.partition, {})
    roles[kept[0]] = max(kept[1], roles.get(kept[0], -1))
    return True


def start_fence(log: Log, topic: str, blobs: Blobs | None, positions: dict[int, int]) -> FenceState:
    """Returns the lease fence state where a reader of `topic` from `positions` starts (a
    start below the first kept record: at that record), for a single-partition topic with
    snapshots in `blobs`; none otherwise. Raises LogError."""
    first = start_offsets(log, topic)
    if blobs is None or set(first) != {0}:
        return {}
    return fence_at(log, topic, blobs, max(positions.get(0, 0), first[0]))


def resume_fence(
    log: Log, blobs: Blobs | None, memo: FenceMemo | None = None
) -> Callable[[str, dict[int, int]], FenceState]:
    """Returns what gives a reader of a single-partition topic starting at `positions` the
    lease fence state there (`fence_at`; none for a topic of several partitions): read on
    from the state `memo` holds at or below them (a recovery read's end, the last start),
    else worked out from the newest snapshot at or below them; each answer noted in `memo`."""
    memo = memo if memo is not None else FenceMemo()

    def at(topic: str, positions: dict[int, int]) -> FenceState:
        if set(positions) != {0}:
            return {}
        state = fence_at(log, topic, blobs, positions[0], since=memo.get(topic))
        memo.note(topic, positions[0], state)
        return state

    return at


def snapshot_records(
    blobs: Blobs | None, topic: str, start: int, before: int | None = None
) -> list[Record]:
    """Returns the snapshot as of `start` as records: the last at offset `start - 1`, the
    others at `before - 1` (default `start - 1`: every one). Raises SnapshotMissing."""
    values = snapshot_at(blobs, topic, start) if blobs is not None else None
    if values is None:
        raise SnapshotMissing(topic, start)
    return as_records(topic, values, start, start if before is None else before)


def as_records(topic: str, values: list[bytes], start: int, before: int) -> list[Record]:
    """Returns a snapshot's `values` as partition 0 records with the SNAPSHOT_HEADER: the
    last at offset `start - 1`, the others at `before - 1`."""
    last = len(values) - 1
    return [
        Record(topic, 0, (start if i == last else before) - 1, v, None, (SNAPSHOT_HEADER,))
        for i, v in enumerate(values)
    ]


def is_snapshot(rec: Record) -> bool:
    """Returns whether `rec` is a snapshot record (not one of the log)."""
    return SNAPSHOT_HEADER in rec.headers


class Fold(Protocol):
    """Folds a topic's events into the fewest that rebuild every consumer's state."""

    def apply(self, event: Event) -> None: ...
    def events(self) -> list[Event]: ...


#: snapshots kept on a log that keeps its records: a reader may be reading an older one
KEPT_SNAPSHOTS = 3


class TopicSnapshotter:
    """Every `interval_s`, once at least `min_records` records of a single-partition topic lie
    below every consumer's floor (the next offset it reads), writes the snapshot as of the
    lowest floor (the records before it folded by a fresh `fold()`) and deletes the records
    below it, on a log that deletes records on request (the embedded log).

    On a log that keeps them (Kafka) no record is deleted and the floors do not matter: each
    run notes the topic's end (an end marker; none while nothing came after the last one),
    and writes the snapshot as of the end the run before noted (so what it folds is at
    least `interval_s` old: coord's allocations expired), once that is `min_records` past
    the newest snapshot; it folds that snapshot and the records after it, and keeps the
    newest KEPT_SNAPSHOTS.

    Writing a snapshot appends nothing to the topic (it reads only up to the snapshot's
    offset): a record of its own would make the next snapshot due, with a small
    `min_records` an idle cluster appending every `interval_s` for ever."""

    def __init__(
        self,
        log_: Log,
        topic: str,
        serde: EventSerde,
        blobs: Blobs,
        fold: Callable[[], Fold],
        floors: Sequence[Callable[[], int]],
        min_records: int,
        interval_s: float = 60.0,
    ) -> None:
        self.log, self.topic, self.serde, self.blobs = log_, topic, serde, blobs
        self.fold, self.floors, self.min_records = fold, list(floors), min_records
        self.snapshots = 0
        self._noted: int | None = None  # the end the last run noted (a log keeping records)
        self._seen: int | None = None  # the high watermark just after that end marker
        self._periodic = Periodic(f"{topic} snapshots", self.snapshot, interval_s)
        self.start, self.stop, self.close = (
            self._periodic.start,
            self._periodic.stop,
            self._periodic.close,
        )

    def snapshot(self) -> int | None:
        """Writes a snapshot and deletes the records below it, if due; returns its offset, or
        None. Raises LogError, what the store raises."""
        if not isinstance(self.log, Truncatable):
            return self._snapshot_kept()
        start = start_offsets(self.log, self.topic).get(0, 0)
        at = min(floor() for floor in self.floors)
        if at - start < self.min_records:
            return None
        self._write(at)
        self.log.truncate(self.topic, 0, at)
        delete_snapshots_before(self.blobs, self.topic, at)
        return at

    def _snapshot_kept(self) -> int | None:
        """The keeping mode (see the class docstring)."""
        at = self._noted
        if self._moved_on():
            self._noted = mark_end(self.log, self.topic)
            self._seen = self.log.end_offsets(self.topic)[0]
        if at is None or at - (newest_snapshot(self.blobs, self.topic) or 0) < self.min_records:
            return None
        self._write(at)
        paths = sorted(self.blobs.list(f"{PREFIX}{self.topic}/"))
        for path in paths[:-KEPT_SNAPSHOTS]:
            self.blobs.delete(path)
        return at

    def _moved_on(self) -> bool:
        """Returns whether something was appended since the last end marker (or none was
        appended yet): the high watermark moved past the one read just after it. It may lag
        the real end (Tansu's, by a whole batch, until the next append), but it moves with
        every append: an idle topic gets no marker, so a snapshot never makes another one
        due."""
        return self._seen is None or self.log.end_offsets(self.topic)[0] > self._seen

    def _write(self, at: int) -> None:
        """Writes the snapshot as of `at`: the records below it folded (from the snapshot
        that stands in for the oldest of them)."""
        fold = self.fold()
        fence: FenceState = {}
        for rec in read_from(self.log, self.topic, self.blobs, 0, before=at):
            if rec.offset >= at:
                break
            if take_in(fence, rec):  # the fence state the older snapshot kept
                continue
            try:
                event = self.serde.decode(rec.value)
            except Exception:  # undecodable (its consumers dead-lettered it)
                continue
            fold.apply(event)
        values = [self.serde.encode(e) for e in fold.events()]
        head = fence_records(fence)  # the lease fence state as of `at`
        write_snapshot(self.blobs, self.topic, at, head + values)
        self.snapshots += 1


def read_whole(log: Log, topic: str, blobs: Blobs | None) -> Iterator[Record]:
    """Yields partition 0 of `topic` from its beginning without writing to it: the snapshot
    if records were deleted, then every record kept (see `read_all`). Raises SnapshotMissing,
    LogError."""
    start = start_offsets(log, topic).get(0, 0)
    records = snapshot_records(blobs, topic, start) if start else []
    yield from records
    yield from read_all(log, topic, start={0: start}, fence=kept_fence(records))
