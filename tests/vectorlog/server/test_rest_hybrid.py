"""REST v2 on multi-vector collections (issue 26): `entities/search` with annsField and
`entities/hybrid_search` with rrf and weighted reranks, answered as Milvus ranks them
(numpy-checked); a request naming a missing field or a wrong number of weights is refused with
Milvus's message (code 1100)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique
from tests.vectorlog.test_hybrid_search import expected
from tests.vectorlog.test_multivector import FIELDS, ROWS, data, rows
from vectorlog import RRFRanker, WeightedRanker

rest = rest_fixture()
K = 5


def create(rest: Rest) -> str:
    name = unique("mv")
    fields: list[dict[str, Any]] = [
        {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
        {"fieldName": "n", "dataType": "Int64"},
    ]
    fields += [
        {"fieldName": f, "dataType": "FloatVector", "elementTypeParams": {"dim": dim}}
        for f, (dim, _) in FIELDS.items()
    ]
    index = [
        {"fieldName": f, "indexName": f, "metricType": metric, "indexType": "FLAT"}
        for f, (_, metric) in FIELDS.items()
    ]
    rest.ok(
        "collections/create",
        collectionName=name,
        schema={"fields": fields},
        indexParams=index,
        params={"consistencyLevel": "Strong"},
    )
    rest.ok("entities/insert", collectionName=name, data=rows())
    return name


def sub(field: str, qi: int = 0, **extra: Any) -> dict[str, Any]:
    return {"data": [data()[field][ROWS + qi].tolist()], "annsField": field, "limit": K, **extra}


def test_rest_hybrid_search_fuses_as_milvus_ranks(rest: Rest) -> None:
    name = create(rest)
    two = ["text", "image"]
    for rerank, ranker in (
        ({"strategy": "rrf", "params": {"k": 60}}, RRFRanker()),
        ({"strategy": "weighted", "params": {"weights": [0.4, 0.6]}}, WeightedRanker(0.4, 0.6)),
    ):
        for qi in range(3):
            hits = rest.ok(
                "entities/hybrid_search",
                collectionName=name,
                search=[sub(f, qi) for f in two],
                rerank=rerank,
                limit=6,
                outputFields=["n"],
            )
            want = expected(two, qi, ranker, 6)
            assert [h["id"] for h in hits] == [pk for pk, _ in want]
            assert np.allclose([h["distance"] for h in hits], [s for _, s in want], atol=1e-5)
            assert [h["n"] for h in hits] == [pk % 7 for pk, _ in want]
    hits = rest.ok("entities/search", collectionName=name, **sub("audio"))
    assert [h["id"] for h in hits] == [pk for pk, _ in expected(["audio"], 0, RRFRanker(), K)]


def test_rest_hybrid_search_bad_requests_get_milvus_messages(rest: Rest) -> None:
    name = create(rest)
    missing = rest.call(
        "entities/hybrid_search",
        collectionName=name,
        search=[sub("text"), {**sub("text"), "annsField": "nope"}],
        rerank={"strategy": "rrf", "params": {"k": 60}},
    )
    assert missing["code"] == 1100 and "fieldName(nope) not found" in missing["message"]
    weights = rest.call(
        "entities/hybrid_search",
        collectionName=name,
        search=[sub("text"), sub("image")],
        rerank={"strategy": "weighted", "params": {"weights": [1.0]}},
    )
    assert weights["code"] == 1100
    assert "invalid parameter[expected=2][actual=1]" in weights["message"]
    none = rest.call("entities/hybrid_search", collectionName=name, search=[])
    assert none["code"] == 1100 and "minimum of ann search requests is 1" in none["message"]
