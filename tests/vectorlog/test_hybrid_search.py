"""hybrid_search through `vectorlog.Client` on both log backends (issue 26): ANN searches on
several vector fields fused by RRFRanker and WeightedRanker exactly as Milvus ranks (checked
against an independent numpy fusion), with filters, offsets and output fields, on growing
and sealed (indexed) segments and after a restart; bad requests refused with Milvus's
messages."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.vectorlog.test_multivector import FIELDS, ROWS, create, data, nearest, rows, wait_indexed
from vectorlog import AnnSearchRequest, Client, RRFRanker, WeightedRanker
from vectorlog.core.errors import InvalidArgument


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


K = 5


def normalized(metric: str, s: float) -> float:
    """Milvus's normalisation of a weighted ranker's scores (rerank getNormalizeFunc)."""
    if metric == "COSINE":
        return (1 + s) * 0.5
    if metric == "IP":
        return 0.5 + math.atan(s) / math.pi
    return 1 - 2 * math.atan(s) / math.pi


def expected(
    fields: list[str], qi: int, ranker: Any, limit: int, offset: int = 0, keep: Any = None
) -> list[tuple[int, float]]:
    """The fused (id, score) of query `qi` on `fields` (each searched for K hits), by numpy."""
    scores: dict[int, float] = {}
    for i, f in enumerate(fields):
        ids, dist = nearest(f, data()[f][ROWS + qi], keep)
        for rank, (pk, d) in enumerate(zip(ids, dist, strict=True)):
            if isinstance(ranker, RRFRanker):
                add = 1 / (ranker.k + rank + 1)
            else:
                add = ranker.weights[i] * normalized(FIELDS[f][1], float(d))
            scores[pk] = scores.get(pk, 0.0) + add
    order = sorted(scores, key=lambda pk: (-round(scores[pk], 6), pk))
    return [(pk, scores[pk]) for pk in order[offset : offset + limit]]


def reqs(fields: list[str], qi: int = 0, expr: str | None = None) -> list[AnnSearchRequest]:
    return [
        AnnSearchRequest([data()[f][ROWS + qi].tolist()], f, {"params": {"ef": 64}}, K, expr)
        for f in fields
    ]


def assert_fused(client: Client, fields: list[str], ranker: Any, **kw: Any) -> None:
    for qi in range(3):
        (got,) = client.hybrid_search("mv", reqs(fields, qi), ranker, **kw)
        want = expected(fields, qi, ranker, kw.get("limit", 10), kw.get("offset", 0))
        assert [h["id"] for h in got] == [pk for pk, _ in want]
        assert np.allclose([h["distance"] for h in got], [s for _, s in want], atol=1e-5)


def test_hybrid_search_fuses_the_searches_of_several_fields_as_milvus_ranks(
    open_client: ClientFactory,
):
    client = open_client()
    create(client)
    client.insert("mv", rows(0, ROWS // 2))
    client.flush("mv")  # sealed and indexed per field, the rest growing
    client.insert("mv", rows(ROWS // 2))
    wait_indexed(client)
    two, three = ["text", "image"], list(FIELDS)
    assert_fused(client, two, RRFRanker(), limit=6)
    assert_fused(client, two, RRFRanker(10), limit=4, offset=2)
    assert_fused(client, two, WeightedRanker(0.3, 0.7), limit=7)
    assert_fused(client, three, WeightedRanker(0.2, 0.5, 0.3), limit=10)
    assert_fused(client, ["audio"], RRFRanker(), limit=3)
    (hits,) = client.hybrid_search(
        "mv", reqs(two, expr="n == 2"), RRFRanker(), limit=3, output_fields=["n", "image"]
    )
    keep = np.arange(2, ROWS, 7)
    want = expected(two, 0, RRFRanker(), 3, keep=keep)
    assert [h["id"] for h in hits] == [pk for pk, _ in want]
    for h in hits:
        assert h["entity"]["n"] == 2 and np.allclose(h["entity"]["image"], data()["image"][h["id"]])
    client.close()
    again = open_client()
    assert_fused(again, two, WeightedRanker(0.3, 0.7), limit=7)  # restored from binlogs


def test_pymilvus_request_and_ranker_classes_are_accepted(client: Client):
    pymilvus = pytest.importorskip("pymilvus")
    create(client)
    client.insert("mv", rows())
    q = [pymilvus.AnnSearchRequest([data()[f][ROWS].tolist()], f, {}, K) for f in ("text", "image")]
    ours = client.hybrid_search("mv", reqs(["text", "image"]), WeightedRanker(0.5, 0.5))
    assert client.hybrid_search("mv", q, pymilvus.WeightedRanker(0.5, 0.5)) == ours


BAD = [
    ([], RRFRanker(), "minimum of ann search requests is 1"),
    (
        ["text", "nope"],
        RRFRanker(),
        r"failed to get field schema by name: fieldName\(nope\) not found",
    ),
    (
        ["text", "image"],
        WeightedRanker(0.2, 0.4, 0.8),
        r"the length of weights param mismatch with ann search requests: "
        r"invalid parameter\[expected=2\]\[actual=3\]",
    ),
    (["text", "image"], WeightedRanker(0.2, 1.5), r"rank param weight should be in range \[0, 1\]"),
    (["text"], RRFRanker(0), r"The rank params k should be in range \(0, 16384\)"),
    (["text"], RRFRanker(16384), r"The rank params k should be in range \(0, 16384\)"),
    (["text"], {"strategy": "max", "params": {}}, "unsupported rank type max"),
]


def test_bad_hybrid_searches_are_refused_with_milvus_messages(client: Client):
    create(client)
    client.insert("mv", rows(0, 10))
    for fields, ranker, message in BAD:
        requests = [
            AnnSearchRequest([data().get(f, data()["text"])[ROWS].tolist()], f, {}, K)
            for f in fields
        ]
        with pytest.raises(InvalidArgument, match=message):
            client.hybrid_search("mv", requests, ranker)
    text = reqs(["text"])
    with pytest.raises(InvalidArgument, match=r"topk \[0\] is invalid"):  # Milvus's words
        client.hybrid_search("mv", text, RRFRanker(), limit=0)
    two = [AnnSearchRequest([data()["image"][ROWS].tolist()] * 2, "image", {}, K), *text]
    with pytest.raises(InvalidArgument, match="same number of query vectors"):
        client.hybrid_search("mv", two, RRFRanker())


def merged_groups(
    client: Client, fields: list[str], qi: int, size: int, limit: int, offset: int = 0
) -> list[tuple[int, float, int]]:
    """(id, RRF score, group) of a grouped hybrid search, by Milvus's merge (reScorer's
    rankSearchResultDataByGroup) of each field's own grouping search, computed here."""
    scores: dict[int, float] = {}
    group: dict[int, int] = {}
    for f in fields:
        (hits,) = client.search(
            "mv",
            [data()[f][ROWS + qi].tolist()],
            limit=K,
            anns_field=f,
            output_fields=["n"],
            group_by_field="n",
            group_size=size,
            search_params={"params": {"ef": 64}},
        )
        for rank, h in enumerate(hits):
            scores[h["id"]] = scores.get(h["id"], 0.0) + 1 / (60 + rank + 1)
            group[h["id"]] = h["entity"]["n"]
    buckets: dict[int, list[int]] = {}
    for pk in sorted(scores, key=lambda pk: (-round(scores[pk], 6), pk)):
        members = buckets.setdefault(group[pk], [])
        if len(members) < size:
            members.append(pk)
    ranked = sorted(
        buckets.values(), key=lambda m: (-round(max(scores[p] for p in m), 6), -len(m), m[0])
    )
    return [(pk, scores[pk], group[pk]) for m in ranked[offset : offset + limit] for pk in m]


def test_hybrid_search_groups_its_fused_hits_as_milvus_merges_them(client: Client):
    create(client)
    client.insert("mv", rows())
    two = ["text", "image"]
    for size, limit, offset in ((2, 3, 0), (3, 2, 1), (1, 4, 0)):
        for qi in range(3):
            (got,) = client.hybrid_search(
                "mv",
                reqs(two, qi),
                RRFRanker(),
                limit=limit,
                offset=offset,
                output_fields=["n"],
                group_by_field="n",
                group_size=size,
            )
            want = merged_groups(client, two, qi, size, limit, offset)
            assert [(h["id"], h["entity"]["n"]) for h in got] == [(pk, g) for pk, _, g in want]
            assert all(
                math.isclose(h["distance"], s, rel_tol=1e-5)
                for h, (_, s, _) in zip(got, want, strict=True)
            )
    (plain,) = client.hybrid_search("mv", reqs(two), RRFRanker(), limit=2, group_by_field="n")
    assert all(h["entity"] == {} for h in plain)  # the group field only when asked for
    with pytest.raises(InvalidArgument):
        client.hybrid_search("mv", reqs(two), RRFRanker(), group_by_field="text")
    with pytest.raises(InvalidArgument, match="group scorer"):
        client.hybrid_search(
            "mv", reqs(two), RRFRanker(), group_by_field="n", rank_group_scorer="median"
        )
