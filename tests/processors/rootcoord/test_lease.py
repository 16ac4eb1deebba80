"""The rootcoord lease on the log (issue 7, item 3), on both log backends: one holder per
cluster, taken over at once after a release or the death of its process on this host, after
its ttl otherwise; a holder that lost it is fenced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.processors.implementations import open_cluster
from tests.support import log_params, on_backends, unique_topic
from vectorlog.core.errors import ClusterInUse, LeaseUnconfirmed, RootCoordFenced
from vectorlog.processors.rootcoord.lease import FIRST_WINDOW, Lease
from vectorlog.processors.rootcoord.lease_record import Holder, LeaseRecord, LeaseState
from vectorlog.streams.log.base import Append, Log

NOW = 1_800_000_000_000
HOUR_S = 3600.0


def lease_topic(log: Log) -> str:
    topic = unique_topic("lease")
    log.create_topic(topic, 1)
    return topic


def lease(log: Log, topic: str, ttl_s: float | None = HOUR_S, at: int = NOW) -> Lease:
    return Lease(log, topic, "c1", ttl_s, clock=lambda: at)


def append(log: Log, topic: str, rec: LeaseRecord) -> int:
    return log.append(topic, [Append(0, rec.encode())])[0]


def record(op: str = "claim", at: int = NOW, **fields: object) -> LeaseRecord:
    """A record of another process (on another host unless told)."""
    base: dict[str, object] = {
        "op": op,
        "instance": "other",
        "host": "elsewhere",
        "pid": 4242,
        "at": at,
        "ttl_ms": 10_000,
    }
    return LeaseRecord(**{**base, **fields})  # type: ignore[arg-type]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@on_backends()
def test_the_first_claim_wins_and_a_second_is_refused_naming_the_holder(log: Log):
    topic = lease_topic(log)
    first = lease(log, topic)
    first.acquire()
    second = lease(log, topic)
    with pytest.raises(ClusterInUse) as err:
        second.acquire()
    assert f"pid {first.pid}" in str(err.value) and first.instance in str(err.value)
    assert first.host in str(err.value) and "'c1'" in str(err.value)
    assert second.epoch is None
    assert first.renew()  # the refused claim changed nothing
    first.check()
    first.close()


@on_backends()
def test_a_released_lease_is_taken_at_once(log: Log):
    topic = lease_topic(log)
    first = lease(log, topic)
    first.acquire()
    first.close()
    with pytest.raises(RootCoordFenced, match="released when it closed"):
        first.check()
    second = lease(log, topic)
    second.acquire()
    second.close()


@on_backends()
def test_a_holder_whose_process_is_gone_is_evicted_at_once(log: Log):
    topic = lease_topic(log)
    me = lease(log, topic)
    append(log, topic, record(host=me.host, pid=dead_pid(), ttl_ms=3_600_000))
    me.acquire()  # the holder's lease has an hour left, but its process is gone
    assert me.state.holder is not None and me.state.holder.record.instance == me.instance
    me.close()


@on_backends()
def test_a_live_holder_elsewhere_is_taken_over_only_after_its_ttl(log: Log):
    topic = lease_topic(log)
    append(log, topic, record(at=NOW))
    with pytest.raises(ClusterInUse, match="host elsewhere pid 4242"):
        lease(log, topic, at=NOW + 10_000).acquire()  # renewed exactly ttl ago: still live
    late = lease(log, topic, at=NOW + 10_001)
    late.acquire()
    late.close()


@on_backends()
def test_a_holder_whose_lease_was_taken_over_is_fenced(log: Log):
    topic = lease_topic(log)
    paused = Lease(log, topic, "c1", 10.0, clock=lambda: NOW)
    paused.acquire()
    # it stopped renewing (a long pause): another process took over after the ttl
    newer = Lease(log, topic, "c1", 10.0, clock=lambda: NOW + 10_001)
    newer.acquire()
    assert not paused.renew()  # its next renewal sees it
    with pytest.raises(RootCoordFenced, match=f"pid {newer.pid}.*took its lease over"):
        paused.check()
    assert newer.renew()
    newer.check()
    paused.close()  # its release does not end the newer holder's lease
    assert newer.renew()
    newer.close()


class Monotonic:
    """A settable monotonic clock (s)."""

    def __init__(self) -> None:
        self.s = 100.0

    def __call__(self) -> float:
        return self.s


@on_backends()
def test_a_lapsed_lease_is_renewed_before_the_next_allocation(log: Log):
    topic, mono = lease_topic(log), Monotonic()
    holder = Lease(log, topic, "c1", 10.0, monotonic=mono)
    holder.acquire()
    holder.check()
    renewals = holder.renewals
    mono.s += 7.9  # no renewal for 0.79 ttl (no renewal thread here): trusted still
    holder.check()
    assert holder.renewals == renewals
    mono.s += 0.2  # past 0.8 ttl (a long pause, say): the next allocation renews first
    holder.check()
    assert holder.renewals == renewals + 1
    holder.close()


@on_backends("embedded")
def test_a_lease_without_expiry_is_forced(log: Log):
    """On the embedded log the directory lock admits one process: a claim left by a crash
    (it never expires) is no obstacle."""
    topic = lease_topic(log)
    append(log, topic, record(ttl_ms=None, at=NOW))
    me = lease(log, topic, ttl_s=None)
    me.acquire()
    me.check()
    me.close()


@on_backends()
def test_garbage_on_the_lease_topic_is_ignored(log: Log):
    topic = lease_topic(log)
    log.append(topic, [Append(0, b"\x00garbage"), Append(0, b'{"op": "claim"}')])
    me = lease(log, topic)
    me.acquire()
    me.close()


@on_backends()
def test_a_claim_reads_back_far_enough_to_see_the_live_holder(log: Log):
    """Only the lease records of the last few ttls are read, but every one of them is."""
    topic = lease_topic(log)
    append(log, topic, record(at=NOW - 60_000))
    for i in range(3 * FIRST_WINDOW):  # renewals every 100 ms for ~20 s: it is live
        append(log, topic, record("renew", at=NOW - 20_000 + 100 * i, epoch=0))
    with pytest.raises(ClusterInUse, match="host elsewhere"):
        lease(log, topic).acquire()


def test_renewals_of_an_epoch_older_than_one_seen_are_void():
    state = LeaseState()
    state.apply(record(instance="a", at=NOW), 10)
    state.apply(record(instance="b", at=NOW + 20_000), 11)  # a expired: b takes over
    state.apply(record("renew", instance="a", at=NOW + 20_001, epoch=10), 12)
    assert state.holder == Holder(record(instance="b", at=NOW + 20_000), 11)
    state.apply(record("release", instance="a", epoch=10), 13)
    assert state.holder is not None and state.holder.epoch == 11
    mid_log = LeaseState()  # a reader that started after b's claim adopts b's epoch
    for offset, rec in [
        (12, record("renew", instance="a", at=NOW + 20_001, epoch=10)),
        (14, record("renew", instance="b", at=NOW + 23_000, epoch=11)),
    ]:
        mid_log.apply(rec, offset)
    assert mid_log.holder is not None and mid_log.holder.record.instance == "b"


def test_an_unconfirmed_lease_raises_without_fencing(tmp_path):
    from vectorlog.streams.log.embedded import EmbeddedLog

    log, mono = EmbeddedLog(tmp_path / "log"), Monotonic()
    topic = lease_topic(log)
    holder = Lease(log, topic, "c1", 10.0, monotonic=mono)
    holder.acquire()
    log.close()  # the log is gone: renewals fail
    mono.s += 9
    with pytest.raises(LeaseUnconfirmed, match="not confirmed for 9.0s"):
        holder.check()
    assert not holder.fenced


@pytest.mark.parametrize("kind", log_params())
def test_a_rootcoord_whose_lease_was_taken_over_issues_no_ids_or_timestamps(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
):
    """Its RootCoordService (what the other processors call) refuses every allocation, so a
    fenced leader never hands out an id or a timestamp the new holder may issue too."""
    client = open_cluster(kind, request, tmp_path)
    try:
        rootcoord, lease = client.cluster.rootcoord, client.cluster.lease
        assert rootcoord.allocate_ids(3) > 0  # the holder allocates
        # another rootcoord took over (it evicted this one, as after a long pause)
        taker = LeaseRecord("claim", "taker", lease.host, 1, 0, 1, evicts=lease.instance)
        append(client.cluster.log, lease.topic, taker)
        assert not lease.renew()
        for allocation in (
            rootcoord.allocate_ids,
            lambda: rootcoord.allocate_ids(1000),
            rootcoord.allocate_timestamps,
            rootcoord.now,
        ):
            with pytest.raises(RootCoordFenced, match="taker.*took its lease over"):
                allocation()
    finally:
        client.close()
