"""The readers of a process's shared topics (streams.log.shared_tail), on every backend: each
returns what a reader of its own would (the conformance suite again, through the view), from
its own position, past a window it fell out of, and with its own lease fence."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.streams.test_log_conformance import *  # noqa: F403 (the suite, through the view)
from tests.streams.test_log_conformance import read
from tests.support import on_backends, unique_topic
from vectorlog.streams.log import shared_tail
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.log.lease_fence import FENCED_SOURCE, lease_headers, seeded
from vectorlog.streams.log.shared_tail import SharedTailLog, TailReader

pytestmark = on_backends()


@pytest.fixture
def log(log: Log) -> Iterator[Log]:
    """The backend's log with every topic's readers shared (the conformance suite's `log`)."""
    yield SharedTailLog(log, None)  # closed with the backend's by its fixture


def values(records: list) -> list[bytes]:
    return [r.value for r in records]


def test_readers_share_one_reader_and_each_reads_from_its_own_position(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 2)
    log.append(topic, [Append(i % 2, b"%d" % i) for i in range(10)])
    first, second = log.reader(topic, {0: 0, 1: 0}), log.reader(topic, {0: 3})
    assert isinstance(first, TailReader)
    assert values(read(first, 10)) == [b"%d" % i for i in (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)]
    assert values(read(second, 2)) == [b"6", b"8"]
    log.append(topic, [Append(0, b"new")])
    assert values(read(first, 1)) == values(read(second, 1)) == [b"new"]
    second.seek(topic, 0, 1)  # back, within what the shared reader read
    assert values(read(second, 5)) == [b"2", b"4", b"6", b"8", b"new"]
    assert len(log._tails) == 1  # type: ignore[attr-defined]
    first.close()
    second.close()


def test_a_reader_before_the_window_reads_alone_and_then_from_it(
    log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_tail, "WINDOW", 3)
    topic = unique_topic()
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, b"%d" % i) for i in range(8)])
    tailing = log.reader(topic, {0: 0})
    assert values(read(tailing, 8)) == [b"%d" % i for i in range(8)]  # the window: 5, 6, 7
    behind = log.reader(topic, {0: 1})
    assert values(read(behind, 7)) == [b"%d" % i for i in range(1, 8)]
    log.append(topic, [Append(0, b"8")])
    assert values(read(behind, 1)) == values(read(tailing, 1)) == [b"8"]
    assert behind._own is None  # type: ignore[attr-defined]  # back on the shared reader
    behind.seek(topic, 0, 0)  # before the window again
    assert values(read(behind, 9)) == [b"%d" % i for i in range(9)]
    tailing.close()
    behind.close()


def test_each_reader_hides_a_fenced_leaders_record_by_its_own_seeded_fence(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, b"old", None, lease_headers([("datacoord", 1)]))])
    log.append(topic, [Append(0, b"new", None, lease_headers([("datacoord", 2)]))])
    log.append(topic, [Append(0, b"late", None, lease_headers([("datacoord", 1)]))])
    tailing = log.reader(topic, {0: 0})
    got = read(tailing, 3)
    assert values(got)[:2] == [b"old", b"new"] and FENCED_SOURCE.encode() in got[2].value
    unseeded, seeded_late = log.reader(topic, {0: 2}), log.reader(topic, {0: 2})
    assert values(read(unseeded, 1)) == [b"late"]  # as a reader of its own: it saw no epoch 2
    seeded(seeded_late, {0: {"datacoord": 2}})
    assert FENCED_SOURCE.encode() in read(seeded_late, 1)[0].value
    for r in (tailing, unseeded, seeded_late):
        r.close()


def test_a_shared_reader_left_without_readers_closes_and_a_new_reader_starts_another(
    log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_tail, "LINGER_S", 0.2)
    topic = unique_topic()
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, b"a")])
    once = log.reader(topic, {0: 0})
    assert values(read(once, 1)) == [b"a"]
    once.close()
    tails = log._tails  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while topic in tails:
        assert time.monotonic() < deadline, "the shared reader was not closed"
        time.sleep(0.05)
    log.append(topic, [Append(0, b"b")])
    again = log.reader(topic, {0: 0})
    assert values(read(again, 2)) == [b"a", b"b"]
    again.close()


def test_waking_the_readers_ends_a_waiting_poll(log: Log) -> None:
    topic = unique_topic()
    log.create_topic(topic, 1)
    reader = log.reader(topic, {0: 0})
    got: list[list] = []
    waiting = threading.Thread(target=lambda: got.append(reader.poll(timeout=120.0)))
    waiting.start()
    deadline = time.monotonic() + 60.0  # woken until it returns: it may not wait yet
    while waiting.is_alive() and time.monotonic() < deadline:
        log.wake_readers()  # type: ignore[attr-defined]
        waiting.join(0.5)
    assert got == [[]]  # it returned, with nothing, long before its timeout
    reader.close()
