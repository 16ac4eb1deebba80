"""A client of a role run with a standby (issue 23), across a takeover: it goes round the
addresses while none leads, until its deadline, and never sends again a call whose outcome is
unknown. Seen once in a process cluster (test_standby): a Strong read 63 ms after a write
through the new leader failed with the dead leader's "rootcoord ... is unavailable"."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.processors.fakes import FakeRootCoord
from tests.processors.implementations import served
from tests.support import unused_port
from vectorlog.core.errors import LeaseUnconfirmed, RootCoordFenced, ServiceUnavailable
from vectorlog.core.model import quick_schema
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer


@dataclass
class NewLeader(FakeRootCoord):
    """A rootcoord that just took the lease over: its first `unconfirmed` allocations are
    refused, its lease not confirmed yet (nothing allocated)."""

    unconfirmed: int = 0

    def allocate_timestamps(self, count: int = 1) -> int:
        if self.unconfirmed > 0:
            self.unconfirmed -= 1
            raise LeaseUnconfirmed("c1", 0.2)
        return super().allocate_timestamps(count)


def test_a_call_during_a_takeover_waits_for_the_new_leader_to_listen_and_lead():
    """The old leader is dead, the standby not listening yet when the call begins, then its
    lease is unconfirmed twice: the call goes round both addresses until it answers."""
    dead, standby = f"127.0.0.1:{unused_port()}", f"127.0.0.1:{unused_port()}"
    leader = NewLeader(unconfirmed=2)
    server = RpcServer(standby, rootcoord=leader)
    takeover = threading.Timer(0.3, server.start)
    client = RootCoordClient(f"{dead},{standby}", deadline_s=30, ts_batch=1)
    try:
        takeover.start()
        assert client.allocate_timestamps(1) > 0
        assert leader.unconfirmed == 0
    finally:
        takeover.join()
        client.close()
        server.stop(0)


def test_a_refusal_of_the_leader_that_answered_last_does_not_end_at_the_dead_address():
    """The incident's shape: the client is with the new leader (it answered last), which
    refuses once more; the dead leader, tried next, must not end the call."""
    dead = f"127.0.0.1:{unused_port()}"
    leader = NewLeader()
    with served(rootcoord=leader) as address:
        client = RootCoordClient(f"{dead},{address}", deadline_s=30, ts_batch=1)
        try:
            first = client.allocate_timestamps(1)
            leader.unconfirmed = 3
            assert client.allocate_timestamps(1) > first
        finally:
            client.close()


def test_a_leader_unreachable_for_a_moment_after_it_answered_is_waited_for():
    """The same, the new leader unreachable for a moment: before the fix the call ended at
    the dead leader, with its "rootcoord at DEAD is unavailable" (the incident's message)."""
    dead, address = f"127.0.0.1:{unused_port()}", f"127.0.0.1:{unused_port()}"
    leader = NewLeader()
    server = RpcServer(address, rootcoord=leader)
    server.start()
    client = RootCoordClient(f"{dead},{address}", deadline_s=30, ts_batch=1)
    back = RpcServer(address, rootcoord=leader)
    comes_back = threading.Timer(0.3, back.start)
    try:
        first = client.allocate_timestamps(1)
        server.stop(0)
        comes_back.start()
        assert client.allocate_timestamps(1) > first
    finally:
        comes_back.join()
        client.close()
        back.stop(0)


class Fenced(FakeRootCoord):
    """A rootcoord whose lease was taken over: it refuses every allocation."""

    def allocate_timestamps(self, count: int = 1) -> int:
        raise RootCoordFenced("c1", "host h pid 1 took its lease over")


@pytest.mark.parametrize(
    ("refusing", "expected"),
    [(lambda: NewLeader(unconfirmed=1 << 30), LeaseUnconfirmed), (Fenced, RootCoordFenced)],
)
def test_when_no_address_leads_the_call_fails_at_its_deadline_with_the_process_answer(
    refusing: Callable[[], FakeRootCoord], expected: type[Exception]
):
    """Not the dead address's "unavailable", though it was tried last."""
    dead = f"127.0.0.1:{unused_port()}"
    with served(rootcoord=refusing()) as address:
        client = RootCoordClient(f"{address},{dead}", deadline_s=0.5, ts_batch=1)
        try:
            with pytest.raises(expected):
                client.allocate_timestamps(1)
        finally:
            client.close()


def test_a_ddl_whose_outcome_is_unknown_is_not_sent_to_the_other_address():
    """A CreateCollection that reached the leader and timed out (a paused leader accepts
    connections and answers nothing) may have been applied: it fails as unavailable, the
    other address never sees it, and the caller's retry goes there."""
    release = threading.Event()
    slow, other = FakeRootCoord(), FakeRootCoord()
    slow_create = slow.create_collection

    def create(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        return slow_create(*args, **kwargs)

    slow.create_collection = create  # type: ignore[method-assign]
    with served(rootcoord=slow) as first, served(rootcoord=other) as second:
        client = RootCoordClient(f"{first},{second}", deadline_s=0.5)
        witness = RootCoordClient(second, deadline_s=5)
        try:
            with pytest.raises(ServiceUnavailable, match=f"at {first} .*deadline_exceeded"):
                client.create_collection("books", quick_schema(4, "L2"))
            assert not witness.has_collection("books")
            client.create_collection("books", quick_schema(4, "L2"))  # the caller's retry
            assert witness.has_collection("books")  # went on to the other address
        finally:
            release.set()
            client.close()
            witness.close()
