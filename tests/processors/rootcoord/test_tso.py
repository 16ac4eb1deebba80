"""The timestamp oracle and the ID allocator never hand out a value twice, across restarts,
and reserve ahead: a reservation in progress never stops them below the saved bound."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import wait_until
from vectorlog.processors.rootcoord.idalloc import IdAllocator
from vectorlog.processors.rootcoord.reserve import ReservationFailed
from vectorlog.processors.rootcoord.timesync import TickSource
from vectorlog.processors.rootcoord.tso import TimestampOracle, compose, logical, physical_ms
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.state.rocksdb import RocksDBStateStore


def open_db(path: Path) -> RocksDBStateStore:
    return RocksDBStateStore(path)


def test_hybrid_timestamp_layout():
    ts = compose(1_700_000_000_000, 5)
    assert ts == (1_700_000_000_000 << 18) | 5
    assert (physical_ms(ts), logical(ts)) == (1_700_000_000_000, 5)


def test_timestamps_strictly_increase_and_batches_are_consecutive(tmp_path: Path):
    db = open_db(tmp_path)
    tso = TimestampOracle(db)
    seen = [tso.now() for _ in range(1000)]
    first = tso.allocate(100)
    after = tso.now()
    assert seen == sorted(set(seen))
    assert first > seen[-1] and after >= first + 100
    tso.close()
    db.close()


def test_logical_overflow_advances_physical(tmp_path: Path):
    db = open_db(tmp_path)
    tso = TimestampOracle(db, clock=lambda: 1000)
    a = tso.allocate((1 << 18) - 10)
    b = tso.allocate(20)
    assert physical_ms(a) == 1000 and physical_ms(b) == 1001 and b > a
    db.close()


def test_restarted_oracle_never_goes_backwards_even_if_the_clock_does(tmp_path: Path):
    clock = [5_000_000]
    db = open_db(tmp_path)
    tso = TimestampOracle(db, save_window_ms=3000, clock=lambda: clock[0])
    last = 0
    for _ in range(50):
        clock[0] += 100
        last = tso.now()
    tso.close()
    db.close()
    clock[0] = 1_000  # the wall clock jumped back
    db = open_db(tmp_path)
    assert TimestampOracle(db, clock=lambda: clock[0]).now() > last
    db.close()


def test_observe_moves_the_oracle_past_a_timestamp(tmp_path: Path):
    db = open_db(tmp_path)
    tso = TimestampOracle(db, clock=lambda: 10)
    future = compose(99_999, 7)
    tso.observe(future)
    assert tso.now() > future
    db.close()


def test_ids_are_unique_across_restarts(tmp_path: Path):
    db = open_db(tmp_path)
    ids = IdAllocator(db, batch=10)
    got = [ids.allocate() for _ in range(25)] + [ids.allocate(7)]
    ids.close()
    db.close()
    db = open_db(tmp_path)
    ids = IdAllocator(db, batch=10)
    again = ids.allocate(3)
    ids.close()
    assert again > got[-1] + 6 and len(set(got)) == len(got)
    with pytest.raises(ValueError):
        IdAllocator(db).allocate(0)
    db.close()


class Gate:
    """An `on_reserve` that records each bound and blocks from its `block_from`-th call on
    until opened (or fails, if told to)."""

    def __init__(self, block_from: int = 2) -> None:
        self.bounds: list[int] = []
        self.block_from, self.fail = block_from, False
        self.opened = threading.Event()

    def __call__(self, bound: int) -> None:
        self.bounds.append(bound)
        if len(self.bounds) >= self.block_from:
            assert self.opened.wait(30), "the test never opened the gate"
            if self.fail:
                raise OSError("the log is down")


def in_thread(fn: Callable[[], int]) -> tuple[threading.Thread, list[object]]:
    """Runs fn on a thread; returns it and the list its result (or exception) lands in."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_stamping_goes_on_while_the_next_window_is_reserved():
    """Issue 7, item 15: the reservation (a log append) ran under the oracle's lock, so every
    stamp waited for it; now only a stamp that reaches the saved bound waits."""
    clock, gate, store = [1_000_000], Gate(), MemoryStateStore()
    tso = TimestampOracle(store, save_window_ms=1000, clock=lambda: clock[0], on_reserve=gate)
    tso.now()  # the first reservation (not gated): bound 1_001_000
    assert tso.saved_bound == 1_001_000
    clock[0] += 600  # within half a window of the bound: the next one is reserved ahead
    stamps = [tso.now()]
    wait_until(lambda: len(gate.bounds) == 2, 10, "the reservation ahead to start")
    source = TickSource("proxy", tso)
    for _ in range(100):  # the reservation is blocked in on_reserve meanwhile
        clock[0] += 3
        with source.stamp() as ts:
            stamps.append(ts)
    assert stamps == sorted(set(stamps)) and physical_ms(stamps[-1]) < 1_001_000
    assert tso.saved_bound == 1_001_000  # not raised before the reservation returned

    clock[0] = 1_001_000  # the bound is reached: this stamp waits for the reservation
    waiting, got = in_thread(tso.now)
    waiting.join(0.2)
    assert waiting.is_alive() and not got
    gate.opened.set()
    waiting.join(10)
    (last,) = got
    assert isinstance(last, int) and physical_ms(last) == 1_001_000 and last > stamps[-1]
    assert tso.saved_bound == gate.bounds[1] == 1_002_000
    tso.close()


def test_a_failed_reservation_fails_only_the_stamp_that_needs_it():
    clock, gate = [1_000_000], Gate()
    tso = TimestampOracle(MemoryStateStore(), 1000, clock=lambda: clock[0], on_reserve=gate)
    tso.now()
    clock[0] += 900
    tso.now()  # starts the reservation ahead, which will fail
    wait_until(lambda: len(gate.bounds) == 2, 10, "the reservation ahead to start")
    clock[0] = 1_001_500
    waiting, got = in_thread(tso.now)
    gate.fail = True
    gate.opened.set()
    waiting.join(10)
    assert isinstance(got[0], ReservationFailed) and "the log is down" in str(got[0])
    assert tso.saved_bound == 1_001_000  # nothing at or past it was handed out
    gate.fail = False
    assert physical_ms(tso.now()) == 1_001_500  # the next stamp reserves again
    assert tso.saved_bound == 1_002_500
    tso.close()


def test_a_restarted_oracle_starts_above_every_bound_reserved_ahead():
    disk, clock = MemoryDisk(), [5_000_000]
    tso = TimestampOracle(MemoryStateStore(disk), save_window_ms=100, clock=lambda: clock[0])
    last = 0
    for _ in range(500):
        clock[0] += 7
        last = tso.now()
    tso.close()  # waits for a reservation ahead still in flight
    assert tso.reservations > 10
    clock[0] = 0  # the wall clock jumped back
    again = TimestampOracle(MemoryStateStore(disk), save_window_ms=100, clock=lambda: clock[0])
    assert again.now() > last and physical_ms(again.now()) >= tso.saved_bound
    again.close()


def test_the_oracle_ignores_its_own_logged_reservations_but_not_another_writers():
    """A DDL replays the ddl records before its own: its oracle's reservations are among
    them, and must not push its clock a window ahead."""
    reserved: list[int] = []
    tso = TimestampOracle(
        MemoryStateStore(), 1000, clock=lambda: 1_000_000, on_reserve=reserved.append
    )
    before = tso.now()
    tso.observe_bound(reserved[-1])
    assert physical_ms(tso.now()) == physical_ms(before) == 1_000_000
    foreign = reserved[-1] + 5
    tso.observe_bound(foreign)  # another writer's: later timestamps are above it
    assert physical_ms(tso.now()) == foreign
    tso.close()


def test_ids_are_handed_out_while_the_next_range_is_reserved():
    gate = Gate()
    ids = IdAllocator(MemoryStateStore(), batch=100, on_reserve=gate)
    first = ids.allocate()
    upper = ids.saved_upper
    got = [first] + [ids.allocate() for _ in range(60)]  # past half: the next range starts
    wait_until(lambda: len(gate.bounds) == 2, 10, "the reservation ahead to start")
    got += [ids.allocate() for _ in range(upper - got[-1] - 1)]  # up to the saved upper
    assert got == list(range(first, upper)) and ids.saved_upper == upper
    waiting, out = in_thread(ids.allocate)
    waiting.join(0.2)
    assert waiting.is_alive() and not out
    gate.opened.set()
    waiting.join(10)
    assert out == [upper] and ids.saved_upper == gate.bounds[1] > upper
    ids.close()


def test_a_guard_refuses_allocations_before_anything_is_handed_out():
    class Fenced(Exception):
        pass

    def refuse() -> None:
        raise Fenced

    tso, ids = TimestampOracle(MemoryStateStore()), IdAllocator(MemoryStateStore())
    tso.guard = ids.guard = refuse
    with pytest.raises(Fenced):
        tso.now()
    with pytest.raises(Fenced):
        ids.allocate()
    assert tso.saved_bound == 0 and tso.reservations == 0
