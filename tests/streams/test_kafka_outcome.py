"""What a failed Kafka append means, read from its delivery reports (no broker needed): a
plain KafkaLogError only when every record was refused, AppendOutcomeUnknown otherwise; and a
producer that reports a broken state is replaced."""

from __future__ import annotations

from confluent_kafka import KafkaError

from vectorlog.core.errors import WriteOutcomeUnknown
from vectorlog.streams.errors import AppendOutcomeUnknown, KafkaLogError
from vectorlog.streams.log.kafkaproduce import Acks, Producers


class Delivered:
    """The part of a confluent-kafka Message a delivery report reads."""

    def __init__(self, offset: int | None) -> None:
        self._offset = offset

    def offset(self) -> int | None:
        return self._offset


def reported(*reports: tuple[KafkaError | None, int | None]) -> Acks:
    acks = Acks(len(reports))
    for i, (err, offset) in enumerate(reports):
        acks.callback(i)(err, Delivered(offset))
    assert acks.done.is_set()
    return acks


TOO_LARGE = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large")
TIMED_OUT = KafkaError(KafkaError._MSG_TIMED_OUT, "Local: Message timed out")
FENCED = KafkaError(KafkaError.PRODUCER_FENCED, "fenced")


def test_every_record_delivered_is_no_failure() -> None:
    acks = reported((None, 4), (None, 9))
    assert acks.failure("append to t") is None and acks.offsets == [4, 9]
    assert acks.broken() is None


def test_records_all_refused_by_the_broker_are_a_plain_error() -> None:
    failure = reported((TOO_LARGE, None), (TOO_LARGE, None)).failure("append to t")
    assert type(failure) is KafkaLogError and "MSG_SIZE_TOO_LARGE" in str(failure)


def test_a_record_not_queued_by_librdkafka_is_a_plain_error() -> None:
    acks = Acks(3)
    acks.refuse_rest(0, KafkaError(KafkaError._FATAL, "fatal", fatal=True))
    assert acks.done.is_set()
    assert type(acks.failure("append to t")) is KafkaLogError
    assert acks.broken() is not None  # the producer is replaced all the same


def test_a_timed_out_record_leaves_the_outcome_unknown() -> None:
    acks = reported((TIMED_OUT, None), (TOO_LARGE, None))
    failure = acks.failure("append to t")
    assert isinstance(failure, AppendOutcomeUnknown) and isinstance(failure, WriteOutcomeUnknown)
    assert "_MSG_TIMED_OUT" in str(failure) and "0 of 2 records acknowledged" in str(failure)
    assert acks.broken() is TIMED_OUT


def test_an_append_partly_delivered_is_outcome_unknown() -> None:
    failure = reported((None, 3), (TOO_LARGE, None)).failure("append to t")
    assert isinstance(failure, AppendOutcomeUnknown) and "1 of 2" in str(failure)


def test_a_fenced_producer_is_broken_and_the_outcome_unknown() -> None:
    acks = reported((FENCED, 0))
    assert isinstance(acks.failure("append to t"), AppendOutcomeUnknown)
    assert acks.broken() is FENCED


def test_a_producer_that_went_fatal_is_replaced_before_the_next_append() -> None:
    producers = Producers({"bootstrap.servers": "127.0.0.1:9"}, "test")
    try:
        first = producers.current()
        assert producers.current() is first
        first.fatal = KafkaError(KafkaError._FATAL, "fatal", fatal=True)
        second = producers.current()
        assert second is not first and second.fatal is None
        producers.replace(first, FENCED)  # no longer current: nothing happens
        assert producers.current() is second
    finally:
        producers.close(0)
