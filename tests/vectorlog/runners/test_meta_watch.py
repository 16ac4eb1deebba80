"""A cluster process's meta (runners/remote.py, meta_cache.py, ddl_watch.py): the latest
collection meta is served from a cache that follows the `ddl` topic, with no RPC to rootcoord
per read, yet a DDL acknowledged elsewhere before a read (a drop and recreate with another
dimension, an added field, altered properties, an alias moved) is seen by that read at once,
and a process started after a DDL reads the cached meta with no RPC as well;
a write stamped after it is stamped above the DDL; a Strong read's timestamp is asked of the
oracle, a Bounded one's is not; look-ups inside one `meta_point()` block (an ingest batch)
wait for the ddl watch once. On both log backends: rootcoord of a cluster serves its RPCs
on a local port, and the DDL is made through that cluster's own Client (another proxy)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from tests.clients import cluster_args
from tests.support import log_params
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound, SchemaMismatch, ServiceUnavailable
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.model import DataType
from vectorlog.rpc.methods import ROOTCOORD
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer
from vectorlog.runners.remote import RemoteRootCoord
from vectorlog.schemas.serde import Event
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log


@dataclass
class Setup:
    other: Client  # DDL made elsewhere: another proxy of the same cluster
    remote: RemoteRootCoord  # this process's view
    server: RpcServer  # rootcoord's RPCs, counted

    def rpcs(self) -> dict[str, int]:
        return {m: n for (s, m), n in self.server.served.counts().items() if s == ROOTCOORD.name}


@pytest.fixture(params=log_params())
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    args = cluster_args(request.param, request, tmp_path)
    other = Client(args.pop("uri"), **args)
    cluster = other.cluster
    server = RpcServer(rootcoord=cluster.rootcoord)
    server.start()
    # a block of timestamps kept a minute: only the DDL the watch reads can move past it
    client = RootCoordClient(server.address, ts_max_age_s=60.0)
    remote = RemoteRootCoord(
        client,
        cluster.log,
        cluster.topics.dml,
        cluster.serdes.for_topic(cluster.topics.dml),
        "test-proxy",
        3600.0,
        ddl=(cluster.topics.ddl, cluster.serdes.for_topic(cluster.topics.ddl)),
    )
    remote.start()
    try:
        yield Setup(other, remote, server)
    finally:
        remote.stop()
        remote.close()
        server.stop(0)
        other.close()


def dim(s: Setup, name: str) -> int | None:
    return s.remote.describe_collection(name).schema.field("vector").dim


def cached_until_the_next_ddl(s: Setup, view: Setup) -> dict[str, int]:
    """Checks that 20 reads of "books" (dimension 4, already fetched) through `view` make no
    RPC of `s`'s server, then that a DDL made elsewhere (books again, dimension 8) is read
    at once; returns the RPC counts from before the reads."""
    before = s.rpcs()
    for _ in range(20):
        assert dim(view, "books") == 4
    assert s.rpcs() == before
    s.other.drop_collection("books")
    s.other.create_collection("books", dimension=8)
    assert dim(view, "books") == 8
    return before


def test_a_ddl_made_elsewhere_is_seen_by_the_next_read_at_once(setup: Setup):
    s = setup
    s.other.create_collection("books", dimension=4)
    old = s.remote.describe_collection("books")
    s.other.drop_collection("books")
    with pytest.raises(CollectionNotFound):
        s.remote.describe_collection("books")
    s.other.create_collection("books", dimension=8)
    assert dim(s, "books") == 8
    assert s.remote.describe_collection("books").collection_id != old.collection_id
    s.other.add_collection_field("books", "tag", DataType.INT64, nullable=True)
    assert s.remote.describe_collection("books").schema.field("tag").nullable
    s.other.alter_collection_properties("books", {"collection.ttl.seconds": "60"})
    assert s.remote.describe_collection("books").properties["collection.ttl.seconds"] == "60"
    s.other.create_collection("papers", dimension=2)
    s.other.create_alias("papers", "shelf")
    assert dim(s, "shelf") == 2
    s.other.alter_alias("books", "shelf")
    assert dim(s, "shelf") == 8


def test_reads_of_unchanged_meta_make_no_rpc(setup: Setup):
    s = setup
    s.other.create_collection("books", dimension=4)
    s.remote.describe_collection("books")
    before = cached_until_the_next_ddl(s, s)
    assert s.rpcs()["DescribeCollection"] == before["DescribeCollection"] + 1


def test_look_ups_in_one_meta_point_wait_for_the_ddl_watch_once(setup: Setup):
    s = setup
    s.other.create_collection("books", dimension=4)  # acknowledged before the block
    before = s.remote.ddl.catch_ups
    with s.remote.meta_point():
        assert [dim(s, "books") for _ in range(3)] == [4, 4, 4]  # an ingest batch's three
        assert s.remote.ddl.catch_ups == before + 1
    s.other.drop_collection("books")
    s.other.create_collection("books", dimension=8)
    with s.remote.meta_point():  # the next block sees the DDL made since the last one
        assert [dim(s, "books") for _ in range(3)] == [8, 8, 8]
    assert s.remote.ddl.catch_ups == before + 2
    assert dim(s, "books") == 8  # outside a block each look-up waits
    assert s.remote.ddl.catch_ups == before + 3


def test_a_write_stamped_after_a_ddl_made_elsewhere_is_stamped_above_it(setup: Setup):
    s = setup
    s.remote.client.now()  # this process's block, kept a minute, from before the DDL
    s.other.create_collection("books", dimension=4)
    info = s.remote.describe_collection("books")  # the read that follows the DDL
    assert s.remote.client.now() > info.created_ts


def test_only_a_strong_read_asks_the_oracle(setup: Setup):
    s = setup
    s.remote.bounded_ts()  # the block fetched
    before = s.rpcs().get("AllocTimestamp", 0)
    bounded = [s.remote.bounded_ts() for _ in range(10)]
    assert s.rpcs().get("AllocTimestamp", 0) == before
    assert bounded == sorted(bounded)  # never back; no fresh stamp taken for a read
    strong = s.remote.strong_ts()
    assert strong > bounded[-1]
    assert s.rpcs()["AllocTimestamp"] == before + 1


def test_a_write_prepared_before_a_field_was_added_elsewhere_is_refused(setup: Setup):
    s = setup
    s.other.create_collection("books", dimension=4)
    info = s.remote.describe_collection("books")
    s.other.add_collection_field("books", "tag", DataType.INT64, nullable=True)
    refused = pytest.raises(SchemaMismatch, match="schema of collection books changed")
    with refused, s.remote.write_guard(info):
        pass
    with s.remote.write_guard(s.remote.describe_collection("books")):
        pass  # prepared against the new schema: let through


class Unreachable:
    """A Log whose `end_offsets` fails while `down` (a broker that cannot be reached)."""

    def __init__(self, log: Any) -> None:
        self._log, self.down = log, False

    def end_offsets(self, topic: str) -> dict[int, int]:
        if self.down:
            raise LogError(f"{topic}: the broker cannot be reached (test)")
        return dict(self._log.end_offsets(topic))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


def test_a_read_while_the_broker_is_unreachable_fails_as_service_unavailable(setup: Setup):
    s = setup
    s.other.create_collection("books", dimension=4)
    cluster = s.other.cluster
    log = Unreachable(cluster.log)
    remote = RemoteRootCoord(
        RootCoordClient(s.server.address),
        cast(Log, log),
        cluster.topics.dml,
        cluster.serdes.for_topic(cluster.topics.dml),
        "test-proxy-2",
        3600.0,
        ddl=(cluster.topics.ddl, cluster.serdes.for_topic(cluster.topics.ddl)),
    )
    remote.start()
    view = Setup(s.other, remote, s.server)
    try:
        assert dim(view, "books") == 4
        log.down = True
        with pytest.raises(ServiceUnavailable, match="the ddl topic .* is unavailable"):
            remote.describe_collection("books")
        log.down = False
        assert dim(view, "books") == 4  # back by itself
    finally:
        remote.stop()
        remote.close()


def test_a_process_started_after_the_ddl_reads_cached_meta_with_no_rpc(setup: Setup):
    # an ingest worker started after its collection was made: rootcoord's tick on ddl after
    # the DDL made every look-up of its watch fetch again (GetMetaVersion + describe)
    s = setup
    s.other.create_collection("books", dimension=4)
    cluster = s.other.cluster
    ddl, serde = cluster.topics.ddl, cluster.serdes.for_topic(cluster.topics.ddl)
    tick = Event("TimeTick", compose(wall_ms()), {"source": "rootcoord"})
    cluster.log.append(ddl, [Append(0, serde.encode(tick))])
    remote = RemoteRootCoord(
        RootCoordClient(s.server.address), cluster.log, cluster.topics.dml,
        cluster.serdes.for_topic(cluster.topics.dml), "test-proxy-2", 3600.0, ddl=(ddl, serde),
    )  # fmt: skip
    remote.start()
    view = Setup(s.other, remote, s.server)
    try:
        assert dim(view, "books") == 4  # fetched once
        cached_until_the_next_ddl(s, view)  # a DDL after its start: fetched again
    finally:
        remote.stop()
        remote.close()
