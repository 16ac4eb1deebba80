"""Readers of a Kafka log's long-poll topics (`KafkaLog(long_poll_topics=...)`: dml, coord, ddl,
dlq) let the broker hold their empty fetches longer, and still see every record: one appended while
the reader waits, and those before a seek back."""

from __future__ import annotations

import time

import pytest

from tests.support import unique_topic, wait_until
from vectorlog.config import Config, open_log
from vectorlog.streams.log.base import Append, Reader, Record
from vectorlog.streams.log.kafka import KafkaLog
from vectorlog.streams.topics import Topics

pytestmark = pytest.mark.kafka


def read_into(reader: Reader, got: list[Record], n: int) -> bool:
    """Polls `reader` into `got`; returns whether it holds `n` records."""
    got.extend(reader.poll(10, 0.2))
    return len(got) >= n


def test_a_long_poll_topics_reader_sees_a_record_appended_while_it_waits_and_after_a_seek(
    kafka_bootstrap: str,
) -> None:
    topic = unique_topic("longpoll")
    log = KafkaLog(kafka_bootstrap, long_poll_topics={topic})
    try:
        log.create_topic(topic, 1)
        log.append(topic, [Append(0, b"first")])
        reader, got = log.reader(topic, {0: 0}), list[Record]()
        wait_until(lambda: read_into(reader, got, 1), 30, "the first")
        time.sleep(1.2)  # idle: more than two of the broker's held fetches
        log.append(topic, [Append(0, b"second")])
        wait_until(lambda: read_into(reader, got, 2), 30, "the second")
        reader.seek(topic, 0, 0)
        again = list[Record]()
        wait_until(lambda: read_into(reader, again, 2), 30, "both again")
        reader.close()
    finally:
        log.close()
    assert [r.value for r in got] == [b"first", b"second"]
    assert [r.value for r in again] == [b"first", b"second"]


def test_a_kafka_config_long_polls_every_topic_but_lease_and_ingest(
    kafka_bootstrap: str,
) -> None:
    cfg = Config(log=f"kafka://{kafka_bootstrap}", cluster="quietcfg")
    log = open_log(cfg)
    try:
        assert isinstance(log, KafkaLog)
        topics = Topics("quietcfg")
        assert log.long_poll_topics == {topics.dml, topics.ddl, topics.coord, topics.dlq}
    finally:
        log.close()
