"""A query node's dml stream opened while its segments load (processors/querynode/
early_stream.py), on both log backends: the stream opened ahead at the positions `start`
uses is the one it consumes (the ticks of the liveness window before its resume offset read
back meanwhile: its first new tick is cut at once); opened at other positions (a load that
failed and resumes from offset 0), or failing to open, it is not used."""

from __future__ import annotations

from typing import Any

from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.processors.querynode.early_stream import EarlyStream
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.msgstream import StreamPosition, TickPolicy, TtMsgStream

SERDE = EventSerde()
WARM = TickPolicy(warm_up=True)


def tick(log: Log, topic: str, source: str, ms_ago: int) -> tuple[int, int]:
    """Appends `source`'s tick stamped `ms_ago` ms before now; returns (offset, ts)."""
    ts = compose(wall_ms() - ms_ago)
    event = SERDE.encode(Event("TimeTick", ts, {"source": source}))
    return log.append(topic, [Append(0, event)])[0], ts


def _ignore(*_: Any) -> None:
    raise AssertionError("nothing is dead-lettered here")


@on_backends()
def test_the_stream_opened_ahead_is_consumed_at_its_positions(log: Log):
    topic = unique_topic("dml")
    log.create_topic(topic, 1)
    for ms_ago in (7000, 6000, 3000):  # two writers, a liveness window of ticks
        tick(log, topic, "a", ms_ago)
        offset, ts = tick(log, topic, "b", ms_ago)
    at = {0: StreamPosition(offset + 1, ts, offset)}  # resumed after the last of them
    opened: list[TtMsgStream] = []

    def opener(positions: dict[int, StreamPosition]) -> TtMsgStream:
        opened.append(TtMsgStream(log, topic, positions, SERDE, _ignore, ticks=WARM))
        return opened[-1]

    stream = EarlyStream(at, opener).take(dict(at))
    assert stream is not None and stream is opened[0]
    try:
        _, first = tick(log, topic, "a", 0)
        tick(log, topic, "b", 0)
        packs = []
        for _ in range(100):
            packs += stream.consume(timeout=0.1)
            if packs:
                break
        assert [p.end_ts for p in packs] == [first]  # the minimum over both writers
    finally:
        stream.close()
    elsewhere = EarlyStream(at, opener)
    assert elsewhere.take({0: StreamPosition()}) is None
    assert len(opened) == 2


@on_backends()
def test_a_stream_that_failed_to_open_ahead_is_not_used(log: Log):
    def opener(positions: dict[int, StreamPosition]) -> TtMsgStream:
        raise LogError("the broker went away (test)")

    at = {0: StreamPosition()}
    assert EarlyStream(at, opener).take(dict(at)) is None
