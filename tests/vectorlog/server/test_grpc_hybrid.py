"""Multi-vector collections and hybrid_search over Milvus's gRPC protocol (issue 26): an
unmodified pymilvus MilvusClient creates a collection with several vector fields, an index
per field, searches each by anns_field and fuses them with RRFRanker and WeightedRanker,
answered as the in-process Client and Milvus's ranking (numpy-checked) answer; bad requests
get Milvus's messages with code 1100."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from pymilvus import (
    AnnSearchRequest,
    DataType,
    MilvusClient,
    MilvusException,
    RRFRanker,
    WeightedRanker,
)

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.test_hybrid_search import expected
from tests.vectorlog.test_multivector import FIELDS, ROWS, data, rows, wait_indexed
from vectorlog import AnnSearchRequest as OurRequest
from vectorlog import RRFRanker as OurRRF
from vectorlog import WeightedRanker as OurWeighted

K = 5


def create(m: MilvusClient) -> str:
    name = f"mv_{uuid.uuid4().hex[:10]}"
    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("n", DataType.INT64)
    for field, (dim, _) in FIELDS.items():
        schema.add_field(field, DataType.FLOAT_VECTOR, dim=dim)
    index = m.prepare_index_params()
    for field, (_, metric) in FIELDS.items():
        index.add_index(field, index_type="HNSW", metric_type=metric, params={"M": 8})
    m.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    return name


def requests(cls: type, fields: list[str], qi: int = 0, expr: str = "") -> list:
    return [
        cls([data()[f][ROWS + qi].tolist()], f, {"params": {"ef": 64}}, K, expr) for f in fields
    ]


def test_pymilvus_hybrid_search_answers_as_milvus_ranks(served: Served) -> None:
    m = served.milvus
    name = create(m)
    m.insert(name, rows(0, ROWS // 2))
    m.flush(name)
    m.insert(name, rows(ROWS // 2))
    wait_indexed(served.client, name)
    two = ["text", "image"]
    for ranker, ours, limit in (
        (RRFRanker(), OurRRF(), 6),
        (RRFRanker(20), OurRRF(20), 4),
        (WeightedRanker(0.3, 0.7), OurWeighted(0.3, 0.7), 7),
    ):
        for qi in range(3):
            (got,) = m.hybrid_search(name, requests(AnnSearchRequest, two, qi), ranker, limit=limit)
            want = expected(two, qi, ours, limit)
            assert [h["id"] for h in got] == [pk for pk, _ in want]
            assert np.allclose([h["distance"] for h in got], [s for _, s in want], atol=1e-5)
            (same,) = served.client.hybrid_search(name, requests(OurRequest, two, qi), ours, limit)
            assert [h["id"] for h in got] == [h["id"] for h in same]
    three = requests(AnnSearchRequest, list(FIELDS), 0, "n == 3")
    (hits,) = m.hybrid_search(
        name, three, WeightedRanker(0.2, 0.3, 0.5), limit=3, output_fields=["n", "audio"], offset=1
    )
    assert len(hits) == 3
    for h in hits:
        assert h["entity"]["n"] == 3 and np.allclose(h["entity"]["audio"], data()["audio"][h["id"]])
    (one,) = m.search(name, [data()["image"][ROWS].tolist()], limit=K, anns_field="image")
    assert [h["id"] for h in one] == [pk for pk, _ in expected(["image"], 0, OurRRF(), K)]


def test_bad_hybrid_searches_get_milvus_messages(served: Served) -> None:
    m = served.milvus
    name = create(m)
    m.insert(name, rows(0, 10))
    q = [data()["text"][ROWS].tolist()]
    cases = [
        ([AnnSearchRequest(q, "nope", {}, K)], RRFRanker(), r"fieldName\(nope\) not found"),
        (
            requests(AnnSearchRequest, ["text", "image"]),
            WeightedRanker(0.2, 0.4, 0.8),
            r"invalid parameter\[expected=2\]\[actual=3\]",
        ),
        (requests(AnnSearchRequest, ["text"]), RRFRanker(0), r"k should be in range \(0, 16384\)"),
    ]
    for reqs, ranker, message in cases:
        with pytest.raises(MilvusException, match=message) as caught:
            m.hybrid_search(name, reqs, ranker)
        assert caught.value.code == 1100
    with pytest.raises(MilvusException, match="multiple anns_fields exist"):
        m.search(name, q, limit=K)


def test_pymilvus_grouped_hybrid_search_answers_as_the_client(served: Served) -> None:
    m = served.milvus
    name = create(m)
    m.insert(name, rows())
    two = ["text", "image"]
    kw: dict[str, Any] = {
        "limit": 3,
        "group_by_field": "n",
        "group_size": 2,
        "output_fields": ["n"],
    }
    for qi in range(3):
        (got,) = m.hybrid_search(name, requests(AnnSearchRequest, two, qi), RRFRanker(), **kw)
        (same,) = served.client.hybrid_search(name, requests(OurRequest, two, qi), OurRRF(), **kw)
        assert [(h["id"], h["entity"]["n"]) for h in got] == [
            (h["id"], h["entity"]["n"]) for h in same
        ]
        groups = [h["entity"]["n"] for h in got]
        assert len(set(groups)) <= 3 and all(groups.count(g) <= 2 for g in groups)
