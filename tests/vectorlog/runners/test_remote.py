"""A cluster process's writes (runners/remote.py): a write is acknowledged only while the
process is live for the consumers where it lands, judged by the value of its last tick on the
log, so a write the consumers may have passed fails with WriteTooSlow (outcome unknown)
instead of being acknowledged and then dead-lettered as late."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import LOG_BACKENDS, unique_topic
from vectorlog.core.errors import WriteOutcomeUnknown
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.processors.rootcoord.timesync import SoftBarrier, Ticker, TickSource
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.runners.remote import BoundedTickSource, WriteTooSlow
from vectorlog.schemas.serde import EventSerde
from vectorlog.state.rocksdb import RocksDBStateStore
from vectorlog.streams.log.base import Log

#: the bound must cover a tick's append on the Kafka backend: at load 60 on 2 cores, 2 of 300
#: appends to Tansu took over 150 ms (at most 353 ms), so a bound of 0.2 s failed the fresh path
LIMIT_S, TS_AGE_S = 1.0, 0.05


class _Clock:
    """Fresh hybrid timestamps of the wall clock, strictly increasing."""

    def __init__(self) -> None:
        self.ts = 0

    def now(self) -> int:
        self.ts = max(self.ts + 1, compose(wall_ms()))
        return self.ts


def _source(heard: int | None) -> BoundedTickSource:
    """A stamper bounded at LIMIT_S whose process's last tick on the log was `heard`."""
    return BoundedTickSource("proxy-a", _Clock(), LIMIT_S, TS_AGE_S, lambda: heard)


def test_a_quick_write_soon_after_a_fresh_tick_is_acknowledged():
    source = _source(compose(wall_ms()))
    with source.stamp() as ts:
        pass
    assert ts >= compose(wall_ms() - 1000) and not source.busy()


def test_a_write_in_flight_past_the_bound_has_an_unknown_outcome():
    source, appended = _source(compose(wall_ms())), []
    too_slow = pytest.raises(WriteTooSlow, match=f"more than {LIMIT_S:.1f} s")
    with too_slow as caught, source.stamp() as ts:
        time.sleep(LIMIT_S + 0.1)
        appended.append(ts)
    assert isinstance(caught.value, WriteOutcomeUnknown)
    assert appended == [caught.value.ts]  # the block ran: its effects may be on the log
    assert not source.busy()  # and it holds the tick back no longer


@pytest.mark.parametrize("heard_ms_ago", [None, 1500], ids=["never ticked", "tick 1.5 s old"])
def test_a_write_of_a_process_whose_last_tick_is_old_fails(heard_ms_ago: int | None):
    heard = None if heard_ms_ago is None else compose(wall_ms() - heard_ms_ago)
    with pytest.raises(WriteTooSlow), _source(heard).stamp():
        pass


@pytest.fixture
def tso(tmp_path: Path) -> Iterator[TimestampOracle]:
    store = RocksDBStateStore(tmp_path / "tso")
    yield TimestampOracle(store)
    store.close()


@pytest.mark.parametrize("log", LOG_BACKENDS, indirect=True)
def test_a_write_after_a_tick_held_back_by_an_older_write_fails(log: Log, tso: TimestampOracle):
    """The ticker appends a tick just before the write, but its value is held back by an
    older write still in flight: the consumers see a process that far behind, not a fresh
    one, so the new write may land below their tick and is not acknowledged."""
    dml = unique_topic("dml")
    log.create_topic(dml, 2)
    barrier = SoftBarrier()
    ticker = Ticker(log, dml, EventSerde(), barrier, interval=3600, source="proxy-a")
    older = barrier.register(TickSource("older", tso))
    writes = barrier.register(BoundedTickSource("w", tso, LIMIT_S, 0.0, lambda: ticker.heard))
    with older.stamp() as held_at:
        time.sleep(LIMIT_S + 0.1)
        assert ticker.tick_once() == held_at - 1  # appended now, with an old value
        with pytest.raises(WriteTooSlow), writes.stamp():
            pass
    assert ticker.tick_once() is not None  # the older write ended: a fresh tick
    with writes.stamp() as ts:
        pass
    assert ts > held_at
