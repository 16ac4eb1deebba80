"""DDL leases (processors/rootcoord/ddl_followers.py, runners/ddl_lease.py): a process that
caches the meta sees every DDL acknowledged before a read with no query to the broker per
read, because rootcoord returns a DDL only once each follower holding a lease has been told
the ddl offset to read past (its fence), or its lease lapsed. On both log backends, with
rootcoord's RPCs (and its DdlLease service) on a local port and the DDL made through the
cluster's own Client (another proxy):
- a drop and recreate with another dimension, a dropped index, altered properties are seen
  by the next read at once, and the reads asked the broker nothing;
- a follower whose ddl reader has not read the DDL does not answer with the meta before it
  (it waits for the reader, and fails if the reader does not get there);
- a follower that stopped renewing (unreachable, paused) does not let the DDL return while
  its lease could still let it answer from its cache: by then its lease has lapsed, and it
  asks the broker where the ddl topic ends, seeing the DDL too; one stopped cleanly gives
  its lease up, and DDLs wait for it no more."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients import cluster_args
from tests.support import log_params
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound, ServiceUnavailable
from vectorlog.processors.rootcoord.ddl_followers import DdlFollowers
from vectorlog.rpc.ddllease_client import DdlLeaseClient
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer
from vectorlog.runners.ddl_lease import RELEASED, DdlLease
from vectorlog.runners.ddl_watch import DdlWatch
from vectorlog.runners.remote import RemoteRootCoord


@dataclass
class Setup:
    other: Client  # DDL made elsewhere: another proxy of the same cluster
    remote: RemoteRootCoord  # this process's view, holding a lease
    server: RpcServer  # rootcoord's RPCs and its DdlLease service
    leases: DdlLeaseClient
    followers: DdlFollowers

    def follower(
        self, name: str, catch_up_s: float = 10.0, cut: threading.Event | None = None
    ) -> tuple[DdlWatch, DdlLease]:
        """Returns the ddl watch (not started: its reader reads nothing yet) and the lease
        (started) of another follower; once `cut` is set, its renewals fail as if rootcoord
        could not be reached."""
        cluster, held = self.other.cluster, list[DdlWatch]()

        def renew(follower: str, read_through: int, fence: int, wait_s: float) -> Any:
            if cut is not None and cut.is_set():
                raise ServiceUnavailable("rootcoord", self.server.address, "cut off (test)")
            return self.leases.renew(follower, read_through, fence, wait_s)

        lease = DdlLease(renew, name, lambda: held[0].next_offset, poll_s=0.2)
        serde = cluster.serdes.for_topic(cluster.topics.ddl)
        watch = DdlWatch(
            cluster.log, cluster.topics.ddl, serde, catch_up_s=catch_up_s, fence=lease.fence
        )
        held.append(watch)
        lease.start()
        return watch, lease


@pytest.fixture(params=log_params())
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    args = cluster_args(request.param, request, tmp_path)
    other = Client(args.pop("uri"), **args)
    cluster = other.cluster
    followers = DdlFollowers(-1, grace_s=0.0)  # no predecessor granted leases
    cluster.rootcoord.followers = followers
    server = RpcServer(rootcoord=cluster.rootcoord, ddl_leases=followers)
    server.start()
    leases = DdlLeaseClient(server.address)
    remote = RemoteRootCoord(
        RootCoordClient(server.address),
        cluster.log,
        cluster.topics.dml,
        cluster.serdes.for_topic(cluster.topics.dml),
        "test-proxy",
        3600.0,
        ddl=(cluster.topics.ddl, cluster.serdes.for_topic(cluster.topics.ddl)),
        renew_lease=leases.renew,
    )
    remote.start()
    try:
        yield Setup(other, remote, server, leases, followers)
    finally:
        remote.stop()
        remote.close()
        leases.close()
        server.stop(0)
        cluster.rootcoord.followers = None
        other.close()


def dim(s: Setup, name: str) -> int | None:
    return s.remote.describe_collection(name).schema.field("vector").dim


def test_each_ddl_made_elsewhere_is_seen_by_the_next_read_without_asking_the_broker(
    setup: Setup,
):
    s = setup
    s.other.create_collection("books", dimension=4)
    assert dim(s, "books") == 4
    for d in (8, 3, 5):
        s.other.drop_collection("books")
        with pytest.raises(CollectionNotFound):
            s.remote.describe_collection("books")
        s.other.create_collection("books", dimension=d)
        assert dim(s, "books") == d
    assert list(s.remote.describe_collection("books").indexes) == ["vector"]  # AUTOINDEX
    s.other.drop_index("books", "vector")
    assert s.remote.describe_collection("books").indexes == {}
    s.other.alter_collection_properties("books", {"collection.ttl.seconds": "60"})
    assert s.remote.describe_collection("books").properties["collection.ttl.seconds"] == "60"
    assert s.remote.ddl.end_queries == 0  # no read asked the broker where the topic ends
    assert s.remote.ddl.leased == s.remote.ddl.catch_ups > 0


def test_a_follower_whose_reader_has_not_read_the_ddl_waits_for_it(setup: Setup):
    s = setup
    s.other.create_collection("books", dimension=4)
    watch, lease = s.follower("held-back", catch_up_s=0.5)
    try:
        before = watch.latest()  # its reader is at the topic's end when it was made
        s.other.drop_collection("books")
        # the DDL returned: this follower was told to read past it before answering
        with pytest.raises(ServiceUnavailable, match="its reader is at offset"):
            watch.latest()
        watch.start()
        assert watch.latest() > before
        lease.stop()  # a clean stop gives the lease up: no DDL waits for it to lapse
        assert s.followers.followers()[lease.follower][1] == RELEASED
        s.other.create_collection("books", dimension=4)
        assert s.followers.lapsed == 0
    finally:
        lease.stop()
        watch.close()


def test_a_follower_that_stopped_renewing_has_lost_its_lease_when_the_ddl_returns(
    setup: Setup,
):
    s = setup
    s.other.create_collection("books", dimension=4)
    cut = threading.Event()
    watch, lease = s.follower("cut-off", catch_up_s=60.0, cut=cut)  # its reader starts late
    try:
        assert lease.fence() is not None
        before = watch.latest()
        cut.set()  # unreachable from here on: it renews no more
        s.other.drop_collection("books")
        assert lease.fence() is None  # the DDL waited for its lease to lapse
        assert s.followers.lapsed == 1
        ends = watch.end_queries
        watch.start()
        assert watch.latest() > before  # it asked the broker, and read the drop
        assert watch.end_queries == ends + 1
    finally:
        lease.stop()
        watch.close()


def test_a_renewal_wakes_no_other_followers_long_poll():
    """Each renewal woke every other follower's long poll, which found no new DDL and went
    back to waiting (the waiting renewal's clock reads count its wake-ups)."""
    waiter: list[int] = []
    reads = [0]

    def clock() -> float:
        if waiter and threading.get_ident() == waiter[0]:
            reads[0] += 1
        return time.monotonic()

    followers = DdlFollowers(-1, ttl_s=60.0, clock=clock, grace_s=0.0)
    answers: list[dict[str, Any]] = []

    def long_poll() -> None:
        waiter.append(threading.get_ident())
        answers.append(followers.renew("waiting", 1, -1, 60.0))

    t = threading.Thread(target=long_poll, daemon=True)
    t.start()
    while "waiting" not in followers.followers():  # noted under the lock it waits on
        time.sleep(0.01)
    for _ in range(40):  # another follower renews, again and again
        followers.renew("busy", 0, 10, 0.0)
        time.sleep(0.005)
    followers.settle(0)  # a DDL at offset 0 ends the long poll (both read past it)
    t.join(30)
    assert answers == [{"required": 0, "ttl_ms": 60_000}]
    assert reads[0] < 10  # old code: about 2 per renewal of the other follower
