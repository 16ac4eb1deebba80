"""pymilvus's create_index, then load_collection, then search on a served cluster (both log
backends): the search after the load is an HNSW one, as on Milvus, whose load returns once the
segments are loaded with their indexes. The query node's index reads are slowed (2 s) so a
load returning before the index is served would be seen (tests/vectorlog/
test_load_serves_indexes.py has the in-process Client's)."""

from __future__ import annotations

from pymilvus import DataType

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.test_load_serves_indexes import (
    ROWS,
    K,
    data,
    fill,
    recall_of,
    slow_index_reads,
)

__all__ = ["slow_index_reads"]  # the fixture, used by name


def test_pymilvus_search_after_load_uses_the_index_built_before(
    served: Served, slow_index_reads: None
) -> None:
    m, name = served.milvus, "load_hnsw"
    fill(m, name, DataType)
    m.load_collection(name)
    queries = data()[ROWS:]
    got = m.search(name, queries.tolist(), limit=K, search_params={"params": {"ef": 10}})
    ids = [[int(h["id"]) for h in hits] for hits in got]
    assert recall_of(ids) < 0.9  # HNSW's, not an exact scan's 1.0
