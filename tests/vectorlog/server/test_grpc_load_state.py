"""Load and release over Milvus's protocols, on both log backends: an unmodified pymilvus
MilvusClient (gRPC) and the REST v2 API see a released collection NotLoad and its reads
refused with Milvus 2.3.5's codes and words (search, query, get, count, hybrid search, both
iterators), writes served, and reads served again after a load; partitions likewise."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pymilvus import AnnSearchRequest, MilvusClient, MilvusException, RRFRanker

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.server.rest_support import Rest, rest_fixture

rest = rest_fixture()
Q = [[1.0, 1.0, 0.0, 0.0]]
STRONG: dict[str, Any] = {"consistency_level": "Strong"}


def unique() -> str:
    return f"c_{uuid.uuid4().hex[:10]}"


def make(m: MilvusClient) -> str:
    """Creates a collection with ids 1-3 in _default and 10-12 in p1; returns its name."""
    name = unique()
    m.create_collection(name, dimension=4, consistency_level="Strong")
    m.create_partition(name, "p1")
    m.insert(name, [{"id": i, "vector": [i, 1, 0, 0]} for i in (1, 2, 3)])
    m.insert(name, [{"id": i, "vector": [i, 1, 0, 0]} for i in (10, 11, 12)], partition_name="p1")
    return name


def reads(m: MilvusClient, name: str) -> dict[str, Callable[[], Any]]:
    """Every kind of read of `name` through pymilvus, by the verb Milvus's refusal names."""
    req = AnnSearchRequest(Q, "vector", {}, limit=5)
    return {
        "search": lambda: m.search(name, Q, limit=5, **STRONG),
        "hybrid_search": lambda: m.hybrid_search(name, [req, req], RRFRanker(), **STRONG),
        "search_iterator": lambda: m.search_iterator(name, Q, batch_size=2, limit=5).next(),
        "query": lambda: m.query(name, filter="id > 0", **STRONG),
        "count": lambda: m.query(name, output_fields=["count(*)"], **STRONG),
        "get": lambda: m.get(name, ids=[1]),
        "query_iterator": lambda: m.query_iterator(name, batch_size=2, filter="id > 0").next(),
    }


def ids(hits: Any) -> list[int]:
    return sorted(h["id"] for h in hits[0])


def test_a_released_collection_is_not_loaded_and_refuses_reads(served: Served) -> None:
    m = served.milvus
    name = make(m)
    cid = m.describe_collection(name)["collection_id"]
    m.release_collection(name)
    assert m.get_load_state(name)["state"].name == "NotLoad"
    assert m.get_load_state(name, partition_name="p1")["state"].name == "NotLoad"
    for verb, read in reads(m, name).items():
        with pytest.raises(MilvusException) as exc:
            read()
        op = "search" if "search" in verb else "query"
        assert (exc.value.code, exc.value.message) == (
            101,
            f"failed to {op}: collection not loaded[collection={cid}]",
        ), verb
    assert m.insert(name, [{"id": 5, "vector": [5, 1, 0, 0]}])["insert_count"] == 1
    assert m.delete(name, ids=[2])["delete_count"] == 1
    m.flush(name)
    m.load_collection(name)  # pymilvus waits for GetLoadingProgress to say 100
    assert m.get_load_state(name)["state"].name == "Loaded"
    assert ids(m.search(name, Q, limit=20, **STRONG)) == [1, 3, 5, 10, 11, 12]


def test_released_partitions_are_refused_when_named(served: Served) -> None:
    m = served.milvus
    name = make(m)
    p1 = served.client.collection_info(name).partitions["p1"]
    m.release_partitions(name, ["p1"])
    assert m.get_load_state(name)["state"].name == "Loaded"
    assert m.get_load_state(name, partition_name="p1")["state"].name == "NotLoad"
    assert ids(m.search(name, Q, limit=20, **STRONG)) == [1, 2, 3]
    assert m.query(name, output_fields=["count(*)"], **STRONG) == [{"count(*)": 3}]
    with pytest.raises(MilvusException) as exc:
        m.search(name, Q, limit=20, partition_names=["p1"], **STRONG)
    assert exc.value.code == 65535
    assert exc.value.message.endswith(f"reason=partition not loaded[partition=[{p1}]]")
    m.load_partitions(name, ["p1"])  # pymilvus waits for the partition's progress
    assert ids(m.search(name, Q, limit=20, partition_names=["p1"], **STRONG)) == [10, 11, 12]
    assert m.get_load_state(unique())["state"].name == "NotExist"


def test_rest_reports_and_refuses_a_released_collection(rest: Rest) -> None:
    name = unique()
    rest.ok("collections/create", collectionName=name, dimension=2)
    rest.ok("partitions/create", collectionName=name, partitionName="p1")
    rest.ok("entities/insert", collectionName=name, data=[{"id": 1, "vector": [1.0, 0.0]}])
    cid = rest.client.collection_info(name).collection_id
    rest.ok("collections/release", collectionName=name)
    not_loaded = {"loadState": "LoadStateNotLoad"}
    assert rest.ok("collections/get_load_state", collectionName=name) == not_loaded
    assert rest.ok("collections/describe", collectionName=name)["load"] == "LoadStateNotLoad"
    refused = rest.call("entities/search", collectionName=name, data=[[1.0, 0.0]], limit=3)
    assert (refused["code"], refused["message"]) == (
        101,
        f"failed to search: collection not loaded[collection={cid}]",
    )
    assert rest.call("entities/query", collectionName=name, filter="id > 0")["code"] == 101
    rest.ok("partitions/load", collectionName=name, partitionNames=["p1"])
    both = {"collectionName": name, "partitionNames": ["p1", "_default"]}
    assert rest.ok("collections/get_load_state", **both) == not_loaded
    rest.ok("collections/load", collectionName=name)
    loaded = rest.ok("collections/get_load_state", collectionName=name)
    assert loaded == {"loadState": "LoadStateLoaded", "loadProgress": 100}
    rest.ok("partitions/release", collectionName=name, partitionNames=["p1"])
    state = rest.ok("collections/get_load_state", collectionName=name, partitionNames=["p1"])
    assert state == not_loaded
