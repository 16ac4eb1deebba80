"""`load_collection` returns once the segment indexes built so far are served, as Milvus's load
does (its segments load with their indexes), on both log backends: the first search after it
is an HNSW search, not an exact scan of a segment whose index the query node still reads.

The query node's read of an index file is slowed (2 s) so that a load returning before the
index is served would be seen: an HNSW search at ef 10 on M 4 finds about a third of the
true neighbours, an exact scan all of them."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.processors.querynode import indexes

DIM, ROWS, QUERIES, K = 16, 3000, 20, 10
HNSW = {"M": 4, "efConstruction": 8}


@pytest.fixture
def slow_index_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every index file the query node reads takes 2 s more to read."""
    real = indexes.read_index

    def slow(*args: Any) -> Any:
        time.sleep(2.0)
        return real(*args)

    monkeypatch.setattr(indexes, "read_index", slow)


def data() -> np.ndarray:
    """ROWS rows then QUERIES queries, seeded."""
    return np.random.default_rng(5).standard_normal((ROWS + QUERIES, DIM)).astype(np.float32)


def fill(client: Client | Any, name: str, types: Any = DataType) -> None:
    """Creates `name` without index, inserts ROWS rows, flushes, builds HNSW (L2) on it and
    waits until describe_index says Finished for every row. `client`: a vectorlog Client, or
    pymilvus's MilvusClient with `types` its DataType (each takes its own enum)."""
    s = client.create_schema()
    s.add_field("id", types.INT64, is_primary=True)
    s.add_field("vector", types.FLOAT_VECTOR, dim=DIM)
    client.create_collection(name, schema=s)
    x = data()
    client.insert(name, [{"id": i, "vector": x[i].tolist()} for i in range(ROWS)])
    client.flush(name)
    params = client.prepare_index_params()
    params.add_index("vector", index_type="HNSW", metric_type="L2", params=HNSW)
    client.create_index(name, params)

    def finished() -> bool:
        d = client.describe_index(name, "vector")
        return d["state"] == "Finished" and d["indexed_rows"] == ROWS

    wait_until(finished, 60, "the HNSW index built on the flushed segment")


def recall_of(found: list[list[int]]) -> float:
    """Recall@K of the ids found for each query against numpy's exact L2 neighbours."""
    x = data()
    base, queries = x[:ROWS], x[ROWS:]
    hits = 0
    for q, ids in zip(queries, found, strict=True):
        truth = np.argsort(((base - q) ** 2).sum(1))[:K]
        hits += len(set(ids) & set(truth.tolist()))
    return hits / (K * QUERIES)


def recall(client: Client, name: str) -> float:
    """Recall@K of the client's search at ef 10."""
    queries = data()[ROWS:]
    got = client.search(name, queries.tolist(), limit=K, search_params={"params": {"ef": 10}})
    return recall_of([[int(h["id"]) for h in hits] for hits in got])


def test_a_search_after_load_collection_uses_the_index_built_before(
    open_client: ClientFactory, slow_index_reads: None
):
    client = open_client()
    fill(client, "h")
    client.load_collection("h")
    assert recall(client, "h") < 0.9  # HNSW's, not an exact scan's 1.0


def test_after_a_reopen_load_collection_serves_the_index(
    open_client: ClientFactory, slow_index_reads: None
):
    client = open_client()
    fill(client, "h")
    client.close()
    again = open_client()
    again.load_collection("h")
    assert recall(again, "h") < 0.9
