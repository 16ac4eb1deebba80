"""Unit tests of the proxy alone: rootcoord, datacoord and the query node are in-memory twins
of their service interfaces; the log is real (both backends)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.processors.fakes import FakeDataCoord, FakeQueryNode, FakeRootCoord, collection
from tests.support import unique_topic
from vectorlog.errors import (
    CollectionNotFound,
    ConsistencyTimeout,
    InvalidArgument,
    SchemaMismatch,
)
from vectorlog.processors.proxy.proxy import Proxy
from vectorlog.schemas.columns import decode_column
from vectorlog.schemas.serde import Event
from vectorlog.streams.channels import shard_of
from vectorlog.streams.log.base import Log
from vectorlog.streams.scan import read_to_end
from vectorlog.streams.topics import Serdes, Topics
from vectorlog.types import IndexSpec, ReadAt

pytestmark = pytest.mark.parametrize("log", ["embedded", "kafka"], indirect=True)


class Parts:
    """A proxy wired to twins, and a way to read what it appended."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.topics = Topics(unique_topic("proxy"), dml_partitions=2)
        self.topics.ensure(log)
        self.rc = FakeRootCoord({"books": collection(shards=2)})
        self.dc, self.qn = FakeDataCoord(), FakeQueryNode()
        self.proxy = Proxy(
            "p1", self.rc, self.dc, self.qn, log, self.topics, Serdes(), read_timeout=0.2
        )

    def events(self) -> list[Event]:
        serde = Serdes().for_topic(self.topics.dml)
        return [serde.decode(r.value) for r in read_to_end(self.log, self.topics.dml)]


@pytest.fixture
def parts(log: Log) -> Parts:
    return Parts(log)


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": start + i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(n)]


def test_insert_stamps_one_ts_routes_by_key_hash_and_takes_datacoord_segments(parts: Parts):
    res = parts.proxy.insert("books", rows(40))
    assert res["insert_count"] == 40 and res["ids"] == list(range(40))
    assert parts.rc.stamped == [res["timestamp"]]  # one stamp for the whole batch
    events = parts.events()
    assert {e.ts for e in events} == {res["timestamp"]}
    info = parts.rc.collections["books"]
    shards = shard_of(np.arange(40, dtype=np.int64), 2)
    assigned = {call[2]: 5001 + i for i, call in enumerate(parts.dc.calls)}  # the twin's ids
    for e in events:
        shard = info.vchannels.index(e.vchannel)
        keys = decode_column(e.body["columns"][0]["column"], e.body["num_rows"])
        assert set(keys.tolist()) == set(np.nonzero(shards == shard)[0].tolist())
        assert e.body["segment_id"] == assigned[e.vchannel]
        assert e.body["partition_id"] == info.partitions["_default"]
    assert sum(call[3] for call in parts.dc.calls) == 40


def test_row_ids_come_from_rootcoord_and_auto_ids_too(parts: Parts):
    parts.rc.collections["auto"] = collection("auto", 200, shards=1, auto_id=True)
    res = parts.proxy.insert("auto", [{"vector": [1.0, 0, 0, 0]}] * 3)
    # the auto keys (3) are taken first, then the row ids (3): no id is handed out twice
    assert res["ids"] == [1000, 1001, 1002]
    (event,) = parts.events()
    assert event.body["first_row_id"] == 1003


def test_invalid_rows_are_refused_before_anything_is_written(parts: Parts):
    with pytest.raises(SchemaMismatch, match="vector"):
        parts.proxy.insert("books", [{"id": 1, "vector": [1.0, 2.0]}])
    with pytest.raises(InvalidArgument, match="partition 'nope'"):
        parts.proxy.insert("books", rows(1), partition_name="nope")
    with pytest.raises(CollectionNotFound, match="missing"):
        parts.proxy.insert("missing", rows(1))
    assert parts.events() == [] and parts.rc.stamped == [] and parts.dc.calls == []


def test_delete_goes_to_the_key_shards_with_partition_all(parts: Parts):
    res = parts.proxy.delete("books", [1, 2, 3, 4])
    events = parts.events()
    assert {e.type for e in events} == {"RowsDeleted"} and {e.ts for e in events} == {
        res["timestamp"]
    }
    assert sum(e.body["num_rows"] for e in events) == 4
    assert {e.body["partition_id"] for e in events} == {-1}


def test_reads_wait_for_tsafe_ask_for_a_tick_and_name_the_collection(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18  # applied far ahead: no wait, no tick asked
    assert parts.proxy.count("books") == 0
    assert parts.rc.tick_requests == 0
    parts.qn.tsafe_ts = 0
    with pytest.raises(ConsistencyTimeout):
        parts.proxy.search("books", [[0.0, 0.0, 0.0, 1.0]], limit=3)
    assert parts.rc.tick_requests == 1  # a Strong read asked for a tick rather than waiting
    parts.qn.known.clear()
    parts.qn.tsafe_ts = 10**18
    with pytest.raises(CollectionNotFound, match="'books'"):  # by name, not by id
        parts.proxy.get("books", [1])


def test_read_timestamps_follow_the_consistency_level(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    parts.proxy.count("books", ReadAt(as_of=7))
    parts.proxy.count("books", ReadAt("Session", session_ts=5))
    parts.proxy.count("books", ReadAt("Strong"))
    (_, _, as_of), (_, _, session), (_, _, strong) = parts.qn.reads
    assert as_of == 7 and session == 5 and strong >= 10  # never below the collection's creation
    with pytest.raises(InvalidArgument, match="consistency_level"):
        parts.proxy.count("books", ReadAt("Sometimes"))


def test_search_arguments_are_checked_before_reading(parts: Parts):
    parts.qn.known.add(100)
    parts.qn.tsafe_ts = 10**18
    bad_limits: list[Any] = [0, -1, 16_385, True, 2.5]  # what an untyped caller may send
    for bad in bad_limits:
        with pytest.raises(InvalidArgument, match="limit"):
            parts.proxy.search("books", [[0.0, 0.0, 0.0, 1.0]], limit=bad)
    with pytest.raises(InvalidArgument, match="search data"):
        parts.proxy.search("books", [[0.0, 1.0]])
    assert parts.qn.reads == []


def test_ddl_is_forwarded_to_rootcoord(parts: Parts):
    parts.proxy.create_partition("books", "q")
    parts.proxy.create_index("books", IndexSpec("vector", "HNSW"))
    parts.proxy.drop_collection("books")
    assert [name for name, _ in parts.rc.ddl] == [
        "create_partition",
        "create_index",
        "drop_collection",
    ]
