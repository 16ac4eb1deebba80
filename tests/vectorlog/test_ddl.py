"""The complete DDL through the log (seed 001 s.3, s.10.4), on both log backends."""

from __future__ import annotations

import pytest

from tests.clients import ddl_changes
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.errors import (
    AliasCollectionConflict,
    AliasExists,
    AliasNotFound,
    CollectionExists,
    CollectionNotFound,
    IndexExists,
    InvalidArgument,
    InvalidName,
    LimitExceeded,
    PartitionNotFound,
)
from vectorlog.processors.rootcoord.meta import MAX_PARTITIONS
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def refused(client: Client, exc: type[Exception], match: str, fn, *args) -> None:
    """Asserts fn(*args) raises `exc` matching `match` and appends no DDL event."""
    before = len(ddl_changes(client))
    with pytest.raises(exc, match=match):
        fn(*args)
    assert len(ddl_changes(client)) == before


def vec(x: float) -> list[float]:
    return [x, 1.0]


def test_partitions_hold_rows_and_dropping_one_hides_them(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    client.create_partition("c", "p1")
    assert client.has_partition("c", "p1") and client.list_partitions("c") == ["_default", "p1"]
    client.insert("c", [{"id": 1, "vector": vec(0)}])
    client.insert("c", [{"id": 2, "vector": vec(0.1)}], partition_name="p1")
    (only_p1,) = client.search("c", [vec(0)], partition_names=["p1"])
    assert [h["id"] for h in only_p1] == [2]
    client.delete("c", ids=[1], partition_name="p1")  # key 1 is not in p1: nothing happens
    assert client.get_collection_stats("c")["row_count"] == 2
    client.drop_partition("c", "p1")
    assert [h["id"] for h in client.search("c", [vec(0)])[0]] == [1]
    assert not client.has_partition("c", "p1")
    refused(
        client,
        InvalidArgument,
        "default partition cannot be deleted",
        client.drop_partition,
        "c",
        "_default",
    )
    refused(
        client,
        PartitionNotFound,
        r"partition not found\[partition=p1\]",
        client.drop_partition,
        "c",
        "p1",
    )
    client.create_partition("c", "p2")
    client.create_partition("c", "p2")  # an existing partition again: a no-op, as Milvus
    assert client.list_partitions("c").count("p2") == 1
    refused(client, InvalidName, "Invalid partition name", client.create_partition, "c", "p 3")
    client.create_partition("c", "3-p")  # Milvus's partition tags: digits first, `-` inside
    assert "3-p" in client.list_partitions("c")


@pytest.mark.parametrize(  # 1,023 DDL round trips: 38 s on Kafka, so there in make test-all
    "backend",
    [pytest.param("embedded"), pytest.param("kafka", marks=[pytest.mark.kafka, pytest.mark.slow])],
    indirect=True,
)
def test_a_collection_holds_at_most_1024_partitions(client: Client):
    client.create_collection("c", dimension=2)
    for i in range(MAX_PARTITIONS - 1):
        client.create_partition("c", f"p{i}")
    assert len(client.list_partitions("c")) == MAX_PARTITIONS
    refused(client, LimitExceeded, "1024 partitions", client.create_partition, "c", "one_more")


def test_aliases_resolve_for_reads_and_writes(client: Client):
    client.create_collection("books_v1", dimension=2, metric_type="L2")
    client.create_collection("books_v2", dimension=2, metric_type="L2")
    client.create_alias("books_v1", "books")
    client.insert("books", [{"id": 1, "vector": vec(0)}])
    assert client.describe_collection("books_v1")["aliases"] == ["books"]
    assert client.describe_collection("books")["collection_name"] == "books_v1"
    assert client.describe_alias("books") == {"alias": "books", "collection_name": "books_v1"}
    client.insert("books_v2", [{"id": 2, "vector": vec(0)}])
    client.alter_alias("books_v2", "books")
    assert [h["id"] for h in client.search("books", [vec(0)])[0]] == [2]
    assert client.list_aliases("books_v2")["aliases"] == ["books"]
    assert client.list_aliases("books_v1")["aliases"] == []
    assert client.list_aliases()["aliases"] == ["books"]
    client.drop_alias("books")
    with pytest.raises(CollectionNotFound):
        client.search("books", [vec(0)])


def test_alias_rules(client: Client):
    """Messages name the database and the alias apart, as Milvus's do (in `default` on a
    fresh cluster, in the test's own database on a shared one)."""
    db = client.db
    client.create_collection("a", dimension=2)
    client.create_collection("b", dimension=2)
    client.create_alias("a", "x")
    conflict = f"alias and collection name conflict\\[database={db}\\]\\[alias=b\\]$"
    refused(client, AliasCollectionConflict, conflict, client.create_alias, "a", "b")
    taken = f"alias already exist\\[database={db}\\]\\[alias=x\\]: it names collection 'a'"
    refused(client, AliasExists, taken, client.create_alias, "b", "x")
    refused(
        client, CollectionExists, "'x' already exists as a alias", client.create_collection, "x", 2
    )
    refused(
        client,
        InvalidArgument,
        "has aliases \\['x'\\]; drop them first",
        client.drop_collection,
        "a",
    )
    refused(client, InvalidArgument, "'x' is an alias", client.drop_collection, "x")
    refused(
        client,
        AliasNotFound,
        rf"alias not found\[database={db}\]\[alias=nope\]",
        client.drop_alias,
        "nope",
    )
    refused(client, AliasNotFound, r"\[alias=nope\]", client.alter_alias, "b", "nope")
    refused(client, InvalidArgument, "already names collection 'a'", client.alter_alias, "a", "x")
    refused(client, CollectionNotFound, "collection=zzz", client.create_alias, "zzz", "y")


def test_rename_keeps_id_data_and_aliases(client: Client):
    client.create_collection("old", dimension=2, metric_type="L2")
    client.create_alias("old", "al")
    cid = client.describe_collection("old")["collection_id"]
    client.insert("old", [{"id": 7, "vector": vec(0)}])
    client.rename_collection("old", "new")
    assert client.list_collections() == ["new"] and not client.has_collection("old")
    assert client.describe_collection("new")["collection_id"] == cid
    assert client.describe_collection("al")["collection_name"] == "new"
    assert client.get("new", [7], output_fields=["id"]) == [{"id": 7}]
    client.create_collection("other", dimension=2)
    refused(
        client, CollectionExists, "'other' already exists", client.rename_collection, "new", "other"
    )
    refused(client, CollectionNotFound, "collection=old", client.rename_collection, "old", "x")


def test_index_descriptions(client: Client):
    schema = client.create_schema()
    schema.add_field("id", client_datatype("INT64"), is_primary=True)
    schema.add_field("vector", client_datatype("FLOAT_VECTOR"), dim=8)
    schema.add_field("year", client_datatype("INT64"))
    client.create_collection("c", schema=schema, metric_type="IP")
    params = client.prepare_index_params()
    params.add_index("vector", "HNSW", "vec_idx", "IP", {"M": 16, "efConstruction": 200})
    params.add_index("year", "STL_SORT")
    client.create_index("c", params)
    assert client.list_indexes("c") == ["vec_idx", "year"]
    d = client.describe_index("c", "vec_idx")
    assert (d["field_name"], d["index_type"], d["metric_type"], d["params"]) == (
        "vector",
        "HNSW",
        "IP",
        {"M": 16, "efConstruction": 200},
    )
    again = client.prepare_index_params().add_index("vector", "FLAT", "other")
    refused(
        client,
        IndexExists,
        "already has an index on field 'vector'",
        client.create_index,
        "c",
        again,
    )
    bad = client.prepare_index_params().add_index("vector", "HNSW", "i2", "HAMMING")
    refused(client, InvalidArgument, "metric_type 'HAMMING' is not", client.create_index, "c", bad)
    bad = client.prepare_index_params().add_index("year", "HNSW", "i3")
    refused(
        client,
        InvalidArgument,
        "'HNSW' cannot index INT64 field 'year'",
        client.create_index,
        "c",
        bad,
    )
    bad = client.prepare_index_params().add_index("vector", "IVF_FLAT", "i4", params={"M": 3})
    refused(client, InvalidArgument, "IVF_FLAT has no parameter 'M'", client.create_index, "c", bad)
    client.drop_index("c", "vec_idx")
    assert client.list_indexes("c") == ["year"]
    before = len(ddl_changes(client))
    client.drop_index("c", "vec_idx")  # as Milvus: dropping a missing index is a no-op
    assert len(ddl_changes(client)) == before


def client_datatype(name: str):
    from vectorlog import DataType

    return DataType[name]


def test_describe_and_list_as_of_past_timestamps(client: Client):
    t0 = probes.now(client)
    client.create_collection("c", dimension=2)
    first = client.describe_collection("c")
    t1 = probes.now(client)
    client.create_partition("c", "p")
    client.create_alias("c", "al")
    t2 = probes.now(client)
    client.drop_alias("al")
    client.drop_collection("c")
    t3 = probes.now(client)
    client.create_collection("c", dimension=4)
    second = client.describe_collection("c")
    assert second["collection_id"] != first["collection_id"]
    assert client.list_collections(as_of=t0) == [] and client.list_collections(as_of=t3) == []
    assert client.describe_collection("c", as_of=t1) == first
    at2 = client.describe_collection("c", as_of=t2)
    assert (at2["partitions"], at2["aliases"]) == (["_default", "p"], ["al"])
    assert client.describe_collection("al", as_of=t2)["collection_id"] == first["collection_id"]
    assert client.has_collection("c", as_of=t1) and not client.has_collection("c", as_of=t3)
    with pytest.raises(CollectionNotFound):
        client.describe_collection("c", as_of=t3)
    assert client.describe_collection("c") == second
    assert first["created_timestamp"] > t0


def test_ddl_events_are_on_the_ddl_topic_and_broadcast_into_vchannels(client: Client):
    from tests.clients import log_events

    client.create_collection("c", dimension=2, num_shards=3)
    client.create_partition("c", "p")
    client.create_alias("c", "al")
    kinds = [e.type for e in ddl_changes(client)]
    # quick setup's AUTOINDEX index (as Milvus) is a DDL event on the ddl topic only
    assert kinds == ["CollectionCreated", "IndexCreated", "PartitionCreated", "AliasCreated"]
    vchannels = client.describe_collection("c")["virtual_channel_names"]
    dml = [e for e in log_events(client) if e.type in ("CollectionCreated", "PartitionCreated")]
    assert sorted((e.type, e.vchannel) for e in dml) == sorted(
        [("CollectionCreated", v) for v in vchannels] + [("PartitionCreated", v) for v in vchannels]
    )


def test_history_past_the_retention_window_is_pruned_with_a_clear_error(
    open_client,
):
    from vectorlog import VectorlogError
    from vectorlog.processors.rootcoord.snapshotkv import SnapshotTooOld

    client = open_client(meta_retention_ms=200, meta_gc_interval_s=0.05)
    client.create_collection("c", dimension=2)
    early = probes.now(client)
    client.create_partition("c", "p")

    def too_old() -> bool:
        try:
            client.describe_collection("c", as_of=early)
        except SnapshotTooOld:
            return client.cluster.gc.pruned > 0
        return False

    wait_until(  # the retention window passed `early` and a GC round pruned behind it
        too_old, 10.0, f"meta GC to prune history and move its horizon past ts {early}"
    )
    assert client.cluster.gc.pruned > 0
    with pytest.raises(SnapshotTooOld, match="older than the GC horizon") as err:
        client.describe_collection("c", as_of=early)
    assert isinstance(err.value, VectorlogError)
    assert client.list_partitions("c") == ["_default", "p"]
    recent = probes.now(client)
    assert client.describe_collection("c", as_of=recent)["partitions"] == ["_default", "p"]


# -- malformed ddl records (issue 7, item 6) ---------------------------------------------------
def poison(client: Client) -> dict[str, bytes]:
    """Records no rootcoord writes, each as an external producer could append it to `ddl`."""
    from vectorlog.schemas.serde import Event

    serde, huge = client.cluster.serdes.for_topic(client.cluster.topics.ddl), (1 << 63) - 1
    cid = client.describe_collection("a")["collection_id"]
    drop = {"collection_id": cid, "collection_name": "a"}
    events = {
        "not a DDL event": Event(
            "DataNodeTicked", probes.now(client), {"vchannel": "v", "tick": 5}
        ),
        "ts from the far future": Event("CollectionDropped", huge, drop, cid),
        "ts at or below the last DDL": Event("CollectionDropped", 5, drop, cid),
        "ids reserved up to 2**63": Event("RangeReserved", 0, {"kind": "ids", "upper": huge}),
        "timestamps reserved up to 2**63": Event(
            "RangeReserved", 0, {"kind": "timestamps", "upper": huge}
        ),
        "a reservation of nothing known": Event("RangeReserved", 0, {"kind": "x", "upper": 5}),
    }
    return {"garbage": b"\xc3\x01garbage"} | {k: serde.encode(e) for k, e in events.items()}


def ddl_letters(client: Client) -> list[tuple[int, bytes]]:
    from tests.vectorlog.test_dead_letters import every_letter

    return [(d.offset, d.value) for d in every_letter(client) if d.processor == "rootcoord"]


def test_malformed_ddl_records_last_on_the_log_are_dead_lettered_once_and_reopens_work(
    open_client,
):
    from vectorlog.core.hybridts import physical_ms, wall_ms
    from vectorlog.processors.rootcoord.idalloc import FIRST_ID
    from vectorlog.streams.log.base import Append

    client = open_client()
    client.create_collection("a", dimension=2)
    bad = poison(client)
    ddl = client.cluster.topics.ddl
    offsets = client.cluster.log.append(ddl, [Append(0, v) for v in bad.values()])
    client.close()
    for name in ("b", "c"):  # every reopen replays them (the stored position was before them)
        client = open_client()
        expected = sorted(zip(offsets, bad.values(), strict=True))
        assert sorted(ddl_letters(client)) == expected  # each once, with its position
        assert "a" in client.list_collections()  # none of them was applied
        assert physical_ms(probes.now(client)) < wall_ms() + 60_000
        client.create_collection(name, dimension=2)  # its id: the next one reserved
        assert client.describe_collection(name)["collection_id"] < FIRST_ID + (1 << 40)
        client.close()
    assert open_client().list_collections() == ["a", "b", "c"]


def test_ddl_records_appended_by_another_writer_are_not_skipped_by_the_next_ddl(open_client):
    """The next DDL's position passed a record it never read: a bad one got no dead letter,
    a valid one was never applied (not even after a restart)."""
    from vectorlog.schemas.serde import Event
    from vectorlog.streams.log.base import Append

    client = open_client()
    client.create_collection("a", dimension=2)
    node = client.cluster
    cid = client.describe_collection("a")["collection_id"]
    with probes.stamped(client, "external") as ts:
        renamed = Event("CollectionRenamed", ts, {"collection_id": cid, "old_name": "a"}, cid)
        renamed.body["new_name"] = "a2"
        serde = node.serdes.for_topic(node.topics.ddl)
        garbage, _ = node.log.append(
            node.topics.ddl, [Append(0, b"not an event"), Append(0, serde.encode(renamed))]
        )
    client.create_collection("b", dimension=2)  # reads both first
    assert ddl_letters(client) == [(garbage, b"not an event")]
    assert client.list_collections() == ["a2", "b"]
    client.close()
    again = open_client()
    assert again.list_collections() == ["a2", "b"] and len(ddl_letters(again)) == 1


def test_dropping_a_missing_collection_is_a_no_op_as_milvus(client: Client):
    client.drop_collection("never")  # Milvus 2.4: drops are idempotent
    client.create_collection("c", dimension=2)
    client.drop_collection("c")
    client.drop_collection("c")
    assert client.list_collections() == []
