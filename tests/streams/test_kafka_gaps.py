"""A Kafka reader handed a record past the next offset it expects (Tansu shows a later produce's
records before an earlier one's) fetches again until the gap fills, rather than skip the
earlier records: one skipped part of an acknowledged insert made every reader that missed it
judge its batch torn and drop its rows (a failover benchmark lost rows that way)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import TopicPartition

from vectorlog.streams.log.kafka import KafkaReader
from vectorlog.streams.log.kafkagaps import OffsetGaps


class Msg:
    """A consumed message as librdkafka hands it (what KafkaReader reads of it)."""

    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._off = partition, offset

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._off

    def value(self) -> bytes:
        return f"v{self._off}".encode()

    def key(self) -> None:
        return None

    def headers(self) -> None:
        return None


class GappyConsumer:
    """A consumer of one partition holding offsets 0..`n`-1 of which `hidden` are not readable
    until `fetches_hidden` fetches were made (a fetch skips them, as Tansu's did); offsets in
    `absent` never exist (a compacted topic's)."""

    def __init__(self, n: int, hidden: set[int], fetches_hidden: int, absent: set[int]) -> None:
        self._n, self._hidden, self._left = n, hidden, fetches_hidden
        self._absent, self._pos = absent, 0

    def assign(self, tps: list[TopicPartition]) -> None:
        self._pos = tps[0].offset

    def consume(self, n: int, timeout: float) -> list[Any]:
        self._left -= 1
        hidden = self._hidden if self._left > 0 else set()
        got = [o for o in range(self._pos, self._n) if o not in hidden | self._absent][:n]
        if got:
            self._pos = got[-1] + 1
        return [Msg(0, o) for o in got]

    def poll(self, timeout: float) -> Any:
        got = self.consume(1, timeout)
        return got[0] if got else None

    def close(self) -> None:
        pass


def read_offsets(reader: KafkaReader, want: int, seconds: float = 5.0) -> list[int]:
    """Returns the offsets `reader` returns until it returned `want` records or `seconds`."""
    out: list[int] = []
    deadline = time.monotonic() + seconds
    while len(out) < want and time.monotonic() < deadline:
        out += [r.offset for r in reader.poll(100, 0.01)]
    return out


def test_records_a_fetch_skipped_are_read_once_they_become_readable() -> None:
    consumer = GappyConsumer(6, hidden={2, 3}, fetches_hidden=4, absent=set())
    reader = KafkaReader(consumer, "t", {0: 0})  # type: ignore[arg-type]
    assert read_offsets(reader, 6) == [0, 1, 2, 3, 4, 5]
    assert reader.gaps.waited == 1


def test_a_compacted_topics_gaps_are_read_past_at_once() -> None:
    consumer = GappyConsumer(6, hidden=set(), fetches_hidden=0, absent={1, 4})
    reader = KafkaReader(consumer, "t", {0: 0}, compacted=True)  # type: ignore[arg-type]
    assert read_offsets(reader, 4) == [0, 2, 3, 5]
    assert reader.gaps.waited == 0


def test_a_gap_that_never_fills_is_read_past_after_the_wait() -> None:
    consumer = GappyConsumer(4, hidden=set(), fetches_hidden=0, absent={1})
    reader = KafkaReader(consumer, "t", {0: 0})  # type: ignore[arg-type]
    reader.gaps = OffsetGaps("t", compacted=False, wait_s=0.2)
    assert read_offsets(reader, 3) == [0, 2, 3]  # the broker lost offset 1: not waited forever
