"""Time travel across drops (issue 7, item 14): data reads as of T inside the retention window
answer as the cluster did at T, also after the collection or partition was dropped (or the
name re-created); reads as of the drop or later find no collection. Past the meta retention
window the dropped collection's replica is freed."""

from __future__ import annotations

import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


Q = [[1.0, 0.0]]


def fill(client: Client, name: str, ids: list[int], partition: str | None = None) -> int:
    """Inserts rows with these keys; returns the insert's ts."""
    rows = [{"id": i, "vector": [1.0, float(i)]} for i in ids]
    return int(client.insert(name, rows, partition)["timestamp"])


def caught_up(client: Client) -> None:
    """Returns once the query node applied everything stamped so far (the drops included)."""
    probes.caught_up(client)


def count(client: Client, name: str, ts: int) -> int:
    """The rows a count as of `ts` counts."""
    return int(client.query(name, "", output_fields=["count(*)"], as_of=ts)[0]["count(*)"])


def read_ids(client: Client, name: str, ts: int, partitions: list[str] | None = None) -> set[int]:
    """The keys a search as of `ts` finds."""
    (hits,) = client.search(name, Q, limit=100, partition_names=partitions, as_of=ts)
    return {h["id"] for h in hits}


def test_reads_as_of_before_a_drop_answer_as_the_collection_was(client: Client):
    client.create_collection("c", dimension=2, num_shards=2)
    t1 = fill(client, "c", [1, 2, 3])
    client.delete("c", [2])
    t2 = fill(client, "c", [4])
    client.drop_collection("c")
    caught_up(client)
    assert client.describe_collection("c", as_of=t2)["collection_name"] == "c"
    assert read_ids(client, "c", t1) == {1, 2, 3}
    assert read_ids(client, "c", t2) == {1, 3, 4}
    assert [r["id"] for r in client.get("c", [2, 3], output_fields=["id"], as_of=t1)] == [2, 3]
    assert count(client, "c", t2) == 3
    with pytest.raises(CollectionNotFound, match="collection=c\\]"):
        client.search("c", Q)
    with pytest.raises(CollectionNotFound, match="collection=c\\]"):
        client.get("c", [1], as_of=probes.now(client))


def test_a_name_recreated_after_a_drop_reads_the_old_collection_before_the_drop(client: Client):
    client.create_collection("c", dimension=2)
    old = fill(client, "c", [1, 2])
    client.drop_collection("c")
    client.create_collection("c", dimension=2)
    new = fill(client, "c", [7])
    caught_up(client)
    assert read_ids(client, "c", old) == {1, 2}
    assert read_ids(client, "c", new) == {7}
    assert {r["id"] for r in client.get("c", [1, 7], output_fields=["id"], as_of=old)} == {1}
    assert client.get_collection_stats("c") == {"row_count": 1}


def test_reads_as_of_before_a_partition_drop_see_its_rows(client: Client):
    client.create_collection("c", dimension=2, num_shards=2)
    client.create_partition("c", "p")
    fill(client, "c", [1])
    before = fill(client, "c", [2, 3], "p")
    client.drop_partition("c", "p")
    after = fill(client, "c", [4])
    caught_up(client)
    assert read_ids(client, "c", before) == {1, 2, 3}
    assert read_ids(client, "c", before, ["p"]) == {2, 3}
    assert read_ids(client, "c", after) == {1, 4}
    assert count(client, "c", before) == 3


def test_a_dropped_collection_is_freed_once_the_retention_window_passed(
    open_client: ClientFactory,
):
    client = open_client(meta_retention_ms=300)
    client.create_collection("c", dimension=2)
    t = fill(client, "c", [1, 2])
    cid = client.describe_collection("c")["collection_id"]
    client.drop_collection("c")
    caught_up(client)
    assert read_ids(client, "c", t) == {1, 2}  # inside the window: kept
    client.create_collection("other", dimension=2)

    def freed() -> bool:
        fill(client, "other", [1])  # moves the query node's applied time on
        client.search("other", Q)
        return not probes.holds_collection(client, cid)

    wait_until(freed, 20.0, "the dropped replica to be freed once ticks pass the window")
    with pytest.raises(CollectionNotFound):
        count(client, "c", t)
