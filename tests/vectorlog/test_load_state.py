"""Load and release as Milvus 2.3.5 (seen on it: tests/milvus/test_load_state_vs_milvus.py),
through the in-process Client on both log backends: a released collection reports NotLoad
and refuses its reads until a load; released partitions are left out of reads naming none
and refuse reads naming them; writes go on; the state is DDL events on the log, kept
through a restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pymilvus import AnnSearchRequest, RRFRanker

from tests.clients import ClientFactory, ddl_changes
from vectorlog import Client
from vectorlog.core.errors import (
    CollectionNotFound,
    CollectionNotLoaded,
    InvalidArgument,
    LoadRefused,
    PartitionNotFound,
    PartitionNotLoaded,
    PartitionsNotLoaded,
)
from vectorlog.core.model import DataType

Q = [[1.0, 1.0, 0.0, 0.0]]
STRONG: dict[str, Any] = {"consistency_level": "Strong"}


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def make(client: Client, name: str = "c") -> dict[str, int]:
    """Creates `name` with ids 1-3 in _default, 10-12 in p1 and 20-22 in p2; returns the
    partition ids by name."""
    client.create_collection(name, dimension=4, consistency_level="Strong")
    client.create_partition(name, "p1")
    client.create_partition(name, "p2")
    client.insert(name, [{"id": i, "vector": [i, 1, 0, 0]} for i in (1, 2, 3)])
    for part, base in (("p1", 10), ("p2", 20)):
        rows = [{"id": base + i, "vector": [base + i, 1, 0, 0]} for i in range(3)]
        client.insert(name, rows, partition_name=part)
    return client.collection_info(name).partitions


def found(client: Client, name: str = "c", **kwargs: Any) -> list[int]:
    """Returns the sorted ids a Strong search of `name` finds."""
    return sorted(h["id"] for h in client.search(name, Q, limit=50, **STRONG, **kwargs)[0])


def reads(client: Client, name: str) -> dict[str, Callable[[], Any]]:
    """Every kind of read of `name`, by label."""
    req = AnnSearchRequest(Q, "vector", {}, limit=5)
    return {
        "search": lambda: client.search(name, Q, limit=5, **STRONG),
        "search_filtered": lambda: client.search(name, Q, limit=5, filter="id > 1", **STRONG),
        "hybrid": lambda: client.hybrid_search(name, [req, req], RRFRanker(), **STRONG),
        "query": lambda: client.query(name, filter="id > 0", **STRONG),
        "count": lambda: client.query(name, output_fields=["count(*)"], **STRONG),
        "get": lambda: client.get(name, ids=[1, 11]),
    }


def test_a_released_collection_refuses_every_read_until_loaded(client: Client):
    make(client)
    assert client.get_load_state("c") == {"state": "Loaded"}
    cid = client.describe_collection("c")["collection_id"]
    client.release_collection("c")
    assert client.get_load_state("c") == {"state": "NotLoad"}
    assert client.get_load_state("c", partition_name="p1") == {"state": "NotLoad"}
    for label, read in reads(client, "c").items():
        with pytest.raises(CollectionNotLoaded) as exc:
            read()
        op = "search" if label.startswith(("search", "hybrid")) else "query"
        assert str(exc.value) == f"failed to {op}: collection not loaded[collection={cid}]"
    with pytest.raises(CollectionNotLoaded, match=rf"^collection not loaded\[collection={cid}\]"):
        client.get_loading_progress("c")
    # statistics are served released, as Milvus's (its data coordinator's)
    assert client.get_collection_stats("c") == {"row_count": 9}
    assert client.get_partition_stats("c", "p1") == {"row_count": 3}
    # bad arguments are still named first, as Milvus's proxy checks them before the load
    with pytest.raises(InvalidArgument, match="topk"):
        client.search("c", Q, limit=0)
    # writes go on while released
    assert client.insert("c", [{"id": 5, "vector": [5, 1, 0, 0]}])["insert_count"] == 1
    assert client.upsert("c", [{"id": 6, "vector": [6, 1, 0, 0]}])["upsert_count"] == 1
    assert client.delete("c", ids=[2])["delete_count"] == 1
    client.flush("c")
    client.load_collection("c")
    assert client.get_load_state("c") == {"state": "Loaded"}
    assert client.get_loading_progress("c") == 100
    assert found(client) == [1, 3, 5, 6, 10, 11, 12, 20, 21, 22]
    assert client.query("c", output_fields=["count(*)"], **STRONG) == [{"count(*)": 10}]


def test_released_partitions_are_left_out_and_refused_when_named(client: Client):
    parts = make(client)
    client.release_partitions("c", ["p1"])
    assert client.get_load_state("c") == {"state": "Loaded"}
    assert client.get_load_state("c", partition_name="p1") == {"state": "NotLoad"}
    assert client.get_load_state("c", partition_name="p2") == {"state": "Loaded"}
    for _ in range(3):  # again: the one-call common search path reads the loaded ones too
        assert found(client) == [1, 2, 3, 20, 21, 22]
    assert client.query("c", output_fields=["count(*)"], **STRONG) == [{"count(*)": 6}]
    assert [r["id"] for r in client.get("c", ids=[21, 11, 1])] == [21, 1]
    vchannel = client.collection_info("c").vchannels[0]
    with pytest.raises(PartitionsNotLoaded) as exc:
        found(client, partition_names=["p2", "p1"])
    assert str(exc.value) == (
        f"failed to search/query delegator 1 for channel {vchannel}: fail to Search, "
        f"QueryNode ID=1, reason=partition not loaded[partition=[{parts['p2']} {parts['p1']}]]"
    )
    with pytest.raises(PartitionsNotLoaded, match=r"fail to Query, QueryNode ID = 1, reason="):
        client.query("c", filter="id > 0", partition_names=["p1"], **STRONG)
    with pytest.raises(
        PartitionNotLoaded, match=rf"^partition not loaded\[partition={parts['p1']}\]$"
    ):
        client.get_loading_progress("c", ["p1"])
    # loaded as a collection: a new partition is loaded
    client.create_partition("c", "p3")
    assert client.get_load_state("c", partition_name="p3") == {"state": "Loaded"}
    # releasing every loaded partition releases the collection; a new one is then not loaded
    client.release_partitions("c", ["_default", "p2", "p3"])
    assert client.get_load_state("c") == {"state": "NotLoad"}
    with pytest.raises(CollectionNotLoaded):
        found(client)
    client.create_partition("c", "p4")
    assert client.get_load_state("c", partition_name="p4") == {"state": "NotLoad"}


def test_loading_partitions_of_a_released_collection_serves_only_those(client: Client):
    make(client)
    client.release_collection("c")
    client.load_partitions("c", ["p1"])
    assert client.get_load_state("c") == {"state": "Loaded"}
    assert client.get_load_state("c", partition_name="_default") == {"state": "NotLoad"}
    assert found(client) == [10, 11, 12]
    assert found(client, partition_names=["p1"]) == [10, 11, 12]
    with pytest.raises(PartitionsNotLoaded):
        found(client, partition_names=["p1", "p2"])
    client.create_partition("c", "p3")  # loaded by partitions: a new one is not loaded
    assert client.get_load_state("c", partition_name="p3") == {"state": "NotLoad"}
    client.load_partitions("c", "p2")
    assert found(client) == [10, 11, 12, 20, 21, 22]
    client.load_collection("c")
    assert found(client) == [1, 2, 3, 10, 11, 12, 20, 21, 22]
    assert client.get_load_state("c", partition_name="p3") == {"state": "Loaded"}


def test_load_and_release_are_events_appended_only_for_a_change(client: Client):
    make(client)
    before = len(ddl_changes(client))
    client.load_collection("c")  # loaded from its creation on: nothing to record
    client.load_partitions("c", ["p1"])
    assert len(ddl_changes(client)) == before
    client.release_partitions("c", ["p1"])
    client.release_collection("c")
    client.release_collection("c")
    client.load_partitions("c", ["p2"])
    events = [(e.type, e.body["partition_names"]) for e in ddl_changes(client)[before:]]
    assert events == [
        ("CollectionReleased", ["p1"]),
        ("CollectionReleased", []),
        ("CollectionLoaded", ["p2"]),
    ]


def test_bad_loads_and_releases_are_refused_in_milvus_words(client: Client):
    make(client)
    client.create_collection("k", schema=_partition_key_schema(client))
    before = len(ddl_changes(client))
    with pytest.raises(CollectionNotFound, match=r"collection not found\[database=.*nope\]"):
        client.release_collection("nope")
    with pytest.raises(PartitionNotFound, match=r"^partition not found\[partition=nope\]$"):
        client.release_partitions("c", ["p1", "nope"])
    with pytest.raises(PartitionNotFound, match=r"^partition not found\[partition=nope\]$"):
        client.load_partitions("c", ["nope"])
    with pytest.raises(PartitionNotFound):
        client.get_load_state("c", partition_name="nope")
    with pytest.raises(LoadRefused, match="^failed to load partition, due to no partition"):
        client.load_partitions("c", [])
    with pytest.raises(InvalidArgument, match=r"expected=any parttiion\]\[actual=empty"):
        client.release_partitions("c", [])
    with pytest.raises(LoadRefused, match="disable release partitions if partition key mode"):
        client.release_partitions("k", ["_default_0"])
    assert len(ddl_changes(client)) == before
    assert client.get_load_state("c") == {"state": "Loaded"}


def _partition_key_schema(client: Client) -> Any:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("tag", DataType.INT64, is_partition_key=True)
    return schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)


def test_an_alias_and_a_rename_keep_the_load_state(client: Client):
    make(client)
    client.create_alias("c", "al")
    client.release_collection("al")
    assert client.get_load_state("c") == {"state": "NotLoad"}
    client.rename_collection("c", "d")
    assert client.get_load_state("d") == {"state": "NotLoad"}
    with pytest.raises(CollectionNotLoaded):
        found(client, "al")
    client.load_collection("al")
    assert found(client, "d") == [1, 2, 3, 10, 11, 12, 20, 21, 22]


@pytest.mark.fresh_cluster
def test_the_load_state_survives_a_restart(open_client: ClientFactory):
    client = open_client()
    make(client)
    make(client, "e")
    client.release_collection("c")
    client.release_partitions("e", ["p2"])
    client.close()
    again = open_client()
    assert again.get_load_state("c") == {"state": "NotLoad"}
    with pytest.raises(CollectionNotLoaded):
        found(again)
    assert again.get_load_state("e", partition_name="p2") == {"state": "NotLoad"}
    assert found(again, "e") == [1, 2, 3, 10, 11, 12]
    again.load_collection("c")
    assert found(again) == [1, 2, 3, 10, 11, 12, 20, 21, 22]


def test_a_time_travel_read_of_a_released_collection_is_refused(client: Client):
    make(client)
    ts = client.insert("c", [{"id": 7, "vector": [7, 1, 0, 0]}])["timestamp"]
    assert found(client, as_of=ts) == [1, 2, 3, 7, 10, 11, 12, 20, 21, 22]
    client.release_partitions("c", ["p2"])
    assert found(client, as_of=ts) == [1, 2, 3, 7, 10, 11, 12]  # the load state is now's
    client.release_collection("c")
    with pytest.raises(CollectionNotLoaded):
        found(client, as_of=ts)
    with pytest.raises(CollectionNotLoaded):
        client.query("c", filter="id > 0", as_of=ts)
