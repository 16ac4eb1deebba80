"""Standbys of the lease (issue 23), on both log backends: each role has a lease of its own on
the one topic; a standby waits while the holder is live and takes over once it released the
lease or stopped renewing it; the holder it replaced appends nothing more, not even a renewal,
through the lease or through a log fenced by it."""

from __future__ import annotations

import threading
from typing import cast

import pytest

from tests.processors.rootcoord.test_lease import HOUR_S, NOW, append, lease_topic, record
from tests.support import on_backends, wait_until
from vectorlog.core.errors import ClusterInUse, RootCoordFenced, WriteOutcomeUnknown
from vectorlog.core.hybridts import wall_ms
from vectorlog.processors.rootcoord.lease import Lease
from vectorlog.processors.rootcoord.lease_record import LeaseRecord
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.log.fenced import fenced
from vectorlog.streams.log.lease_fence import FENCED_SOURCE, lease_headers, takeover_marker
from vectorlog.streams.scan import read_all


class Standing:
    """A standby's wait_acquire on a thread: `waited_for` the holder it named, `held`."""

    def __init__(self, standby: Lease) -> None:
        self.standby, self.stopping = standby, threading.Event()
        self.waited_for: list[str] = []
        self.held: bool | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.held = self.standby.wait_acquire(self.stopping, self.waited_for.append)

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(30)


def records_of(log: Log, topic: str) -> list[tuple[int, LeaseRecord]]:
    out = []
    for r in read_all(log, topic):
        rec = LeaseRecord.decode(r.value)
        if rec is not None:
            out.append((r.offset, rec))
    return out


@on_backends()
def test_a_standby_takes_over_once_the_holder_stops_renewing(log: Log):
    topic = lease_topic(log)
    append(log, topic, record(at=wall_ms(), ttl_ms=1_000))  # live for one more second
    standby = Standing(Lease(log, topic, "c1", 1.0))
    try:
        wait_until(lambda: standby.held, 30, "the standby to take the lease over")
        assert standby.waited_for and "host elsewhere pid 4242" in standby.waited_for[0]
        standby.standby.check()
    finally:
        standby.stop()
        standby.standby.close()


@on_backends()
def test_a_standby_takes_over_at_once_when_the_holder_releases(log: Log):
    topic = lease_topic(log)
    leader = Lease(log, topic, "c1", HOUR_S)
    leader.acquire()
    standby = Standing(Lease(log, topic, "c1", HOUR_S))
    wait_until(lambda: standby.waited_for, 30, "the standby to wait")
    assert leader.renew()  # it waits without taking anything
    leader.close()
    try:
        wait_until(lambda: standby.held, 30, "the standby to take the released lease")
        assert standby.standby.epoch is not None and leader.epoch is None
    finally:
        standby.stop()
        standby.standby.close()


@on_backends()
def test_a_standby_asked_to_stop_holds_nothing(log: Log):
    topic = lease_topic(log)
    leader = Lease(log, topic, "c1", HOUR_S)
    leader.acquire()
    standby = Standing(Lease(log, topic, "c1", HOUR_S))
    wait_until(lambda: standby.waited_for, 30, "the standby to wait")
    standby.stop()
    assert standby.held is False and standby.standby.epoch is None
    assert leader.renew()
    leader.close()


@on_backends()
def test_each_role_has_a_lease_of_its_own(log: Log):
    topic = lease_topic(log)
    rootcoord = Lease(log, topic, "c1", HOUR_S)
    rootcoord.acquire()
    datacoord = Lease(log, topic, "c1", HOUR_S, role="datacoord", address="h:1")
    datacoord.acquire()  # rootcoord's lease is no obstacle
    second = Lease(log, topic, "c1", HOUR_S, role="datacoord")
    with pytest.raises(ClusterInUse, match=f"its datacoord runs in .*pid {datacoord.pid}"):
        second.acquire()
    assert rootcoord.renew() and datacoord.renew()
    claims = [r for _, r in records_of(log, topic) if r.op == "claim"]
    assert [(c.role, c.address) for c in claims] == [
        ("rootcoord", None), ("datacoord", "h:1"), ("datacoord", None)
    ]  # fmt: skip
    rootcoord.close()
    datacoord.close()


@on_backends()
def test_a_fenced_holder_appends_nothing_more(log: Log):
    topic, data = lease_topic(log), lease_topic(log)
    paused = Lease(log, topic, "c1", 10.0, clock=lambda: NOW, role="datacoord")
    paused.acquire()
    writes = fenced(log, paused.check)
    writes.append(data, [Append(0, b"while it leads")])
    # it stopped renewing (SIGSTOP, say): a standby took over after the ttl
    newer = Lease(log, topic, "c1", 10.0, clock=lambda: NOW + 10_001, role="datacoord")
    newer.acquire()
    assert not paused.renew()
    with pytest.raises(RootCoordFenced, match="cluster 'c1''s datacoord.*took its lease over"):
        writes.append(data, [Append(0, b"after it was fenced")])
    paused.close()
    assert [r.value for r in read_all(log, data)] == [b"while it leads"]
    takeover = next(o for o, r in records_of(log, topic) if r.instance == newer.instance)
    assert [o for o, r in records_of(log, topic) if r.instance == paused.instance] == [
        takeover - 1
    ]  # its claim alone: no renewal, no release after the takeover
    assert newer.renew()
    newer.close()


class Slow:
    """A log whose appends wait for `go`: a producer's queue holding a record while its
    process is paused (the record lands when the process resumes)."""

    def __init__(self, log: Log) -> None:
        self.log, self.go, self.waiting = log, threading.Event(), threading.Event()

    def append(self, topic: str, records: list[Append]) -> list[int]:
        self.waiting.set()
        self.go.wait(60)
        return self.log.append(topic, records)

    def partitions(self, topic: str) -> int:
        return self.log.partitions(topic)


def leading(log: Log, lease: Lease) -> Log:
    """Returns `log` fenced by `lease`, its records tagged with its epoch."""
    assert lease.epoch is not None
    return fenced(log, lease.check, lambda: lease_headers([(lease.role, lease.epoch or 0)]))


@on_backends()
def test_an_append_handed_over_before_a_takeover_that_lands_after_it_is_read_by_nobody(log: Log):
    """The window the lease check cannot close (the broker does not know the lease): the old
    leader's append passed the check, then waited in its producer while the process was
    paused and a standby took over; it lands after the takeover marker, and every reader
    that read the marker sees in its place a tick that promises nothing."""
    topic, data = lease_topic(log), lease_topic(log)
    later = [0.0]  # the paused leader's monotonic clock: it jumps past the ttl on resume
    paused = Lease(log, topic, "c1", 10.0, clock=lambda: NOW, monotonic=lambda: later[0])
    paused.acquire()
    slow = Slow(log)
    old = leading(cast(Log, slow), paused)
    slow.go.set()
    old.append(data, [Append(0, b"while it leads")])
    slow.go.clear()
    outcome: list[BaseException | list[int]] = []
    late = threading.Thread(target=lambda: outcome.append(_append(old, data, b"late")))
    late.start()
    wait_until(slow.waiting.is_set, 30, "the append handed over")
    newer = Lease(log, topic, "c1", 10.0, clock=lambda: NOW + 10_001)
    newer.acquire()
    new = leading(log, newer)
    new.append(data, takeover_marker(1))
    new.append(data, [Append(0, b"the new leader's")])
    later[0] = 60.0
    slow.go.set()  # it resumes: the record lands after the takeover
    late.join(60)
    assert isinstance(outcome[0], WriteOutcomeUnknown)  # never acknowledged
    read = list(read_all(log, data))
    assert len(read) == 4  # the late record is on the log, at its offset ...
    assert [r.value for r in read if not _tick(r.value)] == [b"while it leads", b"the new leader's"]
    assert EventSerde().decode(read[3].value).body["source"] == FENCED_SOURCE  # ... hidden
    paused.close()
    newer.close()


def _append(log: Log, topic: str, value: bytes) -> BaseException | list[int]:
    try:
        return log.append(topic, [Append(0, value)])
    except BaseException as exc:  # what the caller of the paused leader was told
        return exc


def _tick(value: bytes) -> bool:
    try:
        return EventSerde().decode(value).type == "TimeTick"
    except MalformedEvent:
        return False
