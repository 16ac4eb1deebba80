"""The common search through Milvus's gRPC protocol (issue 28: one call, no filter, output
fields or partitions): an unmodified pymilvus gets, call after call, exactly the answer of
the general path (the same search naming the default partition, which the common path does
not take) at every consistency level, one query or many, with a deadline or without; a
refused request is refused the same on every call."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

from tests.vectorlog.server.conftest import Served
from vectorlog.core.errors import InvalidArgument

DIM = 8


def create(m: MilvusClient, rows: int = 300) -> tuple[str, np.ndarray]:
    """Creates a collection of `rows` flushed rows and as many more unflushed (HNSW,
    COSINE); returns its name and the vectors."""
    name = f"cs_{uuid.uuid4().hex[:8]}"
    s = m.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
    index = m.prepare_index_params()
    index.add_index("v", index_type="HNSW", metric_type="COSINE", params={"M": 8})
    m.create_collection(name, schema=s, index_params=index, consistency_level="Strong")
    x = np.random.default_rng(3).standard_normal((2 * rows, DIM)).astype(np.float32)
    m.insert(name, [{"id": i, "v": x[i].tolist()} for i in range(rows)])
    m.flush(name)
    m.insert(name, [{"id": i, "v": x[i].tolist()} for i in range(rows, 2 * rows)])
    return name, x


def same(got: Any, want: Any) -> bool:
    """Whether two answers hold the same ids in order and distances 1e-5 apart at most (an
    index and a scan of the same rows differ in the last bits)."""
    ids = [[h["id"] for h in q] for q in got] == [[h["id"] for h in q] for q in want]
    d = [[h["distance"] for h in q] for q in got], [[h["distance"] for h in q] for q in want]
    return ids and bool(np.allclose(d[0], d[1], rtol=0, atol=1e-5))


@pytest.mark.parametrize("level", ["Strong", "Bounded", "Session", "Eventually"])
def test_repeated_searches_answer_as_the_general_path(served: Served, level: str) -> None:
    m = served.milvus
    name, x = create(m)
    m.search(name, [x[0].tolist()], limit=5, consistency_level="Strong")  # all rows seen
    queries = np.random.default_rng(4).standard_normal((12, DIM)).astype(np.float32)
    for timeout in (None, 30.0):
        args: dict[str, Any] = {"limit": 7, "consistency_level": level, "timeout": timeout}
        for batch in [[q.tolist()] for q in queries[:6]] + [[q.tolist() for q in queries]]:
            general = m.search(name, batch, partition_names=["_default"], **args)
            for _ in range(3):  # the first call of a shape prepares the common path's plan
                assert same(m.search(name, batch, **args), general)


def test_a_common_search_sees_a_strong_write_at_once(served: Served) -> None:
    """A Strong search after an insert finds the new row on every call (the common path
    declines a read whose guarantee ts the node has not applied: it never answers older)."""
    m = served.milvus
    name, x = create(m, rows=50)
    q = np.ones(DIM, np.float32)
    for i in range(5):
        m.search(name, [q.tolist()], limit=3)
        key = 10_000 + i
        m.insert(name, [{"id": key, "v": (q * (i + 1)).tolist()}])
        got = m.search(name, [q.tolist()], limit=10, consistency_level="Strong")
        assert key in [h["id"] for h in got[0]], i


def test_a_refused_request_is_refused_on_every_call(served: Served) -> None:
    m = served.milvus
    name, x = create(m, rows=50)
    m.search(name, [x[0].tolist()], limit=5)
    for _ in range(3):
        with pytest.raises(MilvusException, match="dim|dimension"):
            m.search(name, [x[0][:4].tolist()], limit=5)
        with pytest.raises(MilvusException, match="metric"):
            m.search(name, [x[0].tolist()], limit=5, search_params={"metric_type": "L2"})
        assert len(m.search(name, [x[0].tolist()], limit=5)[0]) == 5


def test_a_client_search_with_a_timeout_answers_as_without(served: Served) -> None:
    """In process: a valid timeout bounds only a wait (the answer is the same); an invalid
    one is refused on every call, also once the common path is prepared."""
    client = served.client
    name, x = create(served.milvus, rows=50)
    q = [x[1]]
    want = client.search(name, q, limit=5, consistency_level="Strong")
    for _ in range(3):  # the flushed segment's index may be built between calls: 1e-7 apart
        strong = client.search(name, q, limit=5, timeout=30, consistency_level="Strong")
        assert same(strong, want)
        assert same(client.search(name, q, limit=5, timeout=0.5), want)
        for bad in (0, -1.0, True, float("nan")):
            with pytest.raises(InvalidArgument, match="timeout"):
                client.search(name, q, limit=5, timeout=bad)
