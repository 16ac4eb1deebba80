"""Differential test of function rankers (issue 33): the same `search(..., ranker=Function(...,
function_type=FunctionType.RERANK))` calls on vectorlog and on Milvus Lite (test_differential.py's
pair: vectorlog in-process and over gRPC, both log backends, a process cluster in test-all):
rrf, weighted (with and without norm_score) and decay (gauss, exp, linear; on an INT64 and a
nullable DOUBLE field), on L2 and COSINE, and an unknown reranker refused by both.

Milvus reranks the limit (+ offset) hits its search found (proxy: the rerank operator runs on
the reduced top-k); milvus-lite 3.2.2 reranks a larger pool, so a decay ranker's top 15
differ where a row beyond the 15 nearest decays less. The decay checks therefore search with a
limit of every row: both rerank the same hits, and their scores and order are compared."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.milvus import test_differential
from tests.milvus.test_differential import Diffs, Pair, Refused, each, eq, hits

pymilvus = pytest.importorskip("pymilvus")
pair = test_differential.pair  # the fixture: Milvus Lite and vectorlog side by side

ROWS, DIM = 400, 4
QUERIES = [[0.2, 0.7, 0.1, 0.5], [0.9, 0.1, 0.4, 0.3]]
RANKERS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("rrf", {"reranker": "rrf", "k": 30}, []),
    ("weighted.norm", {"reranker": "weighted", "weights": [0.6], "norm_score": True}, []),
    ("weighted.raw", {"reranker": "weighted", "weights": [0.6]}, []),
    (
        "decay.gauss",
        {"reranker": "decay", "function": "gauss", "origin": 300, "scale": 150, "offset": 10},
        ["t"],
    ),
    ("decay.exp", {"reranker": "decay", "function": "exp", "origin": 0, "scale": 90}, ["t"]),
    (
        "decay.linear",
        {"reranker": "decay", "function": "linear", "origin": 20, "scale": 30, "decay": 0.3},
        ["n"],
    ),
    (
        "decay.norm",
        {"reranker": "decay", "function": "exp", "origin": 0, "scale": 9, "norm_score": True},
        ["n"],
    ),
]


def create(pair: Pair, name: str, metric: str) -> None:
    T = pymilvus.DataType
    for client, t in ((pair.lite, T), (pair.ours, pair.types)):
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", t.INT64, is_primary=True)
        s.add_field("v", t.FLOAT_VECTOR, dim=DIM)
        s.add_field("t", t.INT64)
        s.add_field("n", t.DOUBLE, nullable=True)
        index = client.prepare_index_params()
        index.add_index("v", index_type="FLAT", metric_type=metric)
        client.create_collection(name, schema=s, index_params=index)


def data() -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "v": [math.sin(i), math.cos(i * 0.7), (i % 17) / 17, (i % 5) / 5],
            "t": (i * 37) % 600,
            "n": None if i % 7 == 0 else float(i % 40),
        }
        for i in range(ROWS)
    ]


def same_ranked(a: Any, b: Any) -> bool:
    """True if per query the hits come in the same order with the same entities and scores
    (to float32's precision: both sides compute in float32)."""
    if isinstance(a, Refused) or isinstance(b, Refused) or len(a) != len(b):
        return bool(a == b)
    for ha, hb in zip(a, b, strict=True):
        if [(h["id"], h["entity"]) for h in ha] != [(h["id"], h["entity"]) for h in hb]:
            return False
        dist = [h["distance"] for h in ha], [h["distance"] for h in hb]
        if not np.allclose(*dist, rtol=1e-5, atol=1e-6):
            return False
    return True


def ranker(params: dict[str, Any], inputs: list[str]) -> Any:
    return pymilvus.Function(
        name="r",
        input_field_names=inputs,
        function_type=pymilvus.FunctionType.RERANK,
        params=params,
    )


@pytest.mark.parametrize("metric", ["L2", "COSINE"])
def test_function_rankers_on_a_search(pair: Pair, metric: str) -> None:
    d = Diffs()
    name = f"rankers_{metric.lower()}"
    create(pair, name, metric)
    pair.run("insert", name, data())
    pair.run("flush", name)
    for label, params, inputs in RANKERS:
        limit = ROWS if label.startswith("decay") else 15
        got = pair.both(
            "search", name, QUERIES, limit=limit, output_fields=["t"], ranker=ranker(params, inputs)
        )
        d.check(f"{label}.{metric}", each(hits, got), same_ranked)
    unknown = ranker({"reranker": "nope"}, [])
    got = pair.both("search", name, QUERIES, limit=5, ranker=unknown)
    d.check(f"unknown.{metric}.refused", got, eq)
    d.assert_none()
