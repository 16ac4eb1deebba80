"""Time ticks (seed 001 s.6.3, s.10.5): tick sources, the soft barrier and the ticker.

A tick T on a pchannel promises that no event with ts <= T follows on it, so a source's
tick must stay below every stamp still in flight; the ticker appends the barrier's tick to
every pchannel, promptly when asked (Strong reads wait on it) and not at all while idle.
"""

from __future__ import annotations

import contextlib
import functools
import random
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support import unique_topic, wait_until
from vectorlog.processors.rootcoord.timesync import IDLE_AFTER_S, SoftBarrier, Ticker, TickSource
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.schemas.serde import EventSerde
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.scan import END_MARKER_SOURCE, read_to_end

PARTITIONS = 3
SERDE = EventSerde()


@pytest.fixture(scope="session")
def tso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TimestampOracle]:
    """One oracle for every test here: it only ever hands out fresh timestamps."""
    path: Path = tmp_path_factory.mktemp("timesync-tso")
    store = RocksDBStateStore(path)
    yield TimestampOracle(store)
    store.close()


@pytest.fixture
def dml(log: Log) -> str:
    """A fresh dml-like topic of PARTITIONS pchannels."""
    topic = unique_topic("dml")
    log.create_topic(topic, PARTITIONS)
    return topic


def ticks(log: Log, topic: str) -> dict[int, list[int]]:
    """The ticker's ticks on each partition of `topic` so far, in offset order."""
    out: dict[int, list[int]] = {p: [] for p in range(log.partitions(topic))}
    for rec in sorted(read_to_end(log, topic), key=lambda r: (r.partition, r.offset)):
        event = SERDE.decode(rec.value)
        assert event.type == "TimeTick", event
        if event.body["source"] != END_MARKER_SOURCE:
            out[rec.partition].append(event.ts)
    return out


def every_pchannel_ticked(log: Log, topic: str) -> dict[int, list[int]] | None:
    """The ticks so far if every partition has one, else None."""
    found = ticks(log, topic)
    return found if all(found.values()) else None


def ticked_past(log: Log, topic: str, ts: int) -> bool:
    """Whether the last tick on every partition of `topic` is at or past `ts`."""
    return all(t and t[-1] >= ts for t in ticks(log, topic).values())


class CountingBarrier(SoftBarrier):
    """A SoftBarrier that counts how often the ticker looked at it (once per idle round)."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def activity(self) -> int:
        self.looks += 1
        return super().activity()


@contextlib.contextmanager
def running(ticker: Ticker) -> Iterator[Ticker]:
    ticker.start()
    try:
        yield ticker
    finally:
        ticker.stop()


# -- TickSource and SoftBarrier --------------------------------------------------------------
def test_a_stamp_in_flight_holds_the_tick_below_it(tso: TimestampOracle):
    source = TickSource("proxy", tso)
    with source.stamp() as first:
        assert source.tick() == first - 1
        assert tso.now() > first and source.tick() == first - 1  # time moves, the tick not
        with source.stamp() as second:
            assert second > first and source.tick() == first - 1
        assert source.tick() == first - 1
    released = source.tick()
    assert released > first


def test_the_tick_follows_the_oldest_stamp_still_in_flight(tso: TimestampOracle):
    source = TickSource("proxy", tso)
    with contextlib.ExitStack() as older:
        first = older.enter_context(source.stamp())
        with source.stamp() as second:
            assert source.tick() == first - 1
            older.close()  # the older request finishes first
            assert source.tick() == second - 1


def test_a_stamp_that_fails_releases_the_tick(tso: TimestampOracle):
    source = TickSource("proxy", tso)
    with pytest.raises(RuntimeError), source.stamp() as failed:
        raise RuntimeError("append failed")
    assert source.tick() > failed


def test_every_later_stamp_is_above_a_promised_tick(tso: TimestampOracle):
    source = TickSource("proxy", tso)
    for _ in range(100):
        promised = source.tick()
        with source.stamp() as ts:
            assert ts > promised


def test_activity_changes_with_every_stamp_begun_and_ended_but_not_with_ticks(
    tso: TimestampOracle,
):
    barrier = SoftBarrier()
    a = barrier.register(TickSource("a", tso))
    b = barrier.register(TickSource("b", tso))
    seen = [barrier.activity()]
    with a.stamp():
        seen.append(barrier.activity())
        with b.stamp():
            seen.append(barrier.activity())
        seen.append(barrier.activity())
    seen.append(barrier.activity())
    a.tick()
    barrier.tick()
    seen.append(barrier.activity())
    assert len(set(seen[:5])) == 5 and seen[5] == seen[4]


def test_the_barrier_is_the_minimum_over_its_sources(tso: TimestampOracle):
    barrier = SoftBarrier()
    assert barrier.tick() is None  # nobody to promise anything
    a = barrier.register(TickSource("a", tso))
    b = barrier.register(TickSource("b", tso))
    with contextlib.ExitStack() as stamp_a:
        ta = stamp_a.enter_context(a.stamp())
        assert barrier.tick() == ta - 1  # b is idle: its tick is fresh, above ta
        with b.stamp() as tb:
            assert barrier.tick() == ta - 1
            stamp_a.close()
            assert barrier.tick() == tb - 1
    released = barrier.tick()
    assert released is not None and released > tb


# -- Ticker on a real log --------------------------------------------------------------------
def test_tick_once_appends_the_barrier_tick_to_every_pchannel(
    log: Log, dml: str, tso: TimestampOracle
):
    barrier = SoftBarrier()
    ticker = Ticker(log, dml, SERDE, barrier, interval=3600)
    assert ticker.tick_once() is None  # no sources: nothing to promise
    source = barrier.register(TickSource("proxy", tso))
    with source.stamp() as ts:
        held = ticker.tick_once()
        assert held == ts - 1
        assert ticker.tick_once() is None  # not advanced: nothing appended
    after = ticker.tick_once()
    assert after is not None and after > ts
    assert ticks(log, dml) == {p: [held, after] for p in range(PARTITIONS)}


def test_request_produces_a_tick_promptly(log: Log, dml: str, tso: TimestampOracle):
    barrier = SoftBarrier()
    barrier.register(TickSource("proxy", tso))
    with running(Ticker(log, dml, SERDE, barrier, interval=3600)) as ticker:
        for _ in range(2):  # also when nothing was stamped since the last tick
            wanted = tso.now()  # what a Strong read needs the ticks to pass
            ticker.request()
            wait_until(
                functools.partial(ticked_past, log, dml, wanted),
                5.0,
                f"a tick >= {wanted} on every pchannel after request() (interval: an hour)",
            )


def test_a_request_held_back_by_a_stamp_in_flight_is_served_once_it_ends(
    log: Log, dml: str, tso: TimestampOracle
):
    """A Strong read behind a write in flight (the ingest consumer's stream of writes) gets
    its tick once the write ended, not at the next interval (an hour here)."""
    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    with running(Ticker(log, dml, SERDE, barrier, interval=3600)) as ticker:
        with source.stamp() as held:
            wanted = tso.now()  # a Strong read's ts, above the write in flight
            ticker.request(after=wanted)
            wait_until(
                functools.partial(ticked_past, log, dml, held - 1),
                5.0,
                f"the tick held back below the stamp {held} in flight",
            )
            assert not ticked_past(log, dml, wanted)
        wait_until(
            functools.partial(ticked_past, log, dml, wanted),
            5.0,
            f"a tick >= {wanted} once the stamp ended (interval: an hour)",
        )


def test_no_ticks_are_appended_while_nothing_new_was_stamped(
    log: Log, dml: str, tso: TimestampOracle
):
    barrier = CountingBarrier()
    source = barrier.register(TickSource("proxy", tso))
    with running(Ticker(log, dml, SERDE, barrier, interval=0.005)):
        first = wait_until(
            lambda: every_pchannel_ticked(log, dml), 5.0, "the first tick on every pchannel"
        )
        looks = barrier.looks
        wait_until(lambda: barrier.looks >= looks + 20, 5.0, "twenty idle ticker rounds")
        assert ticks(log, dml) == first  # idle: the log did not grow
        assert all(len(t) == 1 for t in first.values())
        with source.stamp() as ts:
            pass
        wait_until(
            lambda: ticked_past(log, dml, ts + 1),
            5.0,
            f"a tick past the new stamp {ts} on every pchannel",
        )


def test_a_failed_tick_is_retried_until_the_log_takes_it(log: Log, tso: TimestampOracle):
    topic = unique_topic("dml")  # not created yet: every append fails
    errors: list[Exception] = []
    barrier = SoftBarrier()
    barrier.register(TickSource("proxy", tso))
    with running(Ticker(log, topic, SERDE, barrier, interval=0.01, on_error=errors.append)):
        wait_until(lambda: len(errors) >= 2, 10.0, "the ticker to report failed ticks")
        log.create_topic(topic, PARTITIONS)
        wait_until(
            lambda: every_pchannel_ticked(log, topic),
            10.0,
            "a tick on every pchannel once the topic exists (nothing new was stamped)",
        )


# -- Strong reads on a quiet cluster (issue 7, item 12) -------------------------------------
def test_the_last_tick_serves_reads_until_something_is_stamped(
    log: Log, dml: str, tso: TimestampOracle
):
    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    ticker = Ticker(log, dml, SERDE, barrier, interval=3600)
    assert ticker.quiet_tick() is None  # no tick yet
    with source.stamp() as written:
        pass
    tick = ticker.tick_once()
    assert tick is not None and tick > written
    assert [ticker.quiet_tick() for _ in range(3)] == [tick] * 3
    with source.stamp() as held:
        assert ticker.quiet_tick() is None  # a stamp in flight
        assert ticker.tick_once() in (None, held - 1)  # held back below the stamp
        assert ticker.quiet_tick() is None  # a tick computed with a stamp in flight
    assert ticker.quiet_tick() is None  # stamped since the last tick
    after = ticker.tick_once()
    assert after is not None and ticker.quiet_tick() == after


def test_a_requested_tick_is_skipped_when_the_last_one_covers_it(
    log: Log, dml: str, tso: TimestampOracle
):
    barrier = CountingBarrier()
    barrier.register(TickSource("proxy", tso))
    with running(Ticker(log, dml, SERDE, barrier, interval=3600)) as ticker:
        ticker.request()
        first = wait_until(lambda: every_pchannel_ticked(log, dml), 5.0, "the first tick")
        tick = first[0][-1]
        looks = barrier.looks
        for _ in range(20):  # covered by the last tick: no round, nothing appended
            ticker.request(after=tick)
        ticker.request()  # one round, to show the ones before were not pending
        wait_until(lambda: barrier.looks > looks, 5.0, "the round of the plain request")
        second = wait_until(
            lambda: ticks(log, dml) if ticked_past(log, dml, tick + 1) else None,
            5.0,
            "the plain request's tick",
        )
        assert all(len(t) == 2 for t in second.values())
        ticker.request(after=second[0][-1] + 1)
        wait_until(lambda: ticked_past(log, dml, second[0][-1] + 1), 5.0, "a tick past it")


class GatedLog:
    """A log whose appends wait for `gate` while it is armed (a slow broker's append)."""

    def __init__(self, log: Log) -> None:
        self._log, self.gate, self.armed = log, threading.Event(), False
        self.entered = threading.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._log, name)

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        if self.armed:
            self.entered.set()
            assert self.gate.wait(10), "the test never opened the gate"
        return self._log.append(topic, records)


def test_requests_covered_by_the_tick_being_appended_add_no_tick_after_it(
    log: Log, dml: str, tso: TimestampOracle
):
    """Strong reads that ask for a tick while one past their ts is being appended (a slow
    broker: Kafka) are served by it; before, each such request made one more tick."""
    gated = GatedLog(log)
    barrier = CountingBarrier()
    source = barrier.register(TickSource("proxy", tso))
    with running(Ticker(gated, dml, SERDE, barrier, interval=3600)) as ticker:  # type: ignore[arg-type]
        with source.stamp():
            pass
        wanted = tso.now()  # the reads' ts: below the tick about to be computed
        gated.armed = True
        ticker.request(after=wanted)
        assert gated.entered.wait(5), "the requested tick's append"
        for _ in range(10):  # more reads at `wanted` while the tick is on its way
            ticker.request(after=wanted)
        gated.armed = False
        looks = barrier.looks
        gated.gate.set()
        wait_until(lambda: ticked_past(log, dml, wanted), 5.0, f"a tick >= {wanted}")
        # the requests woke the ticker again: its next round looks and finds nothing wanted
        wait_until(lambda: barrier.looks > looks, 5.0, "the ticker's next round")
        time.sleep(0.1)
        assert {p: len(t) for p, t in ticks(log, dml).items()} == dict.fromkeys(
            range(PARTITIONS), 1
        )


def test_a_strong_ts_covers_every_stamp_that_ended_before_it(
    log: Log, dml: str, tso: TimestampOracle
):
    """Writers stamp while a ticker thread ticks and a reader reads "now" as a Strong read
    does (the quiet tick, else a fresh ts): every read is at or past every stamp that ended
    before the read began. Between phases the writers pause until a read was served by a
    quiet tick, so that path is taken too."""
    barrier = SoftBarrier()
    ticker = Ticker(log, dml, SERDE, barrier, interval=3600)
    stop, lock, phase_end = threading.Event(), threading.Lock(), threading.Barrier(2)
    acked = [0]  # the newest stamp that ended
    failures: list[object] = []
    quiet_reads: list[int] = []

    def write(source: TickSource) -> None:
        rng = random.Random(source.name)
        for _ in range(4):
            for _ in range(50):
                with source.stamp() as ts:
                    pass
                with lock:
                    acked[0] = max(acked[0], ts)
                time.sleep(rng.random() / 1000)
            phase_end.wait()
            seen, deadline = len(quiet_reads), time.monotonic() + 20
            while len(quiet_reads) == seen and time.monotonic() < deadline:
                time.sleep(0.001)
            if len(quiet_reads) == seen:
                failures.append("no read was served by the last tick while nothing was stamped")
            phase_end.wait()

    def read() -> None:
        while not stop.is_set():
            with lock:
                before = acked[0]
            tick = ticker.quiet_tick()
            now = tso.now() if tick is None else tick
            if tick is not None:
                quiet_reads.append(tick)
            if now < before:
                failures.append((before, now))

    def tick() -> None:
        while not stop.wait(0.001):
            ticker.tick_once()

    writers = [
        threading.Thread(target=write, args=(barrier.register(TickSource(f"p{i}", tso)),))
        for i in range(2)
    ]
    others = [threading.Thread(target=tick), threading.Thread(target=read)]
    for t in [*others, *writers]:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in others:
        t.join()
    assert failures == []


def test_one_of_several_writers_heartbeats_with_its_source_id_while_idle(
    log: Log, dml: str, tso: TimestampOracle
):
    barrier = SoftBarrier()
    barrier.register(TickSource("proxy", tso))
    ticker = Ticker(log, dml, SERDE, barrier, interval=0.01, source="proxy-7", heartbeat=True)
    with running(ticker):
        wait_until(
            lambda: all(len(t) >= 3 for t in ticks(log, dml).values()),
            5.0,
            "three idle ticks on every pchannel",
        )
    sources = {SERDE.decode(r.value).body["source"] for r in read_to_end(log, dml)}
    assert sources - {END_MARKER_SOURCE} == {"proxy-7"}
    assert all(t == sorted(set(t)) for t in ticks(log, dml).values())  # each advances


def test_an_idle_writer_heartbeats_every_idle_every_yet_ticks_at_once_when_asked_or_written(
    log: Log, dml: str, tso: TimestampOracle
):
    """A proxy's idle heartbeat comes every `idle_every` (VECTORLOG_IDLE_TICK_INTERVAL_MS),
    not every interval: fewer tick batches on the broker. A read's request and a write still
    get their ticks at once."""
    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    ticker = Ticker(log, dml, SERDE, barrier, interval=0.01, source="p", heartbeat=True,
                    idle_every=3600)  # fmt: skip
    with running(ticker):
        wait_until(lambda: len(flagged(log, dml)) == 1, 10.0, "the first idle tick")
        time.sleep(0.5)  # 50 intervals
        assert flagged(log, dml)[0][1] and len(flagged(log, dml)) == 1
        ticker.request()
        wait_until(lambda: len(flagged(log, dml)) == 2, 10.0, "a requested tick")
        with source.stamp() as ts:
            pass
        last = lambda: flagged(log, dml)[-1]  # noqa: E731
        wait_until(lambda: last()[0] > ts and last()[1], 10.0, "an idle tick past the write")
    for p in range(PARTITIONS):  # two idle ticks, the active one the write woke, the rest
        assert [idle for _, idle in flagged(log, dml, p)][:3] == [True, True, False]


# -- idle writers (one of several) -------------------------------------------------------------
def flagged(log: Log, topic: str, partition: int = 0) -> list[tuple[int, bool]]:
    """(ts, idle) of the ticks on one partition of `topic`, in offset order."""
    recs = sorted((r for r in read_to_end(log, topic) if r.partition == partition),
                  key=lambda r: r.offset)  # fmt: skip
    events = [SERDE.decode(r.value) for r in recs]
    return [(e.ts, e.body["idle"]) for e in events if e.body["source"] != END_MARKER_SOURCE]


def test_a_writer_of_several_ticks_idle_once_its_last_stamp_ended(
    log: Log, dml: str, tso: TimestampOracle
):
    """No periodic tick (an hour): the idle tick comes from the stamp's end, so a Strong read
    elsewhere need not wait for this writer's next interval."""
    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    ticker = Ticker(log, dml, SERDE, barrier, interval=3600, source="p", heartbeat=True)
    with running(ticker):
        with source.stamp() as ts:
            pass
        wait_until(lambda: (flagged(log, dml) or [(0, False)])[-1][1], 10.0, "an idle tick")
    for p in range(PARTITIONS):
        got = flagged(log, dml, p)
        assert [idle for _, idle in got][0] is False and got[-1][1] is True
        assert got[0][0] < ts <= got[-1][0]  # the active tick before the stamp, idle after it
        assert all(not idle for _, idle in got[:-1])


def test_a_stamp_after_an_idle_tick_waits_for_an_active_tick_and_a_fresh_clock(
    log: Log, dml: str, tso: TimestampOracle
):
    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    seen: list[list[tuple[int, bool]]] = []  # the ticks on the log when `fresh` was called
    ticker = Ticker(log, dml, SERDE, barrier, interval=3600, source="p", heartbeat=True,
                    fresh=lambda: seen.append(flagged(log, dml)))  # fmt: skip
    assert ticker.tick_once() is not None and ticker.idle  # idle from the start
    with source.stamp() as ts:
        assert not ticker.idle and len(seen) == 1
        assert [idle for _, idle in seen[0]] == [True, False]  # the active tick was on the log
        ticked = ticker.tick_once()
        # busy: the log's last tick is an active one right below the stamp; this tick_once
        # appended it, or (the stamp drawn in the oracle's millisecond of the active tick, so
        # ts = that tick + 1) the active tick appended before the stamp already was it
        assert flagged(log, dml)[-1] == (ts - 1, False)
        assert ticked in (ts - 1, None)
    assert len(seen) == 1  # the next stamps, not idle, move no clock
    with source.stamp():
        pass
    assert len(seen) == 1
    ticker.idle_after = 0
    assert ticker.tick_once() is not None and not flagged(log, dml)[-1][1]  # after the stamps
    assert ticker.tick_once() is not None and flagged(log, dml)[-1][1]  # then idle again
    with source.stamp():
        assert len(seen) == 2


def test_a_writer_whose_ticks_stalled_re_enters_as_an_idle_one_before_it_stamps(
    log: Log, dml: str, tso: TimestampOracle
):
    """A paused process: its ticks stopped, so the consumers may have dropped it as a silent
    source and passed ticks drawn after its last; its next stamp first appends an active tick
    and moves the clocks past the oracle's (as after an idle tick), whether the stamp or the
    ticker's own tick comes first after the pause."""
    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    moved: list[int] = []
    ticker = Ticker(log, dml, SERDE, barrier, interval=3600, source="p", heartbeat=True,
                    fresh=lambda: moved.append(1), stalled_after=1.0)  # fmt: skip
    with source.stamp():  # active from here
        pass
    assert ticker.tick_once() is not None and len(moved) == 1
    time.sleep(1.1)  # stalled: the stamp comes first
    with source.stamp() as ts:
        assert len(moved) == 3  # before and after its active tick
        assert flagged(log, dml)[-1][0] < ts and not flagged(log, dml)[-1][1]  # active, below
    assert ticker.tick_once() is not None
    time.sleep(1.1)  # stalled: the ticker's tick comes first, and is idle
    assert ticker.tick_once() is not None and ticker.idle and flagged(log, dml)[-1][1]
    with source.stamp() as ts:
        assert len(moved) == 4 and flagged(log, dml)[-1][0] < ts and not flagged(log, dml)[-1][1]
    with source.stamp():  # not stalled: no clock moves
        assert len(moved) == 4


def test_no_stamp_starts_while_an_idle_tick_is_appended(log: Log, dml: str, tso: TimestampOracle):
    """A stamp begun while the idle tick is being appended waits for it, then appends an
    active tick before it stamps: no write lands after an idle tick without one between."""
    gate_held = threading.Event()
    release = threading.Event()

    class SlowLog:
        def __init__(self, inner: Log) -> None:
            self.inner = inner

        def partitions(self, topic: str) -> int:
            return self.inner.partitions(topic)

        def append(self, topic: str, records: list) -> list[int]:
            if SERDE.decode(records[0].value).body.get("idle"):
                gate_held.set()
                release.wait(10)
            return self.inner.append(topic, records)

    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    ticker = Ticker(SlowLog(log), dml, SERDE, barrier, 3600, source="p", heartbeat=True)  # type: ignore[arg-type]
    idle_tick = threading.Thread(target=ticker.tick_once)
    idle_tick.start()
    assert gate_held.wait(10)
    stamped: list[int] = []

    def stamp() -> None:
        with source.stamp() as ts:
            stamped.append(ts)

    writer = threading.Thread(target=stamp)
    writer.start()
    writer.join(0.2)
    assert stamped == []  # waiting at the gate
    release.set()
    idle_tick.join(10)
    writer.join(10)
    assert [idle for _, idle in flagged(log, dml)] == [True, False]
    assert stamped and stamped[0] > flagged(log, dml)[-1][0]


def test_a_trickle_of_writes_lengthens_the_wait_before_an_idle_tick(
    log: Log, dml: str, tso: TimestampOracle
):
    """Each wake-up costs an active tick and a fresh clock: a writer woken again within an
    interval of its idle tick waits twice as long before the next one, up to the interval;
    one idle longer than an interval starts again at IDLE_AFTER_S."""
    barrier = SoftBarrier()
    source = barrier.register(TickSource("proxy", tso))
    ticker = Ticker(log, dml, SERDE, barrier, interval=3600, source="p", heartbeat=True)
    assert ticker.idle_after == IDLE_AFTER_S
    wakes = []
    assert ticker.tick_once() is not None and ticker.idle  # an idle tick
    for _ in range(3):
        with source.stamp():  # woken at once: a trickle
            wakes.append(ticker.idle_after)
        ticker.idle_after = 0  # (the test ticks idle at once)
        ticker.tick_once()  # after the stamp
        ticker.tick_once()  # idle
        assert ticker.idle
        ticker.idle_after = wakes[-1]
    assert wakes == [IDLE_AFTER_S * 2, IDLE_AFTER_S * 4, IDLE_AFTER_S * 8]
    ticker = Ticker(log, dml, SERDE, barrier, interval=0.001, source="q", heartbeat=True)
    ticker.tick_once()
    time.sleep(0.01)  # longer than the interval
    with source.stamp():
        assert ticker.idle_after == 0.001  # back to the shortest (the interval here)
