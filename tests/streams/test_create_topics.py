"""Creating several topics at once (`streams.log.base.create_topics`: one request on Kafka) and
waking the readers that wait for appends (`WakesReaders`: the embedded log, at a cluster's
close) and only those of the topic appended to, on every backend."""

from __future__ import annotations

import threading

import pytest

from tests.support import on_backends, unique_topic, wait_until
from vectorlog.streams.errors import LogError, TopicNotFound
from vectorlog.streams.log.base import Append, Log, Record, TopicSpec, WakesReaders, create_topics
from vectorlog.streams.scan import read_to_end


@on_backends()
def test_create_topics_makes_each_topic_with_its_partitions(log: Log) -> None:
    one, three = unique_topic(), unique_topic()
    create_topics(log, [TopicSpec(one, 1), TopicSpec(three, 3, retention_ms=60_000)])
    assert (log.partitions(one), log.partitions(three)) == (1, 3)
    assert log.append(three, [Append(2, b"x")]) == [0]


@on_backends()
def test_create_topics_keeps_a_topic_that_exists_and_makes_the_others(log: Log) -> None:
    old, new = unique_topic(), unique_topic()
    log.create_topic(old, 2)
    log.append(old, [Append(1, b"kept")])
    create_topics(log, [TopicSpec(old, 2), TopicSpec(new, 1, compacted=True)])
    assert [r.value for r in read_to_end(log, old)] == [b"kept"]
    assert (log.partitions(old), log.partitions(new)) == (2, 1)


@on_backends()
def test_create_topics_refuses_a_partition_count_clash_naming_the_topic(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 2)
    with pytest.raises(LogError, match=topic):
        create_topics(log, [TopicSpec(topic, 3)])
    assert log.partitions(topic) == 2


@on_backends()
@pytest.mark.parametrize(("name", "partitions"), [("", 1), ("t", 0)])
def test_a_spec_without_a_name_or_partitions_is_refused_before_any_topic_is_made(
    log: Log, name: str, partitions: int
) -> None:
    fine = unique_topic()
    with pytest.raises(LogError, match="invalid topic"):
        create_topics(log, [TopicSpec(fine, 1), TopicSpec(name, partitions)])
    with pytest.raises(TopicNotFound):
        log.partitions(fine)


@on_backends("embedded")  # Kafka readers wait in librdkafka: nothing to wake
def test_woken_readers_return_before_their_timeout_and_still_read_later_appends(
    log: Log,
) -> None:
    assert isinstance(log, WakesReaders)
    topic = unique_topic()
    log.create_topic(topic, 1)
    reader = log.reader(topic, {0: 0})
    got: list[list[Record]] = []
    poller = threading.Thread(target=lambda: got.append(reader.poll(timeout=120)), daemon=True)
    poller.start()

    def woken() -> bool:
        log.wake_readers()  # again until it lands: the poll may not be waiting yet
        return not poller.is_alive() and bool(got)

    wait_until(woken, 10, "the woken poll to return (its timeout is 120 s)")
    assert got == [[]]
    log.append(topic, [Append(0, b"after")])
    assert [r.value for r in reader.poll(timeout=10)] == [b"after"]
    reader.close()


@on_backends("embedded")  # Kafka readers wait in librdkafka
def test_a_waiting_reader_sleeps_through_appends_to_other_topics(log: Log) -> None:
    mine, other = unique_topic(), unique_topic()
    create_topics(log, [TopicSpec(mine, 1), TopicSpec(other, 1)])
    reader = log.reader(mine, {0: 0})
    got: list[list[Record]] = []
    poller = threading.Thread(target=lambda: got.append(reader.poll(timeout=120)), daemon=True)
    poller.start()
    paced = threading.Event()
    for i in range(100):  # spread out, so the poll is waiting while most of them land
        log.append(other, [Append(0, b"%d" % i)])
        paced.wait(0.005)
    assert poller.is_alive() and not got  # an append to another topic woke nothing
    log.append(mine, [Append(0, b"mine")])
    wait_until(lambda: not poller.is_alive(), 10, "the poll to return its topic's append")
    assert [[r.value for r in records] for records in got] == [[b"mine"]]
    reader.close()
