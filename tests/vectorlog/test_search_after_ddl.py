"""The same search call, repeated across DDL, through `vectorlog.Client` on both log backends
(issue 28: the proxy keeps the checked arguments of a search per collection version): each
DDL changes what the identical call returns or refuses, as a first call after it would."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.types import Hit

DIM = 4
Q = [[1.0, 0.0, 0.0, 0.0]]
PARAMS: dict[str, Any] = {"metric_type": "L2", "params": {}}


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def collection(client: Client, name: str, first_id: int) -> None:
    """Creates `name` (L2, no index) with partition "p" holding rows first_id..first_id+4."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection(name, schema=s, metric_type="L2")
    client.create_partition(name, "p")
    rows = [
        {"id": first_id + i, "vector": (np.eye(DIM)[i % DIM] * (1 + i)).tolist()} for i in range(5)
    ]
    client.insert(name, rows, partition_name="p")


def search(client: Client, name: str, **kwargs: Any) -> list[Hit]:
    """Returns the hits of the test's one search (Strong), with `kwargs` over its arguments."""
    args: dict[str, Any] = {"limit": 3, "search_params": PARAMS, "consistency_level": "Strong"}
    return client.search(name, Q, **(args | kwargs))[0]


def test_a_dropped_partition_is_refused_by_the_same_search(client: Client):
    collection(client, "c", 0)
    assert [h["id"] for h in search(client, "c", partition_names=["p"])] == [0, 1, 2]
    client.release_collection("c")
    client.drop_partition("c", "p")
    client.load_collection("c")
    with pytest.raises(InvalidArgument, match="partition name p not found"):
        search(client, "c", partition_names=["p"])


def test_an_added_field_becomes_an_output_field_of_the_same_search(client: Client):
    collection(client, "c", 0)
    with pytest.raises(InvalidArgument, match="note"):
        search(client, "c", output_fields=["note"])
    client.add_collection_field("c", "note", DataType.VARCHAR, max_length=8, nullable=True)
    hits = search(client, "c", output_fields=["note"])
    assert [(h["id"], h["entity"]) for h in hits] == [(i, {"note": None}) for i in (0, 1, 2)]


def test_the_same_search_of_an_alias_follows_it_to_its_new_collection(client: Client):
    collection(client, "a", 0)
    collection(client, "b", 100)
    client.create_alias("a", "latest")
    assert [h["id"] for h in search(client, "latest")] == [0, 1, 2]
    client.alter_alias("b", "latest")
    assert [h["id"] for h in search(client, "latest")] == [100, 101, 102]


def test_the_same_search_takes_a_new_index_metric(client: Client):
    collection(client, "c", 0)
    ip: dict[str, Any] = {"metric_type": "IP", "params": {}}
    with pytest.raises(InvalidArgument):
        search(client, "c", search_params=ip)
    client.release_collection("c")
    client.drop_index("c", "vector")
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="IP")
    client.create_index("c", params)
    client.load_collection("c")
    hits = search(client, "c", search_params=ip, limit=2)
    assert [h["id"] for h in hits] == [4, 0]
