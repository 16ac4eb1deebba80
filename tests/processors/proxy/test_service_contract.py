"""The ProxyService contract (processors/proxy/service.py), run against every implementation:
the real proxy of a cluster on each log backend, and the proxy's network face, Milvus's gRPC
protocol, through `vectorlog serve`'s server with an unmodified pymilvus
(tests/processors/proxy/milvus_proxy.py). There is no test twin of the proxy: every unit test
of a proxy caller (bulk insert, compaction, the ingest consumer) runs a real one.

One cluster per implementation serves the module (the tests use their own collections)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.processors.implementations import REAL, open_cluster
from tests.processors.proxy.milvus_proxy import MilvusProxy
from vectorlog.core.errors import (
    AliasNotFound,
    CollectionNotFound,
    InvalidArgument,
)
from vectorlog.core.model import DataType, quick_schema
from vectorlog.processors.proxy.service import ProxyService
from vectorlog.server.grpc_server import start_grpc

pytestmark = pytest.mark.parametrize("proxy", REAL, indirect=True)
DIM = 4
SCHEMA = quick_schema(DIM, "L2")
ROWS = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(20)]


@pytest.fixture(scope="module")
def proxy(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A ProxyService (the network one: the part MilvusProxy speaks) of a fresh cluster."""
    client = open_cluster(request.param, request, tmp_path_factory.mktemp("proxy"))
    try:
        if request.param != "network":
            yield client.cluster.proxy
            return
        server = start_grpc(client, "127.0.0.1:0", max_workers=4)
        remote = MilvusProxy(f"127.0.0.1:{server.port}")
        try:
            yield remote
        finally:
            remote.close()
            server.stop(grace=1.0)
    finally:
        client.close()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A collection name of this test's own (the cluster is the module's)."""
    return f"c{zlib.crc32(request.node.name.encode()):08x}"


@pytest.fixture
def books(proxy: ProxyService, name: str) -> str:
    """A collection holding ROWS; returns its name."""
    proxy.create_collection(name, SCHEMA)
    assert proxy.insert(name, ROWS)["insert_count"] == len(ROWS)
    return name


def test_a_created_collection_is_described_listed_and_has(proxy: ProxyService, name: str):
    created = proxy.create_collection(name, SCHEMA, shards_num=2)
    described = proxy.describe_collection(name)
    assert (created.name, described.name, described.shards_num) == (name, name, 2)
    assert described.collection_id == created.collection_id
    fields = [(f.name, f.dtype, f.is_primary, f.dim) for f in described.schema.fields]
    assert fields == [
        ("id", DataType.INT64, True, None),
        ("vector", DataType.FLOAT_VECTOR, False, 4),
    ]
    assert proxy.has_collection(name) and name in proxy.list_collections()


def test_an_unknown_collection_is_not_found_by_reads_and_writes(proxy: ProxyService):
    assert not proxy.has_collection("nothing_here")
    with pytest.raises(CollectionNotFound, match="nothing_here"):
        proxy.describe_collection("nothing_here")
    with pytest.raises(CollectionNotFound, match="nothing_here"):
        proxy.insert("nothing_here", ROWS[:1])
    with pytest.raises(CollectionNotFound, match="nothing_here"):
        proxy.query("nothing_here", "id >= 0")


def test_a_dropped_collection_is_gone(proxy: ProxyService, books: str):
    proxy.drop_collection(books)
    assert not proxy.has_collection(books) and books not in proxy.list_collections()
    with pytest.raises(CollectionNotFound, match=books):
        proxy.count(books)


def test_an_alias_names_its_collection_until_dropped(proxy: ProxyService, books: str):
    alias = f"{books}_alias"
    proxy.create_alias(books, alias)
    assert proxy.describe_alias(alias) == books and alias in proxy.list_aliases()
    assert proxy.describe_collection(alias).name == books
    assert proxy.count(alias) == len(ROWS)
    proxy.drop_alias(alias)
    assert alias not in proxy.list_aliases()
    with pytest.raises(AliasNotFound, match=alias):
        proxy.describe_alias(alias)


def test_inserted_rows_are_counted_and_got_with_their_fields(proxy: ProxyService, books: str):
    assert proxy.count(books) == len(ROWS)
    got = sorted(proxy.get(books, [3, 5, 999], ["vector"]), key=lambda r: r["id"])
    assert [(r["id"], r["vector"]) for r in got] == [(3, ROWS[3]["vector"]), (5, ROWS[5]["vector"])]


def test_an_insert_returns_its_ids_in_order_and_a_later_timestamp(proxy: ProxyService, name: str):
    proxy.create_collection(name, SCHEMA)
    first = proxy.insert(name, ROWS[:3])
    second = proxy.insert(name, ROWS[3:5])
    assert (first["ids"], second["ids"]) == ([0, 1, 2], [3, 4])
    assert 0 < first["timestamp"] < second["timestamp"]


def test_a_query_filters_and_pages_in_primary_key_order(proxy: ProxyService, books: str):
    rows = proxy.query(books, "id >= 10", output_fields=["id"])
    assert [r["id"] for r in rows] == list(range(10, 20))
    page = proxy.query(books, "id >= 10", output_fields=["id"], limit=3, offset=2)
    assert [r["id"] for r in page] == [12, 13, 14]
    assert proxy.query(books, "", ["count(*)"]) == [{"count(*)": len(ROWS)}]


def test_a_search_returns_the_nearest_first_up_to_the_limit(proxy: ProxyService, books: str):
    (hits,) = proxy.search(books, [[7.2, 0.0, 0.0, 1.0]], limit=3, output_fields=["vector"])
    assert [h["id"] for h in hits] == [7, 8, 6]
    assert hits[0]["distance"] == pytest.approx(0.04, abs=1e-5)
    assert hits[0]["entity"]["vector"] == ROWS[7]["vector"]


def test_a_search_of_several_vectors_answers_each(proxy: ProxyService, books: str):
    queries = np.array([[0.0, 0, 0, 1], [19.0, 0, 0, 1]], dtype=np.float32).tolist()
    found = proxy.search(books, queries, limit=2)
    assert [[h["id"] for h in q] for q in found] == [[0, 1], [19, 18]]


def test_deleted_rows_are_neither_counted_nor_got_nor_found(proxy: ProxyService, books: str):
    proxy.delete(books, ids=[0, 1])
    proxy.delete(books, filter="id >= 15")
    assert proxy.count(books) == len(ROWS) - 7
    assert proxy.get(books, [0, 1, 15]) == []
    (hits,) = proxy.search(books, [[0.0, 0.0, 0.0, 1.0]], limit=1)
    assert hits[0]["id"] == 2


def test_an_upsert_replaces_the_row_of_its_primary_key(proxy: ProxyService, books: str):
    proxy.insert(books, [{"id": 4, "vector": [100.0, 0.0, 0.0, 1.0]}], upsert=True)
    assert proxy.count(books) == len(ROWS)
    assert proxy.get(books, [4], ["vector"])[0]["vector"] == [100.0, 0.0, 0.0, 1.0]


def test_rows_read_the_same_once_flushed(proxy: ProxyService, books: str):
    proxy.flush(books)
    assert proxy.count(books) == len(ROWS)
    assert [r["id"] for r in proxy.query(books, "id < 3", ["id"])] == [0, 1, 2]


@pytest.mark.parametrize(
    "bad",
    [
        [{"id": 1}],  # no vector
        [{"id": 1, "vector": [1.0, 2.0]}],  # wrong dimension
        [{"id": "one", "vector": [1.0, 0.0, 0.0, 0.0]}],  # a string key in an INT64 field
    ],
    ids=["missing-vector", "wrong-dim", "wrong-key-type"],
)
def test_a_bad_row_is_refused_and_nothing_is_written(
    proxy: ProxyService, name: str, bad: list[dict[str, Any]]
):
    proxy.create_collection(name, SCHEMA)
    with pytest.raises(InvalidArgument):
        proxy.insert(name, [{"id": 0, "vector": [0.0, 0.0, 0.0, 1.0]}, *bad])
    assert proxy.count(name) == 0
