"""Large dml records decoded once for every stream of one serde (schemas/shared_decodes.py),
on both log backends: each stream gets the same events, in envelopes of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.support import unique_topic
from vectorlog.core.model import DataType
from vectorlog.schemas.columns import decode_column, encode_column
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.schemas.shared_decodes import MIN_BYTES, SharedDecodes
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.msgstream import MsgPack, StreamPosition, TtMsgStream


def rows(first: int, n: int = 10_000) -> Event:
    """Returns a RowsInserted of `n` int64 keys from `first` (a record past MIN_BYTES)."""
    column = encode_column(DataType.INT64, np.arange(first, first + n))
    body = {
        "collection_id": 1,
        "partition_id": 2,
        "segment_id": 3,
        "first_row_id": first,
        "num_rows": n,
        "columns": [{"field_id": 100, "field_name": "id", "column": column}],
    }
    return Event("RowsInserted", 10 + first, body, 1, "v0")


def tick(serde: EventSerde, ts: int) -> Append:
    return Append(0, serde.encode(Event("TimeTick", ts, {"source": "t"}, 0, "")))


def packs_of(stream: TtMsgStream, want: int) -> list[MsgPack]:
    packs: list[MsgPack] = []
    deadline = time.monotonic() + 15
    while len(packs) < want and time.monotonic() < deadline:
        packs += stream.consume(timeout=0.2)
    return packs


def keys(pack: MsgPack) -> list[list[int]]:
    return event_keys(pack.events)


def event_keys(events: list[Event]) -> list[list[int]]:
    return [decode_column(e.body["columns"][0]["column"], 10_000).tolist() for e in events]


def test_two_streams_of_one_serde_get_equal_events_decoded_once(log: Log) -> None:
    serde, topic = EventSerde(), unique_topic()
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, serde.encode(rows(0))), Append(0, serde.encode(rows(50_000)))])
    log.append(topic, [tick(serde, 90_000)])
    streams = [TtMsgStream(log, topic, {0: StreamPosition()}, serde, lambda r, why: None)]
    streams.append(TtMsgStream(log, topic, {0: StreamPosition()}, serde, lambda r, why: None))
    first, second = (packs_of(s, 1) for s in streams)
    assert keys(first[0]) == keys(second[0]) == [list(range(10_000)), list(range(50_000, 60_000))]
    assert serde.shared.hits == 2  # the second stream decoded neither record
    for a, b in zip(first[0].events, second[0].events, strict=True):
        assert a == b and a is not b and a.body is not b.body
        assert a.source == b.source
    first[0].events[0].body["segment_id"] = 99  # a reader's change stays its own
    assert second[0].events[0].body["segment_id"] == 3
    for s in streams:
        s.close()


def two_readers(shared: SharedDecodes, topic: str = "t") -> SharedDecodes:
    shared.join(topic)
    shared.join(topic)
    return shared


def test_other_bytes_at_a_kept_position_are_decoded_afresh() -> None:
    serde, shared = EventSerde(), two_readers(SharedDecodes())
    one, other = serde.encode(rows(0)), serde.encode(rows(7))
    kept = shared.put(("t", 0, 5), one, serde.decode(one))
    assert shared.get(("t", 0, 5), other) is None  # another log's (or a rewritten) record
    again = shared.get(("t", 0, 5), bytes(bytearray(one)))  # equal bytes, another object
    assert again == kept and again is not kept and shared.hits == 1


def test_small_records_are_not_kept_and_the_budget_drops_the_oldest() -> None:
    serde = EventSerde()
    small = serde.encode(rows(0, n=3))
    big = [serde.encode(rows(i * 100_000)) for i in range(3)]
    shared = two_readers(SharedDecodes(budget_bytes=len(big[1]) + len(big[2])))
    shared.put(("t", 0, 9), small, serde.decode(small))
    assert shared.get(("t", 0, 9), small) is None
    for i, data in enumerate(big):
        shared.put(("t", 0, i), data, serde.decode(data))
    assert shared.get(("t", 0, 0), big[0]) is None  # the oldest went over the budget
    for i in (1, 2):
        got = shared.get(("t", 0, i), big[i])
        assert got is not None and event_keys([got]) == event_keys([serde.decode(big[i])])


def test_a_topic_with_one_reader_keeps_nothing() -> None:
    serde, shared = EventSerde(), SharedDecodes()
    data = serde.encode(rows(0))
    shared.join("t")
    shared.put(("t", 0, 0), data, serde.decode(data))
    assert shared.get(("t", 0, 0), data) is None
    two_readers(shared, "u").leave("u")  # two joined, one left: "u" has one reader
    shared.put(("u", 0, 0), data, serde.decode(data))
    assert shared.get(("u", 0, 0), data) is None


class SlowSerde(EventSerde):
    """An EventSerde whose decodes take 0.2 s and are counted (so two readers overlap)."""

    def __init__(self) -> None:
        super().__init__()
        self.decodes = 0

    def decode(self, data: bytes) -> Event:
        if len(data) >= MIN_BYTES:  # a tick decodes at once
            self.decodes += 1
            time.sleep(0.2)
        return super().decode(data)


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Runs `calls` on threads started together; returns each one's result or error."""
    out: list[Any] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(i: int) -> None:
        start.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_a_record_two_readers_reach_at_once_is_decoded_once() -> None:
    serde = SlowSerde()
    two_readers(serde.shared)
    data = serde.encode(rows(0))
    first, second = at_once(*[lambda: serde.decode_at(("t", 0, 4), data)] * 2)
    assert serde.decodes == 1 and serde.shared.hits == 1  # the second waited for the first's
    assert first is not second and first.body is not second.body
    assert event_keys([first]) == event_keys([second]) == [list(range(10_000))]


def test_a_reader_of_other_bytes_at_a_position_being_decoded_gets_its_own() -> None:
    serde = SlowSerde()
    two_readers(serde.shared)
    one, other = serde.encode(rows(0)), serde.encode(rows(7))
    got = at_once(
        lambda: serde.decode_at(("t", 0, 4), one), lambda: serde.decode_at(("t", 0, 4), other)
    )
    assert serde.decodes == 2
    assert event_keys(got) == [list(range(10_000)), list(range(7, 10_007))]


def test_readers_of_a_malformed_record_being_decoded_each_get_its_error() -> None:
    serde = SlowSerde()
    two_readers(serde.shared)
    data = serde.encode(rows(0))
    bad = data[:-3] + b"\xff\xff\xff"
    got = at_once(*[lambda: serde.decode_at(("t", 0, 4), bad)] * 2)
    assert [type(e) for e in got] == [MalformedEvent, MalformedEvent]
    assert serde.decode_at(("t", 0, 4), data).body["num_rows"] == 10_000  # nothing kept


def test_two_streams_reading_at_once_decode_each_large_record_once(log: Log) -> None:
    serde, topic = SlowSerde(), unique_topic()
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, serde.encode(rows(0))), Append(0, serde.encode(rows(50_000)))])
    log.append(topic, [tick(serde, 90_000)])
    streams = [TtMsgStream(log, topic, {0: StreamPosition()}, serde, lambda r, why: None)]
    streams.append(TtMsgStream(log, topic, {0: StreamPosition()}, serde, lambda r, why: None))
    first, second = at_once(*[lambda s=s: packs_of(s, 1) for s in streams])
    assert serde.decodes == 2  # one per record, not per stream
    assert keys(first[0]) == keys(second[0]) == [list(range(10_000)), list(range(50_000, 60_000))]
    for s in streams:
        s.close()
