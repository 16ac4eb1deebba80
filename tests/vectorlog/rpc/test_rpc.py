"""The RPC layer itself: errors cross the wire as the same class and message, an unreachable
or silent server is a prompt ServiceUnavailable naming it, the client reconnects by itself,
and RootCoordClient batches allocations without ever handing out a value twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.processors.fakes import FakeDataCoord, FakeQueryNode, FakeRootCoord
from tests.processors.implementations import served
from tests.support import unused_port, wait_until
from vectorlog.core.errors import (
    CollectionNotFound,
    ConsistencyTimeout,
    InvalidArgument,
    RootCoordFenced,
    ServiceUnavailable,
)
from vectorlog.core.model import quick_schema
from vectorlog.processors.querycoord.errors import NotServing
from vectorlog.rpc.datacoord_client import DataCoordClient
from vectorlog.rpc.errors import RemoteError
from vectorlog.rpc.querynode_client import QueryNodeClient
from vectorlog.rpc.queryshard_client import QueryShardClient
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer


@dataclass
class CountingRootCoord(FakeRootCoord):
    """The twin, counting the allocation calls that reach it."""

    allocations: list[tuple[str, int]] = field(default_factory=list)

    def allocate_timestamps(self, count: int = 1) -> int:
        self.allocations.append(("ts", count))
        return super().allocate_timestamps(count)

    def allocate_ids(self, count: int = 1) -> int:
        self.allocations.append(("ids", count))
        return super().allocate_ids(count)


@pytest.fixture
def fake() -> CountingRootCoord:
    return CountingRootCoord()


@pytest.fixture
def remote(fake: CountingRootCoord) -> Iterator[RootCoordClient]:
    with served(rootcoord=fake) as address:
        client = RootCoordClient(address, ts_max_age_s=3600)
        yield client
        client.close()


def test_a_servers_error_is_raised_as_the_same_class_and_message(remote: RootCoordClient):
    with pytest.raises(CollectionNotFound) as local:
        FakeRootCoord().describe_collection("books")
    with pytest.raises(CollectionNotFound) as over_the_wire:
        remote.describe_collection("books")
    assert (
        str(over_the_wire.value)
        == str(local.value)
        == "collection not found[database=default][collection=books]"
    )
    assert over_the_wire.value.name == "books"
    with pytest.raises(InvalidArgument, match="1bad"):
        remote.create_collection("1bad", quick_schema(4, "L2"))


def test_an_error_keeps_its_attributes():
    with served(querynode=FakeQueryNode(tsafe_ts=5)) as address:
        client = QueryNodeClient(address)
        with pytest.raises(ConsistencyTimeout, match="ts 9") as caught:
            client.wait_tsafe([0], 9, timeout=0.1)
        assert (caught.value.guarantee_ts, caught.value.tsafe) == (9, 5)
        client.close()


def test_a_server_bug_is_a_remote_error_naming_it(fake: CountingRootCoord):
    fake.meta_horizon = lambda: 1 // 0  # type: ignore[method-assign]
    with served(rootcoord=fake) as address:
        client = RootCoordClient(address)
        with pytest.raises(RemoteError, match="ZeroDivisionError"):
            client.meta_horizon()
        client.close()


def test_a_method_the_served_object_lacks_is_refused_naming_it_and_the_rest_serve():
    """A datacoord served without the leading datacoord's jobs (DataCoord v3's Import ...)
    answers its own calls; a job call fails naming the method instead of the server refusing
    to start."""
    with served(datacoord=FakeDataCoord()) as address:
        client = DataCoordClient(address)
        assert client.list_segments(12345) == []
        with pytest.raises(RemoteError, match="DataCoord.ListImports"):
            client.list_imports()
        client.close()


def test_an_unreachable_server_is_service_unavailable_naming_it():
    address = f"127.0.0.1:{unused_port()}"
    client = RootCoordClient(address, deadline_s=2)
    with pytest.raises(ServiceUnavailable, match=f"rootcoord at {address} is unavailable"):
        client.now()
    client.close()


def test_a_server_that_does_not_answer_in_time_is_service_unavailable(fake: CountingRootCoord):
    release = threading.Event()
    fake.meta_horizon = lambda: int(release.wait(30))  # type: ignore[method-assign]
    with served(rootcoord=fake) as address:
        client = RootCoordClient(address, deadline_s=0.3)
        with pytest.raises(ServiceUnavailable, match="deadline_exceeded"):
            client.meta_horizon()
        release.set()
        client.close()


def test_the_client_reconnects_once_the_server_is_back(fake: CountingRootCoord):
    address = f"127.0.0.1:{unused_port()}"
    first = RpcServer(address, rootcoord=fake)
    first.start()
    client = RootCoordClient(address, deadline_s=2, ts_batch=1)
    before = client.now()
    first.stop(0)
    with pytest.raises(ServiceUnavailable):
        client.now()
    second = RpcServer(address, rootcoord=fake)
    second.start()
    try:

        def answered() -> int:
            try:
                return client.now()
            except ServiceUnavailable:
                return 0

        assert wait_until(answered, 30, "the client to reach the restarted server") > before
    finally:
        client.close()
        second.stop(0)


def test_timestamps_come_in_blocks_strictly_increasing(
    fake: CountingRootCoord, remote: RootCoordClient
):
    stamps = [remote.now() for _ in range(1000)]
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False))
    assert fake.allocations == [("ts", 256)] * 4  # ceil(1000 / 256) RPCs


def test_a_recent_timestamp_comes_from_the_block_while_it_is_fresh_and_takes_none(
    fake: CountingRootCoord, remote: RootCoordClient
):
    """A Bounded read's "now" (RootCoordClient.recent): the block's first while the block
    is younger than the age asked, with no RPC and no timestamp taken from it; a new block
    once it is older, never going back."""
    first = remote.now()  # the block fetched (a ticker's stamp)
    assert [remote.recent(3600) for _ in range(5)] == [first] * 5
    assert remote.now() == first + 1  # nothing taken from the block by the reads
    assert fake.allocations == [("ts", 256)]
    time.sleep(0.02)
    later = remote.recent(0.01)  # the block is older: a new one, above the first
    assert later > first + 1 and fake.allocations == [("ts", 256)] * 2


def test_a_stamp_comes_from_a_block_as_old_as_it_allows(fake: CountingRootCoord):
    """A heartbeat's stamp (RootCoordClient.stamp): from the block while it is younger than
    the age asked, however stale for `now`; strictly increasing, mixed with `now` too."""
    with served(rootcoord=fake) as address:
        client = RootCoordClient(address, ts_max_age_s=0.0)  # `now` never serves a block
        try:
            stamps = [client.stamp(3600) for _ in range(10)]
            assert fake.allocations == [("ts", 256)]
            fresh = client.now()
            assert fake.allocations == [("ts", 256)] * 2
            later = client.stamp(3600)  # from the block `now` fetched
            assert fake.allocations == [("ts", 256)] * 2
            every = [*stamps, fresh, later]
            assert all(a < b for a, b in zip(every, every[1:], strict=False))
        finally:
            client.close()


def test_a_restarted_client_never_reissues_a_timestamp_or_an_id(
    fake: CountingRootCoord, remote: RootCoordClient
):
    last_ts, ids = remote.now(), [remote.allocate_ids() for _ in range(5)]
    with served(rootcoord=fake) as address:  # another process (or the same restarted)
        again = RootCoordClient(address)
        assert again.now() > last_ts
        assert again.allocate_ids() > max(ids)
        again.close()


def test_ids_come_in_blocks_and_a_large_request_alone(
    fake: CountingRootCoord, remote: RootCoordClient
):
    small = [remote.allocate_ids(3) for _ in range(100)]
    large = remote.allocate_ids(50_000)
    assert fake.allocations == [("ids", 10_000), ("ids", 50_000)]
    spans = sorted([(s, s + 3) for s in small] + [(large, large + 50_000)])
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))
    with pytest.raises(InvalidArgument, match="positive"):
        remote.allocate_ids(0)


def test_a_wait_without_a_deadline_of_its_own_is_not_cut_short():
    """A proxy serving a pymilvus call without a deadline passes grpcio's "no deadline"
    (about 300 years) as the read's timeout; the wait must still be made."""
    with served(querynode=FakeQueryNode()) as address:
        client = QueryNodeClient(address)
        try:
            client.wait_tsafe([0], 0, timeout=1e10)
        finally:
            client.close()


class FencedRootCoord(FakeRootCoord):
    """A rootcoord whose lease was taken over: it refuses every allocation."""

    def allocate_timestamps(self, count: int = 1) -> int:
        raise RootCoordFenced("c1", "host h pid 1 took its lease over")


def test_a_client_of_several_addresses_follows_the_one_that_leads(fake: CountingRootCoord):
    """A role run with a standby: the client goes on past an address that is down, or whose
    process lost its lease, and stays with the one that answered."""
    down = f"127.0.0.1:{unused_port()}"
    fenced = FencedRootCoord()
    with served(rootcoord=fenced) as old, served(rootcoord=fake) as leader:
        client = RootCoordClient(f"{down},{old},{leader}", deadline_s=2, ts_batch=1)
        first = client.now()
        assert client.now() > first
        client.close()
        alone = RootCoordClient(f"{down},{old}", deadline_s=0.5, ts_batch=1)
        with pytest.raises(RootCoordFenced, match="took its lease over"):
            alone.now()  # at its deadline, the process's refusal when none leads
        alone.close()
    assert fake.allocations == [("ts", 1), ("ts", 1)]


def test_a_second_server_on_a_served_port_is_refused_and_the_first_keeps_its_clients(
    fake: CountingRootCoord,
):
    """gRPC shares a port between processes by default (SO_REUSEPORT): a process started on
    a port another one serves then took half of its new connections (seen in the role-kill
    chaos test: a proxy's datacoord calls reached a stranger's server, "Method not
    found"). The second bind is refused instead, naming the address."""
    address = f"127.0.0.1:{unused_port()}"
    first = RpcServer(address, rootcoord=fake)
    first.start()
    second = RpcServer(address, querynode=FakeQueryNode())
    try:
        with pytest.raises(InvalidArgument, match=f"cannot listen on {address}"):
            second.start()
        clients = [RootCoordClient(address, deadline_s=5, ts_batch=1) for _ in range(8)]
        assert all(c.now() > 0 for c in clients)  # each a new connection, all to `first`
        for c in clients:
            c.close()
    finally:
        second.stop(0)
        first.stop(0)


class Shards:
    """A query node's ShardRead: answers its pchannels, or refuses them as not served."""

    def read(self, op: str, pchannels: list[int], ts: int, timeout: float, args: Any) -> Any:
        if 3 in pchannels:
            raise NotServing("qn1", 7, [3])
        return {"node": "qn1", "epoch": 7, "results": [[p, True, args["k"] * p] for p in pchannels]}


def test_a_started_read_answers_when_waited_for_and_raises_the_servers_error():
    with served(shards=Shards()) as address:
        client = QueryShardClient(address)
        try:
            first = client.start_read("count", [1, 2], 5, 1.0, {"k": 10})
            refused = client.start_read("count", [3], 5, 1.0, {"k": 10})
            assert first()["results"] == [[1, True, 10], [2, True, 20]]
            with pytest.raises(NotServing, match=r"qn1 \(epoch 7\) does not serve pchannels \[3\]"):
                refused()
        finally:
            client.close()


def test_a_started_read_of_an_unreachable_node_is_service_unavailable():
    client = QueryShardClient(f"127.0.0.1:{unused_port()}", deadline_s=1.0)
    try:
        wait = client.start_read("count", [1], 5, 0.0, {"k": 1})
        with pytest.raises(ServiceUnavailable):
            wait()
    finally:
        client.close()
