"""A Kafka broker paused (SIGSTOP) past the delivery timeout, then resumed (issue 7, item 9):
the append that timed out raises AppendOutcomeUnknown, and the log recovers by itself. Runs on
a Tansu broker of its own, never the one the other tests share."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from infra.broker import Broker, BrokerError, private_tansu
from tests.support import unique_topic, wait_until
from vectorlog.core.errors import WriteOutcomeUnknown
from vectorlog.streams.errors import AppendOutcomeUnknown
from vectorlog.streams.log import kafka
from vectorlog.streams.log.base import Append, Record
from vectorlog.streams.log.kafka import KafkaLog

pytestmark = pytest.mark.kafka
DELIVERY_TIMEOUT_MS = 2000


@pytest.fixture
def broker() -> Iterator[Broker]:
    try:
        with private_tansu() as started:
            yield started
    except BrokerError as exc:
        pytest.skip(f"no Tansu broker of its own to pause: {exc}")


def read_until(log: KafkaLog, topic: str, value: bytes) -> list[Record]:
    """Reads both partitions of `topic` from 0 until `value` was seen in each."""
    reader, got = log.reader(topic, {0: 0, 1: 0}), list[Record]()

    def both_seen() -> bool:
        got.extend(reader.poll(100, 0.2))
        return {r.partition for r in got if r.value == value} == {0, 1}

    try:
        wait_until(both_seen, 30, f"{value!r} on both partitions")
    finally:
        reader.close()
    return got


def test_an_append_timed_out_by_a_paused_broker_is_outcome_unknown_then_the_log_recovers(
    broker: Broker,
) -> None:
    log = KafkaLog(broker.bootstrap, delivery_timeout_ms=DELIVERY_TIMEOUT_MS)
    try:
        topic = unique_topic()
        log.create_topic(topic, 2)
        assert log.append(topic, [Append(0, b"before")]) == [0]
        broker.pause()
        try:
            with pytest.raises(AppendOutcomeUnknown, match="_MSG_TIMED_OUT") as raised:
                log.append(topic, [Append(0, b"during"), Append(1, b"during")])
            assert isinstance(raised.value, WriteOutcomeUnknown)
        finally:
            broker.resume()
        after = log.append(topic, [Append(0, b"after"), Append(1, b"after")])  # no retry
        records = read_until(log, topic, b"after")
        assert records[0].value == b"before"
        positions = sorted((r.partition, r.offset) for r in records if r.value == b"after")
        assert positions == [(0, after[0]), (1, after[1])]
        assert log.append(topic, [Append(1, b"again")]) == [after[1] + 1]
    finally:
        log.close()


def test_an_append_cut_short_by_close_is_outcome_unknown(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka, "CLOSE_FLUSH_S", 0.1)
    log = KafkaLog(broker.bootstrap)  # the default delivery timeout: close purges first
    topic = unique_topic()
    log.create_topic(topic, 1)
    raised: list[BaseException] = []

    def append() -> None:
        try:
            log.append(topic, [Append(0, b"in flight")])
        except BaseException as exc:
            raised.append(exc)

    broker.pause()
    try:
        writer = threading.Thread(target=append)
        writer.start()
        wait_until(lambda: len(log._producers.current().client) > 0, 10, "the record queued")
        log.close()
        writer.join(30)
    finally:
        broker.resume()
    assert len(raised) == 1 and isinstance(raised[0], AppendOutcomeUnknown), raised
    assert "_PURGE" in str(raised[0])


def test_appends_are_acknowledged_after_a_failed_delivery_poll(kafka_bootstrap: str) -> None:
    """Every append waits on the log's delivery-report thread: one poll that raises (a
    callback's error, a retired producer's close) must not end it, or the next append of
    that log hangs for good."""
    log = KafkaLog(kafka_bootstrap)
    try:
        topic = unique_topic()
        log.create_topic(topic, 1)
        assert log.append(topic, [Append(0, b"first")]) == [0]
        real, failed = log._producers.poll, threading.Event()

        def poll_failing_once(timeout: float) -> None:
            if not failed.is_set():
                failed.set()
                raise RuntimeError("a delivery callback failed")
            real(timeout)

        log._producers.poll = poll_failing_once  # type: ignore[method-assign]
        wait_until(failed.is_set, 10, "the delivery thread to meet the failing poll")
        assert log.append(topic, [Append(0, b"second")]) == [1]
    finally:
        log.close()
