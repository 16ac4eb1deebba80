"""Log retention: the embedded log deletes records below an offset and keeps every other
offset, and tells the bytes a partition holds; the sweeper deletes only records below every
consumer's floor that are older than the retention or, oldest first, take a partition past the
retention size; Kafka topics get the retention as their retention.ms and retention.bytes."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose
from vectorlog.streams.errors import LogError, OffsetOutOfRange
from vectorlog.streams.log.base import Append, Log, start_offsets
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.streams.log.sizeindex import SIZE
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


def test_a_partition_whose_every_record_was_deleted_goes_on_from_its_end_after_a_reopen(
    tmp_path: Path,
):
    """Offsets are never handed out twice: a reopen found no record of the partition and
    started it at offset 0 again, below its start (a reader at its position never saw the
    next record; a snapshot deleting every record of coord or ddl left them so)."""
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("t", 1)
    log.append("t", [Append(0, b"%d" % i) for i in range(5)])
    assert log.truncate("t", 0, 5) == 5
    log.close()
    reopened = EmbeddedLog(tmp_path / "log")
    assert reopened.end_offsets("t") == {0: 5} and reopened.start_offsets("t") == {0: 5}
    assert reopened.append("t", [Append(0, b"next")]) == [5]
    assert values(reopened, "t", 0, 5) == [(5, b"next")]
    reopened.close()


@on_backends()
def test_a_topic_no_one_truncated_starts_at_zero(log: Log):
    topic = unique_topic()
    log.create_topic(topic, 2, retention_ms=60_000)
    log.append(topic, [Append(0, b"a")])
    assert start_offsets(log, topic) == {0: 0, 1: 0}


@on_backends("kafka")
def test_kafka_topics_get_the_retention_as_retention_ms_and_bytes(log: Log, kafka_bootstrap: str):
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = unique_topic()
    log.create_topic(topic, 2, retention_ms=12345, retention_bytes=67890)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    [future] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    configs = future.result(timeout=30)
    assert (configs["retention.ms"].value, configs["retention.bytes"].value) == ("12345", "67890")


def test_the_log_tells_the_bytes_a_partition_holds_from_an_offset_on(tmp_path: Path):
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("t", 2)
    log.append("t", [Append(0, b"x" * 100)] * 10 + [Append(1, b"y" * 1000, b"k", (("h", b"v"),))])
    size = log.bytes_from("t", 0, 0) // 10  # a record's stored size: its value and framing
    assert 100 <= size < 120 and log.bytes_from("t", 0, 0) == 10 * size
    assert [log.bytes_from("t", 0, o) for o in (3, 9, 10, 99)] == [7 * size, size, 0, 0]
    assert log.bytes_from("t", 1, 0) > 1000
    log.truncate("t", 0, 4)
    assert log.bytes_from("t", 0, 0) == log.bytes_from("t", 0, 4) == 6 * size
    log.close()
    log = EmbeddedLog(tmp_path / "log")  # the sizes are durable
    log.append("t", [Append(0, b"x" * 100)])
    assert log.bytes_from("t", 0, 0) == 7 * size
    log.close()


def test_each_partition_counts_its_own_bytes_in_an_append_that_goes_back_and_forth(
    tmp_path: Path,
):
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("t", 2)
    small, large = (
        log.append("t", [Append(0, b"x" * 100)]),
        log.append("t", [Append(1, b"y" * 300)]),
    )
    size0, size1 = log.bytes_from("t", 0, 0), log.bytes_from("t", 1, 0)
    mixed = [Append(i % 2, b"x" * 100 if i % 2 == 0 else b"y" * 300) for i in range(9)]
    assert log.append("t", mixed) == [1, 1, 2, 2, 3, 3, 4, 4, 5]
    assert (small, large) == ([0], [0])
    assert [log.bytes_from("t", 0, o) for o in range(7)] == [size0 * (6 - o) for o in range(7)]
    assert [log.bytes_from("t", 1, o) for o in range(6)] == [size1 * (5 - o) for o in range(6)]
    log.close()


def test_a_log_written_before_the_size_index_gets_it_at_open(tmp_path: Path):
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("t", 1)
    log.append("t", [Append(0, b"x" * 100)] * 10)
    held = log.bytes_from("t", 0, 0)
    log.truncate("t", 0, 2)
    log.close()
    raw = Rdict(str(tmp_path / "log"), Options(raw_mode=True))
    raw.delete_range(SIZE, SIZE + b"\xff")  # as a data dir from before the index
    raw.close()
    log = EmbeddedLog(tmp_path / "log")
    assert [log.bytes_from("t", 0, o) for o in (0, 5)] == [held * 8 // 10, held * 5 // 10]
    log.close()


def stamped(ms: int) -> bytes:
    """A record whose value is its event ts (the sweeper tests' decoder reads it back)."""
    return struct.pack(">Q", compose(ms, 0))


def event_ts(value: bytes) -> int | None:
    return struct.unpack(">Q", value)[0] if len(value) == 8 else None


def sweeper(
    log: EmbeddedLog,
    floors: list[dict[int, int]],
    now_ms: int,
    keep_ms: int | None,
    keep_bytes: int | None = None,
) -> RetentionSweeper:
    getters = [lambda f=f: f for f in floors]
    now = lambda: compose(now_ms, 0)  # noqa: E731
    return RetentionSweeper(log, "t", event_ts, getters, now, keep_ms, retention_bytes=keep_bytes)


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


def test_the_size_rule_deletes_the_oldest_records_down_to_the_limit(embedded: EmbeddedLog):
    embedded.create_topic("t", 2)
    embedded.append("t", [Append(0, b"x" * 100)] * 10)
    embedded.append("t", [Append(1, b"big" * 1000)] + [Append(1, b"x" * 100)] * 4)
    size = embedded.bytes_from("t", 0, 0) // 10  # every record of partition 0 is this large
    floors = [{0: 10, 1: 5}]
    # 4.5 records fit in partition 0: 4 are kept; in 1 only the big oldest one goes
    assert sweeper(embedded, floors, MS, None, 4 * size + size // 2).sweep() == {0: 6, 1: 1}
    assert embedded.bytes_from("t", 0, 0) == 4 * size
    assert values(embedded, "t", 0, 6)[0] == (6, b"x" * 100)
    assert sweeper(embedded, floors, MS, None, 3 * size).sweep() == {0: 7, 1: 2}  # exactly 3
    assert sweeper(embedded, floors, MS, None, 3 * size).sweep() == {0: 7, 1: 2}  # stable
    assert sweeper(embedded, floors, MS, None, 0).sweep() == {0: 10, 1: 5}


def test_the_size_rule_never_passes_a_floor(embedded: EmbeddedLog):
    embedded.create_topic("t", 3)
    embedded.append("t", [Append(p, b"x" * 100) for _ in range(10) for p in (0, 1, 2)])
    floors = [{0: 8, 1: 9}, {0: 9, 1: 3}]  # the lowest wins; partition 2 has none: kept
    assert sweeper(embedded, floors, MS, None, 0).sweep() == {0: 8, 1: 3, 2: 0}
    assert embedded.bytes_from("t", 1, 0) > 0 and values(embedded, "t", 1, 3)[0][0] == 3


def test_time_and_size_rules_together_delete_what_either_allows(embedded: EmbeddedLog):
    embedded.create_topic("t", 2)
    embedded.append("t", [Append(p, stamped(MS + i * 1000)) for i in range(20) for p in (0, 1)])
    size = embedded.bytes_from("t", 0, 0) // 20
    # now is MS + 30 s and 15 s are kept: records 0..15 are old (the time rule keeps 16..19)
    loose = sweeper(embedded, [{0: 20, 1: 20}], MS + 30_000, 15_000, 10 * size)
    assert loose.sweep() == {0: 16, 1: 16}  # 4 records are within the size: time decides
    tight = sweeper(embedded, [{0: 20, 1: 18}], MS + 30_000, 15_000, 2 * size)
    assert tight.sweep() == {0: 18, 1: 18}  # the size keeps 2, the floor of 1 keeps 18 on
    assert tight.deleted == 4 and values(embedded, "t", 0, 18)[0] == (18, stamped(MS + 18_000))


def test_a_sweeper_needs_a_time_or_a_size(embedded: EmbeddedLog):
    with pytest.raises(ValueError, match="retention_ms or retention_bytes"):
        sweeper(embedded, [], MS, None, None)


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
