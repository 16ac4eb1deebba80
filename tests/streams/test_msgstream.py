"""Tick-aligned consumption (seed 001 s.5.3) on both log backends."""

from __future__ import annotations

import time

from tests.support import unique_topic
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.deadletter import parse
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.msgstream import MsgPack, StreamPosition, TtMsgStream

SERDE = EventSerde()


def ev(ts: int, vchannel: str = "v0", n: int = 0) -> bytes:
    return SERDE.encode(
        Event(
            "TimeTick" if vchannel == "" else "CollectionDropped",
            ts,
            {"source": "t"}
            if vchannel == ""
            else {"collection_id": n, "collection_name": f"c{ts}"},
            n,
            vchannel,
        )
    )


def tick(ts: int) -> bytes:
    return ev(ts, "")


def drain(stream: TtMsgStream, want: int, timeout: float = 15.0) -> list[MsgPack]:
    packs: list[MsgPack] = []
    deadline = time.monotonic() + timeout
    while len(packs) < want and time.monotonic() < deadline:
        packs += stream.consume(timeout=0.2)
    return packs


def make_stream(
    log: Log, topic: str, positions: dict[int, StreamPosition], letters: list | None = None
) -> TtMsgStream:
    sink = (
        (lambda rec, reason: letters.append((rec, reason)))
        if letters is not None
        else (lambda rec, reason: None)
    )
    return TtMsgStream(log, topic, positions, SERDE, sink)


def test_pack_holds_events_up_to_the_tick_in_ts_order(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 2)
    log.append(
        topic,
        [
            Append(0, ev(30)),
            Append(0, ev(10)),
            Append(0, ev(50)),
            Append(0, tick(40)),
            Append(0, ev(45)),
            Append(0, tick(60)),
        ],
    )
    stream = make_stream(log, topic, {0: StreamPosition()})
    packs = drain(stream, 2)
    assert [(p.begin_ts, p.end_ts) for p in packs] == [(0, 40), (40, 60)]
    assert [e.ts for e in packs[0].events] == [10, 30]
    assert [e.ts for e in packs[1].events] == [45, 50]  # 50 waited for the next tick
    stream.close()


def test_packs_group_by_vchannel(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 1)
    log.append(
        topic,
        [Append(0, ev(1, "a")), Append(0, ev(2, "b")), Append(0, ev(3, "a")), Append(0, tick(9))],
    )
    stream = make_stream(log, topic, {0: StreamPosition()})
    (pack,) = drain(stream, 1)
    groups = pack.by_vchannel()
    assert {k: [e.ts for e in v] for k, v in groups.items()} == {"a": [1, 3], "b": [2]}
    stream.close()


def test_resuming_from_a_stored_position_replays_nothing_twice(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 1)
    log.append(
        topic,
        [
            Append(0, ev(5)),
            Append(0, ev(25)),
            Append(0, tick(20)),
            Append(0, ev(22)),
            Append(0, tick(30)),
        ],
    )
    first = make_stream(log, topic, {0: StreamPosition()})
    pack = drain(first, 1)[0]
    first.close()
    assert [e.ts for e in pack.events] == [5]
    resumed = make_stream(log, topic, {0: pack.position})
    (nxt,) = drain(resumed, 1)
    assert [e.ts for e in nxt.events] == [22, 25]
    resumed.close()


def test_stale_tick_promises_nothing(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 1)
    log.append(
        topic, [Append(0, tick(10)), Append(0, tick(10)), Append(0, tick(5)), Append(0, tick(11))]
    )
    stream = make_stream(log, topic, {0: StreamPosition()})
    assert [p.end_ts for p in drain(stream, 2)] == [10, 11]
    stream.close()


def test_malformed_record_goes_to_dead_letters_and_consumption_goes_on(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 1)
    offsets = log.append(topic, [Append(0, b"not avro"), Append(0, ev(3)), Append(0, tick(4))])
    letters: list[tuple[Record, str]] = []
    stream = make_stream(log, topic, {0: StreamPosition()}, letters)
    (pack,) = drain(stream, 1)
    assert [e.ts for e in pack.events] == [3]
    assert len(letters) == 1
    rec, reason = letters[0]
    assert (rec.offset, rec.value) == (offsets[0], b"not avro") and "magic" in reason
    stream.close()


def test_dead_letter_record_keeps_reason_position_and_bytes(log: Log):
    from vectorlog.streams.deadletter import DeadLetterWriter

    dlq = unique_topic("dlq")
    log.create_topic(dlq, 1)
    DeadLetterWriter(log, dlq, "qn")(Record("src", 3, 42, b"raw"), "bad bytes")
    reader = log.reader(dlq, {0: 0})
    (rec,) = reader.poll(10, 5.0)
    reader.close()
    letter = parse(rec)
    assert (
        letter.reason,
        letter.topic,
        letter.partition,
        letter.offset,
        letter.value,
        letter.processor,
    ) == ("bad bytes", "src", 3, 42, b"raw", "qn")
