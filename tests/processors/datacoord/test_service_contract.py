"""The DataCoordService contract (processors/datacoord/service.py), run against every
implementation (tests/processors/implementations.py): the twin in tests/processors/fakes.py,
the real datacoord of a cluster on each log backend, and the network client through an
RpcServer wrapping the real one. Rows reach the real one as a user writes them (through the
cluster's proxy, which asks datacoord for segments); the twin is asked directly."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.processors.fakes import FakeDataCoord, collection
from tests.processors.implementations import ALL, real_or_remote
from vectorlog.core.errors import FlushTimeout
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.model import CollectionInfo
from vectorlog.processors.datacoord.service import CompactionPolicy, DataCoordService
from vectorlog.rpc.datacoord_client import DataCoordClient

pytestmark = pytest.mark.parametrize("setup", ALL, indirect=True)


@dataclass
class Setup:
    """A DataCoordService, two collections it serves, and a way to write rows to one."""

    service: DataCoordService
    books: CollectionInfo
    other: CollectionInfo
    write: Callable[[CollectionInfo, int], None]

    def assign(self, info: CollectionInfo, rows: int, channel: int = 0) -> list[tuple[int, int]]:
        """Asks for segments for `rows` rows on one of `info`'s channels."""
        partition = info.partitions["_default"]
        vchannel, pchannel = info.vchannels[channel], info.pchannels[channel]
        return self.service.assign_segments(
            info.collection_id, partition, vchannel, pchannel, rows, 32, compose(wall_ms())
        )


def _rows(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(n)]


@pytest.fixture
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    if request.param == "fake":
        fake = FakeDataCoord()
        books, other = collection("books", 100), collection("other", 200)

        def write(info: CollectionInfo, n: int) -> None:  # rows reach the twin so
            made.assign(info, n)

        made = Setup(fake, books, other, write)
        yield made
        return
    with real_or_remote(request.param, request, tmp_path, "datacoord", DataCoordClient) as (
        client,
        service,
    ):
        for name in ("books", "other"):
            client.create_collection(name, 4, metric_type="L2", num_shards=2)
        infos = [client.cluster.rootcoord.describe_collection(n) for n in ("books", "other")]

        def write(info: CollectionInfo, n: int) -> None:
            client.insert(info.name, _rows(n))

        yield Setup(service, infos[0], infos[1], write)


def test_an_assignment_covers_the_rows_and_fills_the_growing_segment_first(setup: Setup):
    first = setup.assign(setup.books, 10)
    second = setup.assign(setup.books, 5)
    assert sum(n for _, n in first) == 10 and sum(n for _, n in second) == 5
    assert {s for s, _ in first} == {s for s, _ in second} and len(first) == 1


def test_each_channel_and_collection_has_its_own_segment(setup: Setup):
    ((a, _),), ((b, _),) = setup.assign(setup.books, 3, 0), setup.assign(setup.books, 3, 1)
    ((c, _),) = setup.assign(setup.other, 3)
    assert len({a, b, c}) == 3


def test_segment_info_describes_a_growing_segment_and_an_unknown_id(setup: Setup):
    ((segment, _),) = setup.assign(setup.books, 4)
    info, unknown = setup.service.get_segment_info([segment, 12345])
    assert info["segment_id"] == segment and info["state"] == "Growing"
    assert info["collection_id"] == setup.books.collection_id
    assert info["partition_id"] == setup.books.partitions["_default"]
    assert info["insert_channel"] == setup.books.vchannels[0]
    assert unknown == {"segment_id": 12345, "state": "NotExist"}


def test_flush_seals_the_collections_growing_segments_only(setup: Setup):
    ((segment, _),) = setup.assign(setup.books, 4)
    ((other, _),) = setup.assign(setup.other, 4)
    assert setup.service.flush(setup.books.collection_id) == [segment]
    (info,) = setup.service.get_segment_info([segment])
    assert info["state"] != "Growing"
    assert setup.service.get_segment_info([other])[0]["state"] == "Growing"
    ((after, _),) = setup.assign(setup.books, 4)
    assert after != segment


def test_written_rows_are_flushed_and_counted(setup: Setup):
    setup.write(setup.books, 12)
    pending = setup.service.flush(setup.books.collection_id)
    assert pending
    setup.service.wait_flushed(pending, timeout=30)
    assert setup.service.flush_state(pending)
    infos = setup.service.list_segments(setup.books.collection_id)
    assert {i["state"] for i in infos} == {"Flushed"}
    assert sum(i["num_rows"] for i in infos) == 12
    assert {i["segment_id"] for i in infos} == set(pending)


def test_waiting_for_a_growing_segment_times_out_naming_it(setup: Setup):
    ((segment, _),) = setup.assign(setup.books, 4)
    assert not setup.service.flush_state([segment])
    with pytest.raises(FlushTimeout, match=str(segment)) as caught:
        setup.service.wait_flushed([segment], timeout=0.3)
    assert caught.value.states == {segment: "Growing"}


def test_nothing_to_wait_for_is_flushed(setup: Setup):
    assert setup.service.flush_state([])
    assert setup.service.flush_state([12345])  # no such segment: nothing left to flush
    setup.service.wait_flushed([], timeout=1)


def test_listing_names_every_segment_of_the_collection_by_id(setup: Setup):
    ids = [setup.assign(setup.books, 2, ch)[0][0] for ch in (0, 1)]
    setup.assign(setup.other, 2)
    listed = setup.service.list_segments(setup.books.collection_id)
    assert [i["segment_id"] for i in listed] == sorted(ids)
    assert setup.service.list_segments(999_999) == []


def test_no_compaction_is_planned_for_growing_segments(setup: Setup):
    setup.assign(setup.books, 2)
    cid = setup.books.collection_id
    assert setup.service.compaction_groups(cid, horizon=0) == []
    policy = CompactionPolicy(small_fraction=1.0, min_segments=1)
    assert setup.service.compaction_groups(cid, horizon=0, policy=policy) == []
