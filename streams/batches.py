"""Atomic batches on a log whose multi-record appends are not atomic (Kafka), decided by readers.

A writer names every record of an append of two or more records with the header BATCH_HEADER,
`<batch id>/<c0>,<c1>,...`: a random 64-bit id (hex) and how many of the batch's records each
partition holds (c_p for partition p). Every record of a batch carries one ts (the writer
stamps the append once, seed 001 s.1.1) and the writer keeps that ts in flight, holding the
time ticks below it, until the whole append was acknowledged. So a tick at or past the
batch's ts on a partition promises that none of the batch's records follows there: once every
partition the batch names shows such a tick, a batch short of records can never complete (its
writer died, or its append failed), and it is *torn*. `Batches` tracks the batches a
tick-aligned reader (`streams.msgstream`) has read part of: a batch is released once every
part is in (*whole*), or its parts are dropped once it is torn. Both are facts of the log, so
every reader decides the same for the same batch (parts are counted whether or not they
decode or were dead-lettered before).

A reader that resumes past a batch on one partition (its stored tick is at or past the batch's
ts there) and before it on another cannot count the first partition's parts as it reads:
`count_back` reads that partition backwards from the stored tick until it found them, or
passed a tick stamped more than SCAN_BACK_MS before the batch (no part can be that far back).
The embedded log appends a batch in one RocksDB write: its batches are always whole.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vectorlog.core.faults import crash_point, pending
from vectorlog.core.hybridts import LOGICAL_BITS
from vectorlog.streams.log.base import Append, Log, Record

BATCH_HEADER = "vectorlog-batch"
#: the crash point (vectorlog.core.faults) each backend passes in an append between the records of
#: two partitions of one batch: Kafka has flushed the records before it (they are in the log,
#: the rest never will be), the embedded log has written nothing yet (one RocksDB write)
BETWEEN_PARTITIONS = "log.append.between_partitions"
#: how far back (hybrid-ts physical ms before a batch's ts) a part of it can be on its partition
SCAN_BACK_MS = 300_000
SCAN_WINDOW = 256  # records read per step of `count_back`


@dataclass(frozen=True)
class BatchTag:
    """What a record's BATCH_HEADER says: its batch's id and the part count per partition."""

    id: str
    counts: tuple[int, ...]

    @staticmethod
    def of(rec: Record) -> BatchTag | None:
        """Returns the tag of `rec`, None if it has none or a malformed one (it is then read
        as a record of its own)."""
        raw = rec.header(BATCH_HEADER)
        if raw is None:
            return None
        try:
            ident, _, counts = raw.decode().partition("/")
            tag = BatchTag(ident, tuple(int(c) for c in counts.split(",")))
        except ValueError:
            return None
        return tag if ident and tag.counts and min(tag.counts) >= 0 else None

    def parts(self, partition: int) -> int:
        """Returns how many parts of the batch `partition` holds."""
        return self.counts[partition] if 0 <= partition < len(self.counts) else 0


def batched(records: list[Append]) -> list[Append]:
    """Returns `records`, each carrying the BATCH_HEADER of one new batch (the same list when
    it holds fewer than two records: a single record lands whole)."""
    if len(records) < 2:
        return records
    counts = [0] * (max(r.partition for r in records) + 1)
    for r in records:
        counts[r.partition] += 1
    value = f"{secrets.token_hex(8)}/{','.join(map(str, counts))}".encode()
    return [
        Append(r.partition, r.value, r.key, (*r.headers, (BATCH_HEADER, value))) for r in records
    ]


def between_partitions(
    records: Sequence[Append], i: int, flush: Callable[[], object] | None = None
) -> None:
    """Passes BETWEEN_PARTITIONS before `records[i]` if it starts another partition of a
    batch; armed, it first calls `flush` (what was sent so far is then in the log)."""
    if not i or records[i].partition == records[i - 1].partition:
        return
    if pending(BETWEEN_PARTITIONS) and any(n == BATCH_HEADER for n, _ in records[i].headers):
        if flush is not None:
            flush()
        crash_point(BETWEEN_PARTITIONS)


@dataclass
class _Batch:
    tag: BatchTag
    ts: int | None = None  # from the first part that decodes
    seen: dict[int, set[int]] = field(default_factory=dict)  # partition -> offsets read
    counted: dict[int, int] = field(default_factory=dict)  # partition -> parts `count_back` found


TsOf = Callable[[Record], tuple[int, bool] | None]  # record -> (ts, is a tick), None: no ts
#: a torn batch's partitions short of parts: partition -> (parts read, parts the batch names)
Shortfall = dict[int, tuple[int, int]]


class Batches:
    """The batches a reader of some partitions has read parts of and not decided yet."""

    def __init__(self, counter: Callable[[BatchTag, int, int], int] | None = None) -> None:
        """`counter(tag, partition, ts)`: the parts of the batch a partition the reader
        resumed past holds (`count_back`); None: the reader resumed past no batch."""
        self._open: dict[str, _Batch] = {}
        self._counter = counter

    def add(self, tag: BatchTag, rec: Record, ts: int | None) -> None:
        """Counts `rec` as a part of its batch (`ts`: its ts, None if it does not decode)."""
        batch = self._open.setdefault(tag.id, _Batch(tag))
        batch.seen.setdefault(rec.partition, set()).add(rec.offset)
        if batch.ts is None and ts is not None:
            batch.ts = ts

    def is_open(self, batch_id: str) -> bool:
        return batch_id in self._open

    def has_open(self) -> bool:
        return bool(self._open)

    def resolve(
        self, resumed: dict[int, int], read: dict[int, int]
    ) -> tuple[list[str], dict[str, Shortfall]]:
        """Decides the open batches it can; returns (whole ids, {torn id: its shortfall}),
        all forgotten.

        `resumed`: per partition read, the tick the reader resumed at (a partition whose
        resumed tick is at or past a batch's ts was read past it before: its parts are
        counted with the counter); `read`: the highest tick read per partition."""
        whole, torn = [], {}
        for bid, batch in list(self._open.items()):
            if batch.ts is None:
                continue
            short = self._short(batch, resumed)
            if not short:
                whole.append(bid)
            elif all(read[p] >= batch.ts for p in short):
                torn[bid] = short
            else:
                continue
            del self._open[bid]
        return whole, torn

    def _short(self, batch: _Batch, resumed: dict[int, int]) -> Shortfall:
        """Returns {partition: (parts read, parts named)} of the partitions read that hold
        fewer of the batch's parts than it names (a partition not read is taken to hold
        them: nothing can be known of it here)."""
        assert batch.ts is not None
        out = {}
        for p, want in enumerate(batch.tag.counts):
            if not want or p not in resumed:
                continue
            if resumed[p] >= batch.ts:
                if p not in batch.counted:
                    batch.counted[p] = self._count(batch.tag, p, batch.ts)
                have = batch.counted[p]
            else:
                have = len(batch.seen.get(p, ()))
            if have < want:
                out[p] = (have, want)
        return out

    def _count(self, tag: BatchTag, partition: int, ts: int) -> int:
        return self._counter(tag, partition, ts) if self._counter else tag.parts(partition)


def count_back(
    log: Log,
    topic: str,
    partition: int,
    before: int,
    tag: BatchTag,
    ts: int,
    ts_of: TsOf,
    start: int = 0,
) -> int:
    """Returns how many parts of `tag`'s batch (stamped `ts`) partition `partition` holds below
    offset `before` (the offset of a tick at or past `ts`): read backwards in windows until
    they are all found, or a tick more than SCAN_BACK_MS older than `ts` or offset `start`
    was passed. Raises LogError."""
    want, found, hi = tag.parts(partition), 0, before
    floor = ts - (SCAN_BACK_MS << LOGICAL_BITS)
    while hi > start and found < want:
        lo = max(start, hi - SCAN_WINDOW)
        window = read_range(log, topic, partition, lo, hi)
        found += sum(1 for r in window if (t := BatchTag.of(r)) is not None and t.id == tag.id)
        if any(_old_tick(ts_of(r), floor) for r in window if BatchTag.of(r) is None):
            break
        hi = lo
    return found


def _old_tick(got: tuple[int, bool] | None, floor: int) -> bool:
    return got is not None and got[1] and 0 < got[0] < floor


def read_range(log: Log, topic: str, partition: int, lo: int, hi: int) -> list[Record]:
    """Returns the records of one partition with offsets in [lo, hi)."""
    reader = log.reader(topic, {partition: lo})
    out: list[Record] = []
    try:
        idle = 0
        while (not out or out[-1].offset < hi - 1) and idle < 50:
            got = reader.poll(hi - lo, 0.2)
            idle = 0 if got else idle + 1
            out += [r for r in got if r.offset < hi]
            if got and got[-1].offset >= hi - 1:
                break
    finally:
        reader.close()
    return out
