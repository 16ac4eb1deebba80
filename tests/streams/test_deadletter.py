"""Dead letters always fit, are written once per record and processor however often a
processor restarts, are read without writing, and a failed append is retried (issue 7,
items 5, 7 and 13), on both backends."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from tests.streams.flaky import FlakyLog
from tests.support import on_backends, unique_topic, wait_until
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.deadletter import (
    MAX_REASON_CHARS,
    DeadLetterAbandoned,
    DeadLetterWriter,
    encode,
    parse,
    read_dead_letters,
)
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.scan import read_all


def dlq_topic(log: Log) -> str:
    topic = unique_topic("dlq")
    log.create_topic(topic, 1)
    return topic


@on_backends()
def test_the_dead_letter_of_a_record_at_the_size_limit_fits(log: Log):
    dlq = dlq_topic(log)
    raw = os.urandom(log.max_message_bytes)  # as large as any record the log takes
    DeadLetterWriter(log, dlq, "qn")(Record("src", 2, 7, raw), "bad: " + "x" * 100_000)
    (letter,) = read_dead_letters(log, dlq)
    assert (letter.topic, letter.partition, letter.offset, letter.processor) == ("src", 2, 7, "qn")
    assert letter.truncated and letter.size == len(raw)
    assert letter.sha256 == hashlib.sha256(raw).hexdigest()
    assert raw.startswith(letter.value) and len(letter.value) > len(raw) - 4096
    assert letter.reason.startswith("bad: xxx") and len(letter.reason) < MAX_REASON_CHARS + 50


@on_backends()
def test_a_small_dead_letter_keeps_every_byte(log: Log):
    dlq = dlq_topic(log)
    DeadLetterWriter(log, dlq, "qn")(Record("src", 0, 1, b"raw"), "bad bytes")
    (letter,) = read_dead_letters(log, dlq)
    assert (letter.value, letter.size, letter.truncated) == (b"raw", 3, False)
    assert letter.sha256 == hashlib.sha256(b"raw").hexdigest()


def test_a_dead_letter_fits_a_tiny_limit_too():
    append = encode(Record("src", 0, 1, b"y" * 5000), "why " * 1000, "qn", 1000)
    assert len(append.value) + len(append.key or b"") <= 1000
    letter = parse(Record("dlq", 0, 0, append.value, append.key))
    assert letter.truncated and letter.size == 5000 and letter.reason.startswith("why")


@on_backends()
def test_one_dead_letter_per_record_and_processor_however_often_it_restarts(log: Log):
    dlq = dlq_topic(log)
    bad, other = Record("src", 1, 5, b"bad"), Record("src", 1, 6, b"bad too")
    for _ in range(3):  # each writer is a processor (re)started on the same log
        writer = DeadLetterWriter(log, dlq, "qn")
        assert writer.contains(bad) == (_ > 0)
        writer(bad, "undecodable")
        writer(bad, "undecodable, again")
        assert writer.contains(bad) and not writer.contains(other)
    DeadLetterWriter(log, dlq, "dn")(bad, "undecodable")  # another processor: its own letter
    every = [parse(r) for r in read_all(log, dlq)]
    assert sorted((d.processor, d.offset, d.reason) for d in every) == [
        ("dn", 5, "undecodable"),
        ("qn", 5, "undecodable"),
    ]


@on_backends()
def test_reading_skips_records_that_are_not_dead_letters_and_old_duplicates(log: Log):
    dlq = dlq_topic(log)
    writer = DeadLetterWriter(log, dlq, "qn")
    writer(Record("src", 0, 1, b"a"), "first")
    marker = EventSerde().encode(Event("TimeTick", 0, {"source": "end-marker"}))
    copy = encode(Record("src", 0, 1, b"a"), "first", "qn", log.max_message_bytes)
    log.append(dlq, [Append(0, marker), copy, Append(0, b"junk", b"not json")])  # old versions
    writer(Record("src", 0, 2, b"b"), "second")
    for _ in range(2):
        letters = read_dead_letters(log, dlq)
        assert [(d.offset, d.reason) for d in letters] == [(1, "first"), (2, "second")]
    assert len(list(read_all(log, dlq))) == 5  # reading appended nothing


@on_backends()
def test_a_failed_dead_letter_append_is_retried_until_it_is_written(log: Log):
    dlq = dlq_topic(log)
    flaky = FlakyLog(log, dlq)
    writer, stop = DeadLetterWriter(flaky, dlq, "qn"), threading.Event()
    reported: list[Exception] = []
    flaky.down.set()
    args = (Record("src", 0, 3, b"bad"), "bad", stop, reported.append)
    thread = threading.Thread(target=writer.write_retrying, args=args)
    thread.start()
    wait_until(lambda: flaky.failures >= 3, 10, "three failed appends")
    assert thread.is_alive() and read_dead_letters(log, dlq) == []
    flaky.down.clear()
    thread.join(10)
    assert not thread.is_alive() and len(reported) >= 3
    assert [d.offset for d in read_dead_letters(log, dlq)] == [3]


@on_backends()
def test_a_retried_dead_letter_is_abandoned_when_the_processor_stops(log: Log):
    dlq = dlq_topic(log)
    flaky = FlakyLog(log, dlq)
    flaky.down.set()
    stop = threading.Event()
    writer = DeadLetterWriter(flaky, dlq, "qn")
    stopper = threading.Timer(0.3, stop.set)  # the processor stops while the dlq is down
    stopper.start()
    with pytest.raises(DeadLetterAbandoned, match=r"src\[0\]@3"):
        writer.write_retrying(Record("src", 0, 3, b"bad"), "bad", stop)
    stopper.join()
    assert flaky.failures >= 1 and read_dead_letters(log, dlq) == []
