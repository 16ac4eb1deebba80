"""The timestamp oracle and the ID allocator never hand out a value twice, across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from vectorlog.processors.rootcoord.idalloc import IdAllocator
from vectorlog.processors.rootcoord.tso import TimestampOracle, compose, logical, physical_ms
from vectorlog.processors.state.rocksdb import RocksDBStateStore


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
    db.close()
    db = open_db(tmp_path)
    again = IdAllocator(db, batch=10).allocate(3)
    assert again > got[-1] + 6 and len(set(got)) == len(got)
    with pytest.raises(ValueError):
        IdAllocator(db).allocate(0)
    db.close()
