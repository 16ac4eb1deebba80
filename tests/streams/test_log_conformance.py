"""One conformance suite for every `Log` backend: what callers of `streams.log` rely on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import pytest

from tests.support import on_backends, unique_topic
from vectorlog.streams.errors import LogError, RecordTooLarge, TopicNotFound, TopicPartitionNotFound
from vectorlog.streams.log.base import Append, Log, Reader, Record, start_offsets

pytestmark = on_backends()  # every backend, as `log` (conftest)


def read(reader: Reader, count: int, timeout: float = 10.0) -> list[Record]:
    """Polls until `count` records arrived (fails after `timeout` s), then checks for extras."""
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        assert time.monotonic() < deadline, f"got {len(out)} of {count} records"
        out += reader.poll(max_records=count - len(out), timeout=0.2)
    extra = reader.poll(timeout=0.05)
    assert not extra, f"unexpected records {extra[:3]}"
    return out


def read_from(log: Log, topic: str, positions: dict[int, int], count: int) -> list[Record]:
    reader = log.reader(topic, positions)
    try:
        return read(reader, count)
    finally:
        reader.close()


def by_partition(records: Iterable[Record]) -> dict[int, list[Record]]:
    out: dict[int, list[Record]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def test_create_topic_is_idempotent_and_a_partition_clash_is_an_error(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 3)
    log.create_topic(topic, 3)
    assert log.partitions(topic) == 3
    with pytest.raises(LogError, match=topic):
        log.create_topic(topic, 5)
    assert log.partitions(topic) == 3
    compacted = unique_topic("compacted")
    log.create_topic(compacted, 2, compacted=True)
    assert log.partitions(compacted) == 2


def test_append_returns_dense_offsets_per_partition_in_input_order(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 3)
    parts = [0, 2, 0, 1, 0, 2]
    first = log.append(topic, [Append(p, f"a{i}".encode()) for i, p in enumerate(parts)])
    assert first == [0, 0, 1, 0, 2, 1]
    second = log.append(topic, [Append(2, b"b0"), Append(0, b"b1"), Append(1, b"b2")])
    assert second == [2, 3, 1]
    assert log.append(topic, []) == []
    got = by_partition(read_from(log, topic, {0: 0, 1: 0, 2: 0}, 9))
    assert [(r.offset, r.value) for r in got[0]] == [(0, b"a0"), (1, b"a2"), (2, b"a4"), (3, b"b1")]
    assert [(r.offset, r.value) for r in got[1]] == [(0, b"a3"), (1, b"b2")]
    assert [(r.offset, r.value) for r in got[2]] == [(0, b"a1"), (1, b"a5"), (2, b"b0")]


def test_a_partition_nothing_deleted_from_starts_at_offset_0(log: Log) -> None:
    """Where retention deleted nothing, every partition's first held offset is 0: a query
    node that must replay dml from 0 trusts this to tell a complete log from a cut one."""
    topic = unique_topic()
    log.create_topic(topic, 2)
    assert start_offsets(log, topic) == {0: 0, 1: 0}
    log.append(topic, [Append(0, b"a"), Append(0, b"b"), Append(1, b"c")])
    assert start_offsets(log, topic) == {0: 0, 1: 0}
    with pytest.raises(TopicNotFound):
        start_offsets(log, unique_topic())


def test_reader_starts_at_the_stored_position_and_reads_in_offset_order(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 1)
    for batch in range(3):  # several batches: offsets must not depend on batching
        log.append(topic, [Append(0, f"{batch * 10 + i}".encode()) for i in range(10)])
    got = read_from(log, topic, {0: 17}, 13)
    assert [r.offset for r in got] == list(range(17, 30))
    assert [r.value for r in got] == [str(i).encode() for i in range(17, 30)]
    assert {(r.topic, r.partition) for r in got} == {(topic, 0)}


def test_keys_and_values_round_trip(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 1)
    sent = [
        Append(0, b"no key"),
        Append(0, b"v", key=b"k1"),
        Append(0, b"\x00\xff binary", key=b"\x00\x01\xfe"),
        Append(0, b"", key=b"empty value"),
        Append(0, b"last", key=None),
    ]
    log.append(topic, sent)
    got = read_from(log, topic, {0: 0}, len(sent))
    assert [(r.key, r.value) for r in got] == [(a.key, a.value) for a in sent]


def test_headers_round_trip_in_order_with_repeats(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 1)
    sent = [
        Append(0, b"v", key=b"k", headers=(("collection", b"books"), ("trace", b"\x00\xff"))),
        Append(0, b"no headers"),
        Append(0, b"", key=None, headers=(("a", b"1"), ("a", b"2"), ("empty", b""))),
    ]
    log.append(topic, sent)
    got = read_from(log, topic, {0: 0}, len(sent))
    assert [(r.key, r.value, r.headers) for r in got] == [(a.key, a.value, a.headers) for a in sent]
    assert got[0].header("collection") == b"books"
    assert got[2].header("a") == b"2" and got[1].header("a") is None


def test_headers_count_toward_the_message_size(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 1)
    room = log.max_message_bytes - 10
    with pytest.raises(RecordTooLarge):
        log.append(topic, [Append(0, b"x" * room, headers=(("h", b"y" * 20),))])


def test_reader_over_several_partitions_gets_every_record(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 4)
    sent = [Append(i % 4, f"{i}".encode(), key=f"k{i}".encode()) for i in range(200)]
    offsets = log.append(topic, sent)
    got = read_from(log, topic, {p: 0 for p in range(4)}, 200)
    assert sorted((r.partition, r.offset, r.key, r.value) for r in got) == sorted(
        (a.partition, off, a.key, a.value) for a, off in zip(sent, offsets, strict=True)
    )
    for records in by_partition(got).values():
        assert [r.offset for r in records] == sorted(r.offset for r in records)


def test_reader_tails_records_appended_after_it_started(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 2)
    log.append(topic, [Append(0, b"old")])
    reader = log.reader(topic, {0: 1, 1: 0})
    try:
        assert reader.poll(timeout=0.2) == []
        timer = threading.Timer(0.2, log.append, (topic, [Append(1, b"new1"), Append(0, b"new0")]))
        timer.start()
        started = time.monotonic()
        got = reader.poll(timeout=5.0)
        while len(got) < 2 and time.monotonic() - started < 5:
            got += reader.poll(timeout=0.5)
        waited = time.monotonic() - started
        timer.join()
        assert sorted((r.partition, r.offset, r.value) for r in got) == [
            (0, 1, b"new0"),
            (1, 0, b"new1"),
        ]
        assert waited < 2.0, f"tailing took {waited:.2f} s"
    finally:
        reader.close()


def test_seek_moves_one_partition_back_and_forward(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 2)
    log.append(topic, [Append(p, f"{p}:{i}".encode()) for i in range(10) for p in (0, 1)])
    reader = log.reader(topic, {0: 0, 1: 0})
    try:
        assert len(read(reader, 20)) == 20
        reader.seek(topic, 0, 3)
        assert [(r.partition, r.offset) for r in read(reader, 7)] == [(0, i) for i in range(3, 10)]
        reader.seek(topic, 1, 8)
        reader.seek(topic, 0, 9)
        got = sorted((r.partition, r.offset, r.value) for r in read(reader, 3))
        assert got == [(0, 9, b"0:9"), (1, 8, b"1:8"), (1, 9, b"1:9")]
        with pytest.raises(TopicPartitionNotFound):
            reader.seek(topic, 5, 0)
    finally:
        reader.close()


def test_record_over_the_size_limit_raises_and_appends_nothing(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 2)
    limit = log.max_message_bytes
    batch = [Append(0, b"ok"), Append(1, b"x" * limit, key=b"k"), Append(1, b"ok")]
    with pytest.raises(RecordTooLarge) as raised:
        log.append(topic, batch)
    assert (raised.value.size, raised.value.limit) == (limit + 1, limit)
    # Nothing of the batch landed: the next records get offset 0 and are all there is.
    at_limit = b"y" * (limit - 3)
    assert log.append(topic, [Append(0, b"after"), Append(1, at_limit, key=b"key")]) == [0, 0]
    got = sorted(
        (r.partition, r.offset, r.key, r.value) for r in read_from(log, topic, {0: 0, 1: 0}, 2)
    )
    assert got == [(0, 0, None, b"after"), (1, 0, b"key", at_limit)]


def test_unknown_topic_raises_topic_not_found(log: Log) -> None:
    topic = unique_topic("missing")
    with pytest.raises(TopicNotFound):
        log.partitions(topic)
    with pytest.raises(TopicNotFound):
        log.append(topic, [Append(0, b"v")])
    with pytest.raises(TopicNotFound):
        log.reader(topic, {0: 0})
    with pytest.raises(TopicNotFound):  # and asking did not create it
        log.partitions(topic)


def test_unknown_partition_raises_partition_not_found(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 2)
    with pytest.raises(TopicPartitionNotFound):
        log.append(topic, [Append(0, b"fine"), Append(2, b"no such partition")])
    with pytest.raises(TopicPartitionNotFound):
        log.append(topic, [Append(-1, b"v")])
    with pytest.raises(TopicPartitionNotFound):
        log.reader(topic, {0: 0, 3: 0})
    assert log.append(topic, [Append(0, b"first")]) == [0]


def test_concurrent_appends_are_all_acknowledged_once_with_dense_offsets(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 3)
    threads, per_thread, batch = 4, 200, 20
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for b in range(0, per_thread, batch):
                sent = [Append((t + i) % 3, f"{t}:{b + i}".encode()) for i in range(batch)]
                offsets = log.append(topic, sent)
                for a, off in zip(sent, offsets, strict=True):
                    acked[a.value] = (a.partition, off)
                for p in range(3):  # input order is offset order within a partition
                    mine = [off for a, off in zip(sent, offsets, strict=True) if a.partition == p]
                    assert mine == sorted(mine)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors, errors
    total = threads * per_thread
    assert len(acked) == total
    offsets_by_partition = by_partition(Record(topic, p, off, v) for v, (p, off) in acked.items())
    for records in offsets_by_partition.values():
        assert sorted(r.offset for r in records) == list(range(len(records)))
    got = read_from(log, topic, {p: 0 for p in range(3)}, total)
    assert {r.value: (r.partition, r.offset) for r in got} == acked
    assert len(got) == total
