"""pymilvus's create_index, then load_collection, then search on a served cluster (both log
backends): the search after the load is an HNSW one, as on Milvus, whose load returns once the
segments are loaded with their indexes. The query node's index reads are slowed (2 s) so a
load returning before the index is served would be seen (tests/vectorlog/
test_load_serves_indexes.py has the in-process Client's)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pymilvus import DataType

from tests.support import wait_until
from tests.vectorlog.server.conftest import Served
from tests.vectorlog.test_load_serves_indexes import DIM, HNSW, ROWS, K, data, recall_of
from vectorlog.processors.querynode import indexes


@pytest.fixture
def slow_index_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every index file the query node reads takes 2 s more to read."""
    real = indexes.read_index

    def slow(*args: Any) -> Any:
        time.sleep(2.0)
        return real(*args)

    monkeypatch.setattr(indexes, "read_index", slow)


def test_pymilvus_search_after_load_uses_the_index_built_before(
    served: Served, slow_index_reads: None
) -> None:
    m, name = served.milvus, "load_hnsw"
    schema = m.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    m.create_collection(name, schema=schema)
    x = data()
    m.insert(name, [{"id": i, "vector": x[i].tolist()} for i in range(ROWS)])
    m.flush(name)
    params = m.prepare_index_params()
    params.add_index("vector", index_type="HNSW", metric_type="L2", params=HNSW)
    m.create_index(name, params)

    def finished() -> bool:
        d = m.describe_index(name, "vector")
        return d["state"] == "Finished" and d["indexed_rows"] == ROWS

    wait_until(finished, 60, "the HNSW index built on the flushed segment")
    m.load_collection(name)
    queries = x[ROWS:]
    got = m.search(name, queries.tolist(), limit=K, search_params={"params": {"ef": 10}})
    ids = [[int(h["id"]) for h in hits] for hits in got]
    assert recall_of(ids) < 0.9  # HNSW's, not an exact scan's 1.0
