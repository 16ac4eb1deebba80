"""The msgstream never trusts an impossible timestamp, and never passes a record whose dead
letter was not written (issue 7, items 4 and 13), on both backends."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.streams.flaky import FailingSink
from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.msgstream import MsgPack, StreamPosition, TtMsgStream

SERDE = EventSerde()
MS = 1 << 18  # one physical millisecond in hybrid ts
NOW = compose(1_700_000_000_000)
SKEW_MS = 60_000
FUTURE = NOW + (SKEW_MS + 1000) * MS  # just past the allowed skew


def rows(ts: int) -> Event:
    body = {
        "collection_id": 1,
        "partition_id": 2,
        "segment_id": 3,
        "num_rows": 0,
        "first_row_id": 0,
        "columns": [],
    }
    return Event("RowsInserted", ts, body, 1, "v0")


def ddl(ts: int) -> Event:
    return Event("CollectionDropped", ts, {"collection_id": 1, "collection_name": "c"}, 1, "v0")


def tick(ts: int) -> Event:
    return Event("TimeTick", ts, {"source": "test"})


def append(log: Log, topic: str, *items: Event | bytes) -> list[int]:
    values = [i if isinstance(i, bytes) else SERDE.encode(i) for i in items]
    return log.append(topic, [Append(0, v) for v in values])


def stream(
    log: Log, topic: str, sink: FailingSink, clock: Callable[[], int] = lambda: NOW
) -> TtMsgStream:
    start = {0: StreamPosition()}
    return TtMsgStream(log, topic, start, SERDE, sink, sink.seen, clock, SKEW_MS)


def drain(s: TtMsgStream, want: int, timeout: float = 15.0) -> list[MsgPack]:
    packs: list[MsgPack] = []
    deadline = time.monotonic() + timeout
    while len(packs) < want and time.monotonic() < deadline:
        packs += s.consume(timeout=0.2)
    return packs


def new_topic(log: Log) -> str:
    topic = unique_topic()
    log.create_topic(topic, 1)
    return topic


@on_backends()
def test_a_tick_from_the_future_is_dead_lettered_not_trusted(log: Log):
    topic, sink = new_topic(log), FailingSink()
    offsets = append(log, topic, rows(NOW + 1), tick(FUTURE), rows(NOW + 2), tick(NOW + 10))
    s = stream(log, topic, sink)
    (pack,) = drain(s, 1)
    s.close()
    assert pack.end_ts == NOW + 10 and [e.ts for e in pack.events] == [NOW + 1, NOW + 2]
    ((rec, reason),) = sink.letters
    assert rec.offset == offsets[1] and "timestamp from the future" in reason
    assert "61000 ms ahead" in reason


@on_backends()
def test_a_row_from_the_future_is_dead_lettered_and_pins_no_position(log: Log):
    topic, sink = new_topic(log), FailingSink()
    offsets = append(log, topic, rows(FUTURE), rows(NOW + 1), tick(NOW + 5))
    s = stream(log, topic, sink)
    (pack,) = drain(s, 1)
    s.close()
    assert [e.ts for e in pack.events] == [NOW + 1]
    assert pack.resume_offset == offsets[2] + 1  # nothing left waiting for a tick
    assert [rec.offset for rec, _ in sink.letters] == [offsets[0]]


@on_backends()
def test_a_row_at_or_below_a_tick_read_before_it_is_dead_lettered(log: Log):
    topic, sink = new_topic(log), FailingSink()
    offsets = append(
        log,
        topic,
        tick(NOW),
        rows(NOW),  # at the tick: breaks its promise
        rows(NOW - 5),  # below it
        ddl(NOW - 7),  # a DDL broadcast again by rootcoord's recovery: delivered
        rows(NOW + 1),
        tick(NOW + 2),
    )
    s = stream(log, topic, sink)
    packs = drain(s, 2)
    s.close()
    assert [p.end_ts for p in packs] == [NOW, NOW + 2]
    assert [(e.type, e.ts) for e in packs[1].events] == [
        ("CollectionDropped", NOW - 7),
        ("RowsInserted", NOW + 1),
    ]
    assert [rec.offset for rec, _ in sink.letters] == offsets[1:3]
    assert all("breaks that tick's promise" in reason for _, reason in sink.letters)
    assert f"ts {NOW - 5} is at or below tick {NOW}" in sink.letters[1][1]


@on_backends()
def test_a_replay_skips_what_was_dead_lettered_even_once_the_clock_passed_it(log: Log):
    """A restart replays from 0 long after: the tick is no longer ahead of the clock, but it
    stays refused, so the rows written after it are delivered exactly as the first time."""
    topic, sink = new_topic(log), FailingSink()
    append(log, topic, tick(FUTURE), rows(NOW + 1), tick(NOW + 2), rows(NOW + 3), tick(NOW + 4))
    first = stream(log, topic, sink)
    want = [(p.end_ts, [e.ts for e in p.events]) for p in drain(first, 2)]
    first.close()
    assert want == [(NOW + 2, [NOW + 1]), (NOW + 4, [NOW + 3])] and len(sink.letters) == 1
    later = stream(log, topic, sink, clock=lambda: FUTURE + 86_400_000 * MS)
    assert [(p.end_ts, [e.ts for e in p.events]) for p in drain(later, 2)] == want
    later.close()
    assert len(sink.letters) == 1


@pytest.mark.parametrize(
    "poison",
    [b"\x00garbage", SERDE.encode(tick(FUTURE)), SERDE.encode(rows(NOW - 1))],
    ids=["undecodable", "future-tick", "backwards-row"],
)
@on_backends()
def test_no_pack_passes_a_record_whose_dead_letter_failed(log: Log, poison: bytes):
    topic, sink = new_topic(log), FailingSink(failures=3)
    offsets = append(log, topic, tick(NOW), rows(NOW + 1), poison, rows(NOW + 2), tick(NOW + 3))
    s = stream(log, topic, sink)
    packs: list[MsgPack] = []
    raised = 0
    deadline = time.monotonic() + 15
    while len(packs) < 2 and time.monotonic() < deadline:
        try:
            got = s.consume(timeout=0.2)
        except LogError:
            raised += 1
            continue
        assert all(p.end_ts < NOW + 3 for p in got) or sink.letters, "passed an unresolved record"
        packs += got
    s.close()
    assert raised >= 1 and [rec.offset for rec, _ in sink.letters] == [offsets[2]]
    assert [p.end_ts for p in packs] == [NOW, NOW + 3]
    assert [e.ts for e in packs[1].events] == [NOW + 1, NOW + 2]
