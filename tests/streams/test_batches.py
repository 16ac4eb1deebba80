"""Atomic batches read from the log (issue 31, item 5), on both backends: the parts of one
append are delivered together once all are in, never in part; a batch cut short (its writer
died between partitions) is dead-lettered, also when the reader resumes past it somewhere."""

from __future__ import annotations

import time

from tests.streams.test_msgstream_poison import MS, NOW, rows
from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.batches import batched
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.msgstream import TORN_REASON, MsgPack, StreamPosition, TtMsgStream

SERDE = EventSerde()
TS = NOW + 10 * MS  # the batch's ts


def tick(ts: int) -> bytes:
    return SERDE.encode(Event("TimeTick", ts, {"source": "t"}))


def batch() -> list[Append]:
    """A batch of three parts: two on partition 0, one on partition 1."""
    return batched([Append(p, SERDE.encode(rows(TS))) for p in (0, 0, 1)])


class Letters:
    def __init__(self) -> None:
        self.got: list[tuple[Record, str]] = []

    def __call__(self, rec: Record, reason: str) -> None:
        self.got.append((rec, reason))

    def contains(self, rec: Record) -> bool:
        return any((r.partition, r.offset) == (rec.partition, rec.offset) for r, _ in self.got)


def stream(log: Log, topic: str, letters: Letters, at: dict[int, StreamPosition] | None = None):
    positions = at or {0: StreamPosition(), 1: StreamPosition()}
    clock = lambda: compose(1_700_000_100_000)  # noqa: E731 - past every ts here
    return TtMsgStream(log, topic, positions, SERDE, letters, letters.contains, clock)


def drain(s: TtMsgStream, seconds: float = 1.0) -> list[MsgPack]:
    packs: list[MsgPack] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        packs += s.consume(timeout=0.05)
    return packs


def new_topic(log: Log) -> str:
    topic = unique_topic()
    log.create_topic(topic, 2)
    return topic


def delivered(packs: list[MsgPack]) -> list[tuple[int, int]]:
    """(partition, tick) of each pack holding rows, in the order the packs came."""
    return [(p.partition, p.end_ts) for p in packs for e in p.events if e.type == "RowsInserted"]


@on_backends()
def test_a_pack_waits_until_every_part_of_its_batch_is_in(log: Log) -> None:
    topic, letters = new_topic(log), Letters()
    parts = batch()
    log.append(topic, [*parts[:2], Append(0, tick(TS))])  # partition 0's parts and its tick
    s = stream(log, topic, letters)
    assert drain(s) == []  # partition 1's part may still come: nothing of the batch shows
    log.append(topic, [parts[2], Append(1, tick(TS))])
    packs = drain(s)
    s.close()
    assert sorted(delivered(packs)) == [(0, TS), (0, TS), (1, TS)]
    assert letters.got == []


@on_backends()
def test_a_batch_cut_short_is_dead_lettered_once_ticks_pass_it(log: Log) -> None:
    topic, letters = new_topic(log), Letters()
    parts = batch()
    offsets = log.append(topic, parts[:2])  # the writer died before partition 1's part
    later = SERDE.encode(rows(TS + MS))
    log.append(topic, [Append(0, tick(TS + MS)), Append(1, later), Append(1, tick(TS + 2 * MS))])
    s = stream(log, topic, letters)
    packs = drain(s)
    s.close()
    assert delivered(packs) == [(1, TS + 2 * MS)]  # the later row only
    assert [(r.partition, r.offset) for r, _ in letters.got] == [(0, o) for o in offsets]
    assert all(reason.startswith(TORN_REASON) for _, reason in letters.got)
    # it says which partition was short, and the sources' ticks that passed the batch
    assert all("partition 1: 0 of 1 parts read by offset" in why for _, why in letters.got)
    assert all("live sources' ticks t " in why for _, why in letters.got)


@on_backends()
def test_a_reader_resumed_past_a_whole_batch_on_one_partition_delivers_the_rest(
    log: Log,
) -> None:
    topic, letters = new_topic(log), Letters()
    parts = batch()
    log.append(topic, [parts[2]])
    (tick1,) = log.append(topic, [Append(1, tick(TS))])
    log.append(topic, [*parts[:2], Append(0, tick(TS))])
    # applied partition 1 up to its tick before a stop, partition 0 not
    at = {0: StreamPosition(), 1: StreamPosition(tick1 + 1, TS, tick1)}
    s = stream(log, topic, letters, at)
    packs = drain(s)
    s.close()
    assert delivered(packs) == [(0, TS), (0, TS)]
    assert letters.got == []


@on_backends()
def test_a_reader_resumed_past_a_torn_batch_on_one_partition_drops_the_rest(log: Log) -> None:
    topic, letters = new_topic(log), Letters()
    parts = batch()
    (tick1,) = log.append(topic, [Append(1, tick(TS))])  # partition 1's part never came
    log.append(topic, [*parts[:2], Append(0, tick(TS))])
    at = {0: StreamPosition(), 1: StreamPosition(tick1 + 1, TS, tick1)}
    s = stream(log, topic, letters, at)
    packs = drain(s)
    s.close()
    assert delivered(packs) == []
    assert len(letters.got) == 2 and all(r.partition == 0 for r, _ in letters.got)
