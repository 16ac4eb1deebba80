"""Function rankers over Milvus's gRPC protocol: pymilvus's `ranker=Function(...,
function_type=FunctionType.RERANK, params={"reranker": ...})` on search and hybrid_search.
rrf and weighted answer exactly as RRFRanker / WeightedRanker; decay reranks each hit by its
input field's value as Milvus's decay functions define it (computed here from Milvus's
documented formulas); what Milvus refuses is refused with its message and code 65535."""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest
from pymilvus import (
    AnnSearchRequest,
    DataType,
    Function,
    FunctionType,
    MilvusClient,
    MilvusException,
    RRFRanker,
    WeightedRanker,
)

from tests.vectorlog.server.conftest import Served

ROWS = 300


def _collection(m: MilvusClient) -> str:
    name = f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("a", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("b", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("t", DataType.INT64)
    s.add_field("n", DataType.DOUBLE, nullable=True)
    s.add_field("s", DataType.VARCHAR, max_length=8)
    index = MilvusClient.prepare_index_params()
    index.add_index("a", index_type="FLAT", metric_type="COSINE")
    index.add_index("b", index_type="FLAT", metric_type="L2")
    m.create_collection(name, schema=s, index_params=index, consistency_level="Strong")
    rows = [
        {
            "id": i,
            "a": [math.sin(i), math.cos(i), 0.5],
            "b": [i % 7 / 7, i % 11 / 11, i % 13 / 13],
            "t": (i * 37) % 1000,
            "n": None if i % 5 == 0 else float(i % 50),
            "s": f"s{i}",
        }
        for i in range(ROWS)
    ]
    m.insert(name, rows)
    return name


def _rerank(**params: Any) -> Function:
    fields = params.pop("inputs", [])
    return Function(
        name="r", input_field_names=fields, function_type=FunctionType.RERANK, params=params
    )


def _requests() -> list[AnnSearchRequest]:
    return [
        AnnSearchRequest([[0.3, 0.9, 0.5]], "a", {"metric_type": "COSINE"}, 20),
        AnnSearchRequest([[0.5, 0.5, 0.5]], "b", {"metric_type": "L2"}, 20),
    ]


def _pairs(res: Any) -> list[tuple[int, float]]:
    return [(h["id"], round(h["distance"], 5)) for h in res[0]]


def test_rrf_and_weighted_functions_answer_as_the_classic_rankers(served: Served) -> None:
    m = served.milvus
    name = _collection(m)
    pairs = [
        (RRFRanker(30), _rerank(reranker="rrf", k=30)),
        (RRFRanker(), _rerank(reranker="rrf")),
        (
            WeightedRanker(0.7, 0.3),
            _rerank(reranker="weighted", weights=[0.7, 0.3], norm_score=True),
        ),
        (
            WeightedRanker(0.2, 0.8, norm_score=False),
            _rerank(reranker="weighted", weights=[0.2, 0.8]),  # Milvus: no norm by default
        ),
    ]
    for classic, function in pairs:
        want = m.hybrid_search(name, _requests(), classic, limit=12, output_fields=["t"])
        got = m.hybrid_search(name, _requests(), function, limit=12, output_fields=["t"])
        assert _pairs(got) == _pairs(want) and len(got[0]) == 12
        assert [h["entity"] for h in got[0]] == [h["entity"] for h in want[0]]


def test_rrf_function_on_a_search_keeps_the_order_and_scores_by_rank(served: Served) -> None:
    m = served.milvus
    name = _collection(m)
    plain = m.search(name, [[0.3, 0.9, 0.5]], limit=8, anns_field="a")
    ranked = m.search(
        name, [[0.3, 0.9, 0.5]], limit=8, anns_field="a", ranker=_rerank(reranker="rrf")
    )
    assert [h["id"] for h in ranked[0]] == [h["id"] for h in plain[0]]
    assert [h["distance"] for h in ranked[0]] == pytest.approx([1 / (61 + r) for r in range(8)])


def _decayed(
    function: str, origin: float, scale: float, offset: float, decay: float, x: float
) -> float:
    """Milvus's documented decay functions."""
    d = max(0.0, abs(x - origin) - offset)
    if function == "gauss":
        return math.exp(-(d**2) / (2 * (scale**2 / (-2 * math.log(decay)))))
    if function == "exp":
        return math.exp(math.log(decay) / scale * d)
    return max(decay, 1 - (1 - decay) / scale * d)


@pytest.mark.parametrize("function", ["gauss", "exp", "linear"])
def test_decay_function_reranks_a_search_by_its_input_field(served: Served, function: str) -> None:
    m = served.milvus
    name = _collection(m)
    query = [[0.5, 0.5, 0.5]]
    plain = m.search(name, query, limit=25, anns_field="b", output_fields=["t"])
    params = {"function": function, "origin": 500, "scale": 200, "offset": 20, "decay": 0.4}
    ranker = _rerank(reranker="decay", inputs=["t"], **params)
    got = m.search(name, query, limit=25, anns_field="b", ranker=ranker)
    expected = {
        h["id"]: (1 - 2 * math.atan(h["distance"]) / math.pi)  # L2: turned as Milvus does
        * _decayed(function, 500, 200, 20, 0.4, h["entity"]["t"])
        for h in plain[0]
    }
    scores = [h["distance"] for h in got[0]]
    assert {h["id"] for h in got[0]} == set(expected)
    assert scores == pytest.approx([expected[h["id"]] for h in got[0]], rel=1e-5)
    assert scores == sorted(scores, reverse=True)
    assert all(h["entity"] == {} for h in got[0])  # the input field is not output unasked


def test_decay_in_a_hybrid_search_merges_then_decays_and_a_null_scores_zero(
    served: Served,
) -> None:
    m = served.milvus
    name = _collection(m)
    fields = ["n"]
    ranker = _rerank(
        reranker="decay",
        inputs=fields,
        function="linear",
        origin=0,
        scale=25,
        norm_score=True,
        score_mode="sum",
    )
    routes = [
        m.search(name, r.data, limit=20, anns_field=r.anns_field, output_fields=fields)
        for r in _requests()
    ]
    merged: dict[int, float] = {}
    values: dict[int, Any] = {}
    for hits, metric in zip(routes, ["COSINE", "L2"], strict=True):
        for h in hits[0]:
            d = h["distance"]
            s = (1 + d) / 2 if metric == "COSINE" else 1 - 2 * math.atan(d) / math.pi
            merged[h["id"]] = merged.get(h["id"], 0.0) + s
            values[h["id"]] = h["entity"]["n"]
    scores = {
        pk: 0.0 if values[pk] is None else s * _decayed("linear", 0, 25, 0, 0.5, values[pk])
        for pk, s in merged.items()
    }
    expected = sorted(scores, key=lambda pk: (-scores[pk], pk))[:15]
    got = m.hybrid_search(name, _requests(), ranker, limit=15, output_fields=fields)
    assert [h["id"] for h in got[0]] == expected
    assert [h["distance"] for h in got[0]] == pytest.approx(
        [scores[pk] for pk in expected], abs=1e-5
    )
    assert all(set(h["entity"]) == {"n"} for h in got[0])
    nulls = [h for h in got[0] if h["entity"]["n"] is None]
    assert all(h["distance"] == 0 for h in nulls)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"reranker": "nope"}, "rerank_builder: unsupported reranker nope"),
        ({"k": 5}, "reranker name not specified"),
        ({"reranker": "rrf", "k": 0}, "The rank params k should be in range (0, 16384)"),
        ({"reranker": "weighted", "weights": [0.5, 0.5]}, "the length of weights param mismatch"),
        ({"reranker": "weighted", "weights": [1.5]}, "rank param weight should be in range [0, 1]"),
        (
            {"reranker": "decay", "inputs": ["t"], "origin": 0, "scale": 1},
            "decay function not specified",
        ),
        (
            {"reranker": "decay", "inputs": ["s"], "function": "gauss", "origin": 0, "scale": 1},
            "decay input field s must be numeric, got VarChar",
        ),
        (
            {"reranker": "decay", "inputs": ["t"], "function": "gauss", "origin": 0, "scale": 0},
            "decay: scale must be > 0, got 0.000000",
        ),
        (
            {"reranker": "decay", "inputs": ["t"], "function": "cubic", "origin": 0, "scale": 1},
            'decay: invalid function "cubic"',
        ),
        (
            {
                "reranker": "decay",
                "inputs": ["t"],
                "function": "exp",
                "origin": 0,
                "scale": 1,
                "score_mode": "min",
            },
            "unsupported score_mode: min, only supports [max, sum, avg]",
        ),
        (
            {"reranker": "model", "inputs": ["s", "t"]},
            "model reranker requires exactly 1 input field, got 2",
        ),
        (
            {"reranker": "model", "inputs": ["s"], "queries": '["q"]'},
            "does not serve the model reranker",
        ),
    ],
)
def test_function_rankers_milvus_refuses_are_refused_with_its_message(
    served: Served, params: dict[str, Any], message: str
) -> None:
    m = served.milvus
    name = _collection(m)
    with pytest.raises(MilvusException) as err:
        m.search(name, [[0.3, 0.9, 0.5]], limit=5, anns_field="a", ranker=_rerank(**params))
    assert err.value.code == 65535 and message in err.value.message
