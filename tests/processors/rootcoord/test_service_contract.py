"""The RootCoordService contract (processors/rootcoord/service.py), run against every
implementation: the real rootcoord of a cluster on each log backend, and the test twin in
tests/processors/fakes.py, so a unit test that uses the twin relies only on what the real one
does. A network client joins the list when cluster mode brings one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients import cluster_args
from tests.processors.fakes import FakeRootCoord
from tests.support import log_params
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound
from vectorlog.core.model import quick_schema
from vectorlog.processors.rootcoord.service import RootCoordService

SCHEMA = quick_schema(4, "L2")


@pytest.fixture(params=["fake", *log_params()])
def rootcoord(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RootCoordService]:
    """A RootCoordService: the twin, or the real one of a fresh cluster on a log backend."""
    if request.param == "fake":
        yield FakeRootCoord()
        return
    args: dict[str, Any] = cluster_args(request.param, request, tmp_path)
    client = Client(args.pop("uri"), **args)
    try:
        yield client.cluster.rootcoord
    finally:
        client.close()


def test_timestamps_strictly_increase(rootcoord: RootCoordService):
    stamps = [rootcoord.now() for _ in range(200)]
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False))


def test_id_ranges_never_overlap(rootcoord: RootCoordService):
    ranges = [(first, first + n) for n in (1, 5, 100, 3) for first in [rootcoord.allocate_ids(n)]]
    ranges.sort()
    assert all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False))


def test_a_created_collection_is_described_listed_and_has(rootcoord: RootCoordService):
    info = rootcoord.create_collection("books", SCHEMA, shards_num=2)
    assert (info.name, info.shards_num) == ("books", 2)
    described = rootcoord.describe_collection("books")
    assert described.collection_id == info.collection_id
    assert rootcoord.has_collection("books")
    assert "books" in rootcoord.list_collections()
    assert any(h.collection_id == info.collection_id for h in rootcoord.collection_histories())


def test_an_unknown_collection_is_not_found(rootcoord: RootCoordService):
    assert not rootcoord.has_collection("nothing")
    with pytest.raises(CollectionNotFound, match="nothing"):
        rootcoord.describe_collection("nothing")


def test_a_dropped_collection_is_gone_now_but_seen_before_the_drop(rootcoord: RootCoordService):
    rootcoord.create_collection("books", SCHEMA)
    before_drop = rootcoord.now()
    rootcoord.drop_collection("books")
    assert not rootcoord.has_collection("books")
    assert "books" not in rootcoord.list_collections()
    with pytest.raises(CollectionNotFound):
        rootcoord.describe_collection("books")
    assert rootcoord.has_collection("books", as_of=before_drop)


def test_a_collection_did_not_exist_before_its_creation(rootcoord: RootCoordService):
    before = rootcoord.now()
    rootcoord.create_collection("books", SCHEMA)
    assert not rootcoord.has_collection("books", as_of=before)
    assert "books" not in rootcoord.list_collections(as_of=before)


def test_the_write_guard_refuses_a_dropped_collection(rootcoord: RootCoordService):
    info = rootcoord.create_collection("books", SCHEMA)
    with rootcoord.write_guard(info):
        pass
    rootcoord.drop_collection("books")
    with pytest.raises(CollectionNotFound), rootcoord.write_guard(info):
        pass


def test_stamps_and_strong_reads_follow_the_clock(rootcoord: RootCoordService):
    earlier = rootcoord.now()
    with rootcoord.tick_source("contract").stamp() as ts:
        assert ts > earlier
    assert rootcoord.strong_ts() >= ts
