"""Log retention: the embedded log deletes records below an offset and keeps every other
offset; the sweeper deletes only records below every consumer's floor and older than the
retention; Kafka topics get the retention as their retention.ms."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import on_backends, unique_topic
from vectorlog.hybridts import compose
from vectorlog.streams.errors import LogError, OffsetOutOfRange
from vectorlog.streams.log.base import Append, Log, start_offsets
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.streams.retention import RetentionSweeper

MS = 1_000_000  # the physical ms of record 0 in the sweeper tests


def values(log: Log, topic: str, partition: int, offset: int) -> list[tuple[int, bytes]]:
    reader = log.reader(topic, {partition: offset})
    try:
        return [(r.offset, r.value) for r in reader.poll(1000, timeout=0.5)]
    finally:
        reader.close()


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedLog]:
    log = EmbeddedLog(tmp_path / "log")
    yield log
    log.close()


def test_truncate_deletes_below_an_offset_and_keeps_the_others_offsets(tmp_path: Path):
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("t", 2)
    log.append("t", [Append(p, b"%d" % i) for i in range(10) for p in (0, 1)])
    assert log.truncate("t", 0, 6) == 6
    assert log.start_offsets("t") == {0: 6, 1: 0}
    assert values(log, "t", 0, 6) == [(i, b"%d" % i) for i in range(6, 10)]
    with pytest.raises(OffsetOutOfRange, match=r"t\[0\] offset 2 .*starts at offset 6"):
        values(log, "t", 0, 2)
    assert log.truncate("t", 0, 3) == 6  # never moves back
    assert log.append("t", [Append(0, b"new")]) == [10]
    log.close()
    reopened = EmbeddedLog(tmp_path / "log")  # the start is durable
    assert reopened.start_offsets("t") == {0: 6, 1: 0}
    assert reopened.truncate("t", 1, 99) == 10  # at most up to the end
    assert values(reopened, "t", 0, 6)[-1] == (10, b"new")
    assert reopened.append("t", [Append(1, b"x")]) == [10]
    assert values(reopened, "t", 1, 10) == [(10, b"x")]
    reopened.close()


@on_backends()
def test_a_topic_no_one_truncated_starts_at_zero(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 2, retention_ms=60_000)
    log.append(topic, [Append(0, b"a")])
    assert start_offsets(log, topic) == {0: 0, 1: 0}


@on_backends("kafka")
def test_kafka_topics_get_the_retention_as_retention_ms(log: Log, kafka_bootstrap: str):
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = unique_topic()
    log.create_topic(topic, 2, retention_ms=12345)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    [future] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    assert future.result(timeout=30)["retention.ms"].value == "12345"


def stamped(ms: int) -> bytes:
    """A record whose value is its event ts (the sweeper tests' decoder reads it back)."""
    return struct.pack(">Q", compose(ms, 0))


def event_ts(value: bytes) -> int | None:
    return struct.unpack(">Q", value)[0] if len(value) == 8 else None


def sweeper(log: EmbeddedLog, floors: list[dict[int, int]], now_ms: int, keep_ms: int):
    getters = [lambda f=f: f for f in floors]
    return RetentionSweeper(log, "t", event_ts, getters, lambda: compose(now_ms, 0), keep_ms)


def test_the_sweeper_deletes_only_below_every_floor_and_older_than_the_retention(
    embedded: EmbeddedLog,
):
    embedded.create_topic("t", 2)
    embedded.append("t", [Append(p, stamped(MS + i * 1000)) for i in range(20) for p in (0, 1)])
    # record i is stamped MS + i s; now is MS + 30 s and 15 s are kept: records 0..15 are old
    floors = [{0: 18, 1: 5}, {0: 12, 1: 19}]  # the lowest floor wins: 12 and 5
    assert sweeper(embedded, floors, MS + 30_000, 15_000).sweep() == {0: 12, 1: 5}
    assert sweeper(embedded, [{0: 20, 1: 20}], MS + 30_000, 15_000).sweep() == {0: 16, 1: 16}
    assert values(embedded, "t", 0, 16)[0] == (16, stamped(MS + 16_000))
    assert sweeper(embedded, [{0: 20, 1: 20}], MS + 30_000, 15_000).sweep() == {0: 16, 1: 16}


def test_records_without_a_timestamp_take_the_next_ones(embedded: EmbeddedLog):
    embedded.create_topic("t", 1)
    olds = [Append(0, b"garbage")] * 5 + [Append(0, stamped(MS + i)) for i in range(5)]
    embedded.append("t", olds + [Append(0, stamped(MS + 100_000))])
    assert sweeper(embedded, [{0: 11}], MS + 60_000, 1_000).sweep() == {0: 10}


def test_a_log_that_cannot_truncate_is_refused():
    class NoTruncate:  # a Log without start_offsets/truncate (Kafka's case)
        pass

    with pytest.raises(LogError, match="does not delete records"):
        RetentionSweeper(NoTruncate(), "t", event_ts, [], lambda: 0, 1)  # type: ignore[arg-type]
