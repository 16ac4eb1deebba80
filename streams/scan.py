"""Reading a whole topic up to its current end, for replay tools, tests and benchmarks.

`read_to_end` finds the end by appending an end marker (a TimeTick with ts 0, which promises
nothing and every consumer ignores) to each partition and reading up to it: a broker's high
watermark may lag the real end of a partition (DESIGN.md s.8). It writes to the topic it
reads, so it is for a processor's own internal topics only (rootcoord's `ddl`, DESIGN.md 6b).
`read_all` writes nothing: it reads up to `Log.end_offsets`, then on until the topic is idle;
every user-facing listing (the dead-letter topic) reads that way. `settled_end` finds one
partition's end without writing and without waiting for the topic to be idle.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.errors import LogError, OffsetOutOfRange, TopicPartitionNotFound
from vectorlog.streams.log.base import Append, Log, Reader, Record
from vectorlog.streams.log.lease_fence import FenceState, seeded

END_MARKER_SOURCE = "end-marker"
#: `read_all` stops once no record came for this long after it passed the end offsets
IDLE_S = 0.25


def read_to_end(
    log: Log,
    topic: str,
    timeout: float = 30.0,
    start: dict[int, int] | None = None,
    fence: FenceState | None = None,
) -> Iterator[Record]:
    """Yields every record of `topic` appended before this call, from `start` ({partition:
    offset}, default every partition from 0), partitions interleaved as read. Appends an end
    marker to every partition of `topic`. `fence`: the lease fence state at `start`
    (streams.log.lease_fence; default: none known).

    Raises LogError if the end is not reached within `timeout`.
    """
    n = log.partitions(topic)
    start = start if start is not None else {p: 0 for p in range(n)}
    marker = EventSerde().encode(Event("TimeTick", 0, {"source": END_MARKER_SOURCE}))
    ends = log.append(topic, [Append(p, marker) for p in range(n)])
    reader = seeded(log.reader(topic, dict(start)), fence)
    done = {p: False for p in start}
    deadline = time.monotonic() + timeout
    try:
        while not all(done.values()):
            if time.monotonic() > deadline:
                raise LogError(f"did not reach the end of {topic!r} within {timeout}s")
            for rec in reader.poll(1000, 0.2):
                if rec.offset < ends[rec.partition]:
                    yield rec
                elif rec.offset == ends[rec.partition]:
                    done[rec.partition] = True
    finally:
        reader.close()


#: how long `settled_end` waits for the record before the high watermark
SETTLE_S = 2.0


def settled_end(log: Log, topic: str, partition: int, watermark: int) -> int:
    """Returns the end offset of one partition at least as of `watermark` (its
    `Log.end_offsets`), writing nothing: the offset after the last record fetched with the
    one at `watermark - 1`. Tansu's high watermark counts the last record batch as one record
    (DESIGN.md s.8); a fetch returns that batch whole, so its last record is the real end.
    Returns `watermark` if nothing before it can be read within SETTLE_S."""
    if watermark <= 0:
        return watermark
    reader = log.reader(topic, {partition: watermark - 1})
    try:
        got = reader.poll(100_000, SETTLE_S)
    except OffsetOutOfRange:  # retention deleted every record: nothing past the watermark
        return watermark
    finally:
        reader.close()
    return max([watermark, *(r.offset + 1 for r in got if r.partition == partition)])


def read_all(
    log: Log,
    topic: str,
    timeout: float = 30.0,
    idle: float = IDLE_S,
    start: dict[int, int] | None = None,
    fence: FenceState | None = None,
    floor: dict[int, int] | None = None,
) -> Iterator[Record]:
    """Yields every record of `topic` appended before this call (and maybe some appended
    during it), from `start` ({partition: offset}; partitions not named, and all by
    default, from 0), without writing anything: up to `log.end_offsets(topic)`, then on
    until no record came for `idle` seconds (a Kafka high watermark may lag the real end).
    A topic with nothing past `start` is read without waiting; on a topic appended to
    without pause, it stops at `timeout` once past the end offsets. `fence`: the lease
    fence state at `start` (streams.log.lease_fence; default: none known). `floor`:
    {partition: an offset the caller knows the partition's end is at or past} (records it
    appended or read itself), read up to when the end offsets lag it; with `idle` 0, what
    the reader fetched past the ends is taken without waiting for more.

    Raises TopicNotFound, TopicPartitionNotFound if `start` names a partition the topic
    lacks, or LogError if the end offsets are not reached within `timeout`.
    """
    ends = log.end_offsets(topic)
    for p in sorted(set(start or {}) - set(ends)):
        raise TopicPartitionNotFound(topic, p)
    ends = {p: max(end, (floor or {}).get(p, 0)) for p, end in ends.items()}
    begin = {p: (start or {}).get(p, 0) for p in ends}
    if all(begin[p] >= end for p, end in ends.items()):
        return
    reader = seeded(log.reader(topic, begin), fence)
    deadline = time.monotonic() + timeout
    try:
        yield from up_to(reader, topic, begin, ends, deadline)
        while time.monotonic() < deadline and (batch := reader.poll(1000, idle)):
            yield from batch  # past the watermark: stop once idle (or busy past the deadline)
    finally:
        reader.close()


def up_to(
    reader: Reader, topic: str, begin: dict[int, int], ends: dict[int, int], deadline: float
) -> Iterator[Record]:
    """Yields the records of `reader` until every partition passed its end offset."""
    left = {p: end for p, end in ends.items() if end > begin[p]}
    while left:
        if time.monotonic() > deadline:
            raise LogError(f"did not read {topic!r} up to its end offsets {ends} in time")
        for rec in reader.poll(1000, 0.2):
            if rec.offset + 1 >= left.get(rec.partition, 0):
                left.pop(rec.partition, None)
            yield rec
