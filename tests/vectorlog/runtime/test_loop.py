"""The shared processor loop (vectorlog/runtime): recover, apply, commit positions with the
state, dead-letter and go on, retry from the committed positions after a failure, stop.

A small synthetic processor (a running sum of the integers on a topic) runs on the real
`ProcessorLoop`, `RecordSource` and `DeadLetterWriter`, over an in-memory log and state store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from vectorlog.runtime.events import EventApplier, skip_past
from vectorlog.runtime.loop import IDLE_WAIT_S, ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.state.errors import StateError
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.state.metadata import POSITION_PREFIX
from vectorlog.streams.deadletter import DeadLetterAbandoned, DeadLetterWriter, read_dead_letters
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Record

from .memory_log import MemoryLog

TOPIC, DLQ = "numbers", "dlq"


def wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Summer(ProcessorBase):
    """Adds the integers of TOPIC; commits the sum with the position in one write. A record
    that is not an integer is dead-lettered; `fail_applies` makes the next applies fail as
    the store would."""

    name = "summer"

    def __init__(self, log: MemoryLog, disk: MemoryDisk, tick_s: float | None = None) -> None:
        self.store = MemoryStateStore(disk)
        self.sum = int(self.store.get(b"sum") or b"0")
        self.dead_letter = DeadLetterWriter(log, DLQ, self.name)
        self.source = RecordSource(log, lambda: {TOPIC: {0: self.store.position(TOPIC, 0) or 0}})
        self.loop = ProcessorLoop(self, tick_s=tick_s, retry_s=0.01)
        self.fail_applies, self.ticks, self.reports = 0, 0, list[Exception | None]()

    def open(self) -> None:
        self.source.open()

    def step(self) -> bool:
        records = self.source.poll(TOPIC, 100, 0.02)
        for rec in records:
            self._apply(rec)
        return bool(records)

    def _apply(self, rec: Record) -> None:
        try:
            value = int(rec.value)
        except ValueError:
            self.dead_letter(rec, f"not an integer: {rec.value!r}")
            skip_past(self.store, rec)
            return
        if self.fail_applies:
            self.fail_applies -= 1
            raise StateError("the store failed")
        with self.store.transaction() as txn:
            txn.put(b"sum", str(self.sum + value).encode())
            txn.set_position(TOPIC, 0, rec.offset + 1)
        self.sum += value  # only once committed

    def tick(self) -> None:
        self.ticks += 1

    def reset(self) -> None:
        self.source.reset()

    def report(self, failure: Exception | None) -> None:
        super().report(failure)
        self.reports.append(failure)


@pytest.fixture()
def log() -> MemoryLog:
    log = MemoryLog()
    log.create_topic(TOPIC, 1)
    log.create_topic(DLQ, 1)
    return log


def put(log: MemoryLog, *values: bytes) -> None:
    log.append(TOPIC, [Append(0, v) for v in values])


def run(summer: Summer, until: Callable[[], bool], what: str) -> None:
    summer.loop.start()
    try:
        wait_until(until, what)
    finally:
        assert summer.loop.stop()


def test_applies_each_record_once_and_commits_the_position_with_the_state(log):
    disk = MemoryDisk()
    put(log, b"1", b"2", b"3")
    first = Summer(log, disk)
    run(first, lambda: first.sum == 6, "the first three records")
    assert first.store.get(b"sum") == b"6" and first.store.position(TOPIC, 0) == 3
    put(log, b"10")
    restarted = Summer(log, disk)  # recovers the sum and the position from the store
    assert restarted.sum == 6
    run(restarted, lambda: restarted.sum == 16, "the record after the restart")
    assert restarted.store.position(TOPIC, 0) == 4


def test_a_record_that_cannot_be_applied_is_dead_lettered_once_and_the_rest_goes_on(log):
    disk = MemoryDisk()
    put(log, b"1", b"oops", b"2")
    summer = Summer(log, disk)
    run(summer, lambda: summer.sum == 3, "the records around the bad one")
    (letter,) = read_dead_letters(log, DLQ)
    assert (letter.topic, letter.offset, letter.processor) == (TOPIC, 1, "summer")
    assert letter.value == b"oops" and "not an integer" in letter.reason
    disk.meta = {k: v for k, v in disk.meta.items() if not k.startswith(POSITION_PREFIX)}
    replay = Summer(log, disk)
    replay.sum = 0
    run(replay, lambda: replay.store.position(TOPIC, 0) == 3, "the replay")
    assert len(read_dead_letters(log, DLQ)) == 1  # never a second dead letter


def test_a_failed_round_is_reported_and_retried_from_the_committed_position(log):
    summer = Summer(log, MemoryDisk())
    summer.fail_applies = 2
    put(log, b"5", b"7")
    run(summer, lambda: summer.sum == 12, "the records after the failures")
    failures = [r for r in summer.reports if r is not None]
    assert len(failures) == 2 and all(isinstance(f, StateError) for f in failures)
    assert summer.failure is None  # cleared by the next good round
    assert log.readers_opened >= 3  # reopened at the committed position after each failure


def test_a_failing_log_is_retried_and_nothing_is_lost_or_doubled(log):
    summer = Summer(log, MemoryDisk())
    put(log, *[str(i).encode() for i in range(1, 101)])
    log.fail_polls = 3
    run(summer, lambda: summer.store.position(TOPIC, 0) == 100, "every record")
    assert summer.sum == sum(range(1, 101))
    assert sum(isinstance(r, LogError) for r in summer.reports) == 3


def test_tick_runs_periodically_after_rounds(log):
    summer = Summer(log, MemoryDisk(), tick_s=0.01)
    run(summer, lambda: summer.ticks >= 3, "three ticks")


def test_stop_ends_the_thread_is_idempotent_and_a_loop_starts_once(log):
    summer = Summer(log, MemoryDisk())
    assert summer.loop.stop()  # never started: nothing to wait for
    fresh = Summer(log, MemoryDisk())
    fresh.loop.start()
    assert fresh.loop.running
    assert fresh.loop.stop() and fresh.loop.stop()
    assert not fresh.loop.running and not fresh.source.is_open  # its readers are closed
    with pytest.raises(RuntimeError):
        fresh.loop.start()


class SlowStart(threading.Thread):
    """A thread whose start lingers between being made the loop's and running (the window a
    stop from another thread used to fall into: joining a thread not started raised)."""

    def start(self) -> None:
        time.sleep(0.3)
        super().start()


def test_a_stop_while_another_thread_starts_the_loop_waits_for_it_and_stops_it(
    log, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("vectorlog.runtime.loop.threading.Thread", SlowStart)
    summer = Summer(log, MemoryDisk())
    starter = SlowStart(target=summer.loop.start)  # as a query node's cache writer starts
    starter.start()  # its index loader: on a thread of its own
    wait_until(lambda: summer.loop.started, "the start begun")
    assert summer.loop.stop()  # raised RuntimeError: cannot join thread before it is started
    starter.join()
    assert not summer.loop.running


def test_a_dead_letter_abandoned_at_stop_ends_the_loop_without_a_retry(log):
    class Abandons(Summer):
        def step(self) -> bool:
            raise DeadLetterAbandoned(Record(TOPIC, 0, 0, b""))

    p = Abandons(log, MemoryDisk())
    p.loop.start()
    wait_until(lambda: not p.loop.running, "the loop to end")
    assert p.reports == [] and p.loop.stop()


# -- EventApplier: whose fault is a failure -------------------------------------------------------
def event(offset: int) -> Event:
    e = Event("TimeTick", 1, {"source": "t"})
    e.source = (0, offset)
    return e


@pytest.fixture()
def applier_parts(log):
    log.create_topic("dml", 1)
    writer = DeadLetterWriter(log, DLQ, "applier")
    stop, failures = threading.Event(), list[Exception]()
    applier = EventApplier(
        "dml", EventSerde(), writer, stop, (StateError, OSError), (FileNotFoundError,),
        failures.append,
    )  # fmt: skip
    return applier, stop, failures


def test_the_events_own_failure_is_dead_lettered_with_its_position(log, applier_parts):
    applier, _, failures = applier_parts

    def bad(e: Event) -> None:
        raise KeyError("collection 7 is unknown")

    applier.apply(event(4), bad)
    (letter,) = read_dead_letters(log, DLQ)
    assert (letter.topic, letter.offset, letter.processor) == ("dml", 4, "applier")
    assert letter.reason.startswith("KeyError") and failures == []
    assert EventSerde().decode(letter.value).type == "TimeTick"  # the event's bytes


def test_a_transient_failure_is_retried_until_it_works(log, applier_parts):
    applier, _, failures = applier_parts
    calls = []

    def flaky(e: Event) -> None:
        calls.append(e)
        if len(calls) < 3:
            raise StateError("the store failed")

    applier.apply(event(1), flaky)
    assert len(calls) == 3 and len(failures) == 2
    assert read_dead_letters(log, DLQ) == []


def test_a_transient_kind_that_is_the_events_fault_is_dead_lettered(log, applier_parts):
    applier, _, _ = applier_parts

    def missing(e: Event) -> None:
        raise FileNotFoundError("the path the event names")

    applier.apply(event(2), missing)
    assert [d.offset for d in read_dead_letters(log, DLQ)] == [2]


def test_stopping_during_retries_abandons_the_event(log, applier_parts):
    applier, stop, _ = applier_parts

    def failing(e: Event) -> None:
        stop.set()
        raise OSError("disk gone")

    with pytest.raises(DeadLetterAbandoned):
        applier.apply(event(3), failing)
    assert read_dead_letters(log, DLQ) == []


def test_failed_rounds_in_a_row_back_off_and_a_good_round_resets_the_pause(log, caplog):
    summer = Summer(log, MemoryDisk())
    loop = ProcessorLoop(summer, retry_s=0.5, max_retry_s=8.0)
    assert [loop.backoff(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    summer.loop = ProcessorLoop(summer, retry_s=0.001, max_retry_s=0.004)
    summer.fail_applies = 3
    put(log, b"5")
    with caplog.at_level("WARNING", logger="vectorlog.runtime.loop"):
        summer.loop.start()
        try:
            wait_until(lambda: summer.sum == 5, "the first record after three failures")
            summer.fail_applies = 1
            put(log, b"7")
            wait_until(lambda: summer.sum == 12, "the second record after one more")
        finally:
            assert summer.loop.stop()
    said = [r.getMessage() for r in caplog.records if "step failed" in r.getMessage()]
    in_a_row = [s.split("(")[1].split(")")[0] for s in said]
    assert in_a_row == ["1 in a row", "2 in a row", "3 in a row", "1 in a row"]


def test_a_round_waits_idle_wait_s_at_most_tick_s():
    disk = MemoryDisk()
    assert Summer(MemoryLog(), disk).loop.idle_wait_s == IDLE_WAIT_S
    assert Summer(MemoryLog(), disk, tick_s=IDLE_WAIT_S / 2).loop.idle_wait_s == IDLE_WAIT_S / 2
    assert Summer(MemoryLog(), disk, tick_s=IDLE_WAIT_S * 2).loop.idle_wait_s == IDLE_WAIT_S
