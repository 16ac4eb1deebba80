"""The rootcoord meta table (processors/rootcoord/meta.py) through its public methods: DDL
events applied with the consumed position in one write, the rules they are checked against,
reads as of a timestamp, histories, and a reopen from the same store."""

from __future__ import annotations

from typing import Any

import pytest

from vectorlog.core.errors import (
    AliasNotFound,
    CollectionExists,
    CollectionNotFound,
    InvalidArgument,
    PartitionNotFound,
)
from vectorlog.core.model import quick_schema
from vectorlog.processors.rootcoord.meta import MetaTable
from vectorlog.processors.rootcoord.snapshotkv import SnapshotKV
from vectorlog.schemas.serde import Event
from vectorlog.state.memory import MemoryDisk, MemoryStateStore

DDL = "c.ddl"


class Meta:
    """A meta table on an in-memory store; `apply` commits each event with a ddl position."""

    def __init__(self, disk: MemoryDisk | None = None) -> None:
        self.disk = disk or MemoryDisk()
        self.store = MemoryStateStore(self.disk)
        self.table = MetaTable(SnapshotKV(self.store, clock=lambda: 1 << 40))
        self.offset = self.store.position(DDL, 0) or 0

    def apply(self, kind: str, body: dict[str, Any], ts: int) -> bool:
        txn = self.store.transaction()
        txn.set_position(DDL, 0, self.offset + 1)
        changed = self.table.apply(Event(kind, ts, body, body.get("collection_id", 0)), txn)
        self.offset += 1
        return changed


def created(cid: int, name: str) -> dict[str, Any]:
    return {
        "collection_id": cid,
        "collection_name": name,
        "schema": quick_schema(4, "L2").validated().to_avro(),
        "shards_num": 1,
        "vchannels": [f"c-dml_0_{cid}v0"],
        "pchannels": [0],
        "partitions": [{"partition_id": cid + 1, "partition_name": "_default"}],
        "properties": {},
    }


@pytest.fixture()
def meta() -> Meta:
    m = Meta()
    m.apply("CollectionCreated", created(100, "books"), ts=10)
    return m


def test_a_created_collection_is_readable_and_its_position_committed_with_it(meta):
    info = meta.table.get("books")
    assert (info.collection_id, info.name, info.created_ts) == (100, "books", 10)
    assert info.partitions == {"_default": 101}
    assert meta.table.names() == ["books"] and meta.table.has("books")
    assert meta.store.position(DDL, 0) == 1


def test_reads_as_of_a_timestamp_see_the_meta_of_that_time(meta):
    meta.apply(
        "PartitionCreated", {"collection_id": 100, "partition_name": "p", "partition_id": 7}, 20
    )
    meta.apply(
        "CollectionRenamed", {"collection_id": 100, "old_name": "books", "new_name": "novels"}, 30
    )
    assert meta.table.names(ts=15) == ["books"] and meta.table.names() == ["novels"]
    assert meta.table.get("books", ts=15).partitions == {"_default": 101}
    assert meta.table.get("novels").partitions == {"_default": 101, "p": 7}
    with pytest.raises(CollectionNotFound):
        meta.table.get("books")
    with pytest.raises(CollectionNotFound):
        meta.table.get("books", ts=5)  # before it was created


def test_a_ddl_that_breaks_a_rule_is_refused_and_changes_nothing(meta):
    with pytest.raises(CollectionExists):
        meta.table.check(Event("CollectionCreated", 20, created(200, "books")))
    with pytest.raises(CollectionExists):
        meta.apply("CollectionCreated", created(200, "books"), 20)
    assert meta.store.position(DDL, 0) == 1  # the refused event's position is not committed
    with pytest.raises(InvalidArgument, match="default partition cannot be deleted"):
        body = {"collection_id": 100, "partition_name": "_default", "partition_id": 101}
        meta.table.check(Event("PartitionDropped", 20, body))
    with pytest.raises(PartitionNotFound):
        body = {"collection_id": 100, "partition_name": "p", "partition_id": 9}
        meta.table.check(Event("PartitionDropped", 20, body))
    assert meta.table.names() == ["books"]


def test_aliases_resolve_and_block_a_drop_until_dropped(meta):
    meta.apply("AliasCreated", {"collection_id": 100, "alias": "b"}, 20)
    assert meta.table.resolve("b") == 100 and meta.table.aliases() == {"b": 100}
    assert not meta.table.has("b")  # an alias is not a collection
    drop = {"collection_id": 100, "collection_name": "books"}
    with pytest.raises(InvalidArgument, match="has aliases"):
        meta.apply("CollectionDropped", drop, 30)
    with pytest.raises(AliasNotFound):
        meta.apply("AliasDropped", {"collection_id": 100, "alias": "nope"}, 30)
    meta.apply("AliasDropped", {"collection_id": 100, "alias": "b"}, 30)
    meta.apply("CollectionDropped", drop, 40)
    assert meta.table.names() == [] and meta.table.by_id(100) is None
    assert meta.table.resolve("b", ts=25) == 100  # time travel still finds it


def test_histories_record_creation_partition_drops_and_the_drop(meta):
    meta.apply(
        "PartitionCreated", {"collection_id": 100, "partition_name": "p", "partition_id": 7}, 20
    )
    meta.apply(
        "PartitionDropped", {"collection_id": 100, "partition_name": "p", "partition_id": 7}, 30
    )
    meta.apply("CollectionDropped", {"collection_id": 100, "collection_name": "books"}, 40)
    (h,) = meta.table.histories()
    assert (h.collection_id, h.dropped_ts, h.partition_drops) == (100, 40, {7: 30})


def test_an_event_that_changes_no_meta_commits_only_its_position(meta):
    assert meta.apply("TimeTick", {"source": "x"}, 50) is False
    assert meta.store.position(DDL, 0) == 2 and meta.table.names() == ["books"]


def test_a_reopened_table_holds_what_was_committed(meta):
    meta.apply("IndexCreated", index_body(), 20)
    again = Meta(meta.disk)
    assert again.offset == 2
    assert again.table.get("books").indexes["ix"]["index_type"] == "HNSW"
    assert again.table.get("books", ts=15).indexes == {}


def index_body() -> dict[str, Any]:
    return {
        "collection_id": 100,
        "index_id": 5,
        "index_name": "ix",
        "field_id": 101,
        "field_name": "vector",
        "index_type": "HNSW",
        "metric_type": "L2",
        "params": {},
    }
