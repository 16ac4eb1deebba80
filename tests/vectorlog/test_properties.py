"""Collection properties (issue 26): alter_collection_properties / drop_collection_properties
as CollectionPropertiesAltered DDL events with meta history, and `collection.ttl.seconds`:
expired rows stop being returned by search, query, get and count, and compaction removes
them. On both log backends."""

from __future__ import annotations

import time

import pytest

from tests.clients import ClientFactory, ddl_changes
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound, InvalidArgument
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


TTL = "collection.ttl.seconds"


def refused(client: Client, exc: type[Exception], match: str, fn, *args) -> None:
    """Asserts fn(*args) raises `exc` matching `match` and appends no DDL event."""
    before = len(ddl_changes(client))
    with pytest.raises(exc, match=match):
        fn(*args)
    assert len(ddl_changes(client)) == before


def rows(keys: range) -> list[dict]:
    return [{"id": k, "vector": [float(k), 1.0]} for k in keys]


def seen(client: Client) -> dict[str, object]:
    """What every read returns of collection "c": keys queried, searched, got, and the count."""
    (hits,) = client.search("c", [[0.0, 1.0]], limit=100)
    return {
        "query": sorted(r["id"] for r in client.query("c", "id >= 0")),
        "search": sorted(h["id"] for h in hits),
        "get": sorted(r["id"] for r in client.get("c", list(range(100)))),
        "count": client.query("c", "", output_fields=["count(*)"])[0]["count(*)"],
    }


def keys_only(keys: list[int]) -> dict[str, object]:
    return {"query": keys, "search": keys, "get": keys, "count": len(keys)}


def test_properties_are_set_removed_and_described_as_of_any_time(open_client: ClientFactory):
    client = open_client()
    client.create_collection("c", dimension=2)
    before = probes.now(client)
    client.alter_collection_properties("c", {TTL: 3600, "mmap.enabled": True, "k": "v"})
    altered = probes.now(client)
    client.drop_collection_properties("c", ["k", "not_there"])
    props = {TTL: "3600", "mmap.enabled": "True"}
    assert client.describe_collection("c")["properties"] == props
    assert client.describe_collection("c", as_of=before)["properties"] == {}
    assert client.describe_collection("c", as_of=altered)["properties"] == {**props, "k": "v"}
    assert [e.type for e in ddl_changes(client)][-2:] == ["CollectionPropertiesAltered"] * 2
    client.close()
    reopened = open_client()  # rootcoord's meta from its store; the history with it
    assert reopened.describe_collection("c")["properties"] == props
    assert reopened.describe_collection("c", as_of=altered)["properties"]["k"] == "v"


def test_bad_properties_are_refused_with_milvus_messages_and_nothing_written(client: Client):
    client.create_collection("c", dimension=2)
    bad = [
        ({TTL: "abc"}, "collection TTL is not a valid positive integer"),
        ({TTL: -2}, r"collection TTL is out of range, expect \[-1, 3155760000\], got -2"),
        ({TTL: 3155760001}, "out of range"),
        ({"mmap.enabled": "maybe"}, "invalid mmap.enabled value: maybe"),
        ({}, "no properties or delete keys provided"),
    ]
    for props, message in bad:
        refused(client, InvalidArgument, message, client.alter_collection_properties, "c", props)
    refused(client, InvalidArgument, "no properties", client.drop_collection_properties, "c", [])
    refused(client, InvalidArgument, "property_keys", client.drop_collection_properties, "c", "k")
    refused(client, CollectionNotFound, "nope", client.alter_collection_properties, "nope", {})
    with pytest.raises(InvalidArgument, match="collection TTL"):
        client.create_collection("d", dimension=2, properties={TTL: "1.5"})
    assert not client.has_collection("d")
    assert client.describe_collection("c")["properties"] == {}


def test_expired_rows_are_hidden_from_every_read_but_not_from_earlier_ones(client: Client):
    client.create_collection("c", dimension=2, consistency_level="Strong")
    client.alter_collection_properties("c", {TTL: 1})
    client.insert("c", rows(range(10)))
    inserted = probes.now(client)
    assert seen(client) == keys_only(list(range(10)))
    wait_until(lambda: seen(client)["count"] == 0, 20.0, "the rows to expire")
    client.insert("c", rows(range(10, 13)))
    assert seen(client) == keys_only([10, 11, 12])
    assert len(client.query("c", "id >= 0", as_of=inserted)) == 10  # not expired back then
    client.drop_collection_properties("c", [TTL])  # as Milvus: not compacted yet, back again
    assert seen(client)["count"] == 13


def test_compaction_removes_expired_rows_and_a_restart_keeps_them_gone(
    open_client: ClientFactory,
):
    settings = {"compaction_interval_s": None, "log_retention_ms": 0}  # the horizon is now
    client = open_client(**settings)
    client.create_collection("c", dimension=2, consistency_level="Strong")
    client.insert("c", rows(range(20)))
    client.flush("c")
    client.alter_collection_properties("c", {TTL: 3})
    wait_until(lambda: seen(client)["count"] == 0, 30.0, "the rows to expire")
    written = time.time()
    client.insert("c", rows(range(20, 25)))
    client.flush("c")
    job = client.get_compaction_plans(client.compact("c", wait=True))
    # the new rows expire too if flush and compaction took the TTL (a loaded machine)
    young = time.time() - written < 3
    assert job["state"] == "Completed" and job["dropped_rows"] in ((20,) if young else (20, 25))
    kept = list(range(20, 25)) if job["dropped_rows"] == 20 else []
    wait_until(
        lambda: sum(s["num_rows"] for s in client.list_segments("c")) == len(kept),
        20.0,
        "the merge",
    )
    client.drop_collection_properties("c", [TTL])  # removed rows do not come back
    assert seen(client) == keys_only(kept)
    client.close()
    reopened = open_client(**settings)
    assert seen(reopened) == keys_only(kept)
