"""The embedded log's deferred wake-ups (`EmbeddedLog.defer_wakes`): on such a topic a
waiting reader is woken by an append holding an urgent record (the dml topic's time ticks),
not by the others, which it still reads at once when they are there; other topics' readers
are woken by every append. The embedded log only: Kafka's consumers fetch on their own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vectorlog.streams.log.base import Append, Record
from vectorlog.streams.log.embedded import EmbeddedLog

TICK = b"TimeTick"


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EmbeddedLog]:
    opened = EmbeddedLog(tmp_path / "log")
    opened.create_topic("dml", 1)
    opened.create_topic("other", 1)
    opened.defer_wakes("dml", lambda record: record.key == TICK)
    yield opened
    opened.close()


def polled(log: EmbeddedLog, topic: str) -> tuple[threading.Thread, list[list[Record]]]:
    """Starts a reader of `topic` waiting in one poll (up to 60 s); returns it and its result."""
    got: list[list[Record]] = []
    reader = log.reader(topic, {0: 0})
    thread = threading.Thread(target=lambda: got.append(reader.poll(100, 60)), daemon=True)
    thread.start()
    return thread, got


def test_a_waiting_reader_sleeps_through_rows_and_wakes_at_the_tick(log: EmbeddedLog):
    thread, got = polled(log, "dml")
    log.append("dml", [Append(0, b"row", b"v0")])
    time.sleep(0.2)  # a reader the row woke would return it alone by now
    log.append("dml", [Append(0, b"tick", TICK)])
    thread.join(30)
    assert [[r.value for r in records] for records in got] == [[b"row", b"tick"]]


def test_rows_there_are_read_at_once_and_other_topics_wake_per_append(log: EmbeddedLog):
    log.append("dml", [Append(0, b"row", b"v0")])
    assert [r.value for r in log.reader("dml", {0: 0}).poll(100, 60)] == [b"row"]
    thread, got = polled(log, "other")
    log.append("other", [Append(0, b"event", b"v0")])
    thread.join(30)
    assert [[r.value for r in records] for records in got] == [[b"event"]]
