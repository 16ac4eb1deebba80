"""Merging query nodes' answers (processors.proxy.merge): the merge of the shares equals the
answer over all rows, for top-k with offsets, both metric orders, groups, rows by key and
gets in key order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from vectorlog.core.results import SearchResult
from vectorlog.core.types import Hit
from vectorlog.processors.proxy.merge import (
    merge_hits,
    merge_results,
    merge_rows,
    rows_in_key_order,
    widened,
)


def hit(pk: int, d: float, **entity: object) -> Hit:
    return {"id": pk, "distance": d, "entity": dict(entity)}


def nearest(hits: list[Hit], k: int, larger: bool) -> list[Hit]:
    return sorted(hits, key=lambda h: (-h["distance"] if larger else h["distance"], h["id"]))[:k]


def test_the_top_k_of_the_shares_is_the_top_k_of_all_rows_with_an_offset():
    rng = random.Random(7)
    rows = [hit(i, rng.random()) for i in range(200)]
    for metric, larger in (("L2", False), ("IP", True), ("COSINE", True)):
        shares = [[r for r in rows if r["id"] % 3 == s] for s in range(3)]
        wide, zero = widened(10, 5)
        answers = [[nearest(share, wide or 0, larger)] for share in shares]  # one query each
        merged = merge_hits(answers, 10, 5, metric)
        assert zero == 0
        assert merged == [nearest(rows, 15, larger)[5:]]


def test_grouped_hits_merge_per_group_and_rank_groups_by_their_best_hit():
    shares = [
        [[hit(1, 0.1, g="x"), hit(3, 0.4, g="y"), hit(5, 0.5, g="x")]],
        [[hit(2, 0.2, g="x"), hit(4, 0.3, g="z"), hit(6, 0.6, g="y")]],
    ]
    merged = merge_hits(shares, limit=2, offset=0, metric="L2", group_by="g", group_size=2)
    assert [h["id"] for h in merged[0]] == [1, 2, 4]  # group x (1, 2), then z (4)
    skipped = merge_hits(shares, limit=1, offset=1, metric="L2", group_by="g", group_size=2)
    assert [h["id"] for h in skipped[0]] == [4]


def test_rows_merge_in_key_order_and_gets_keep_the_order_asked():
    a = [{"id": 1}, {"id": 4}, {"id": 9}]
    b = [{"id": 2}, {"id": 3}, {"id": 10}]
    assert [r["id"] for r in merge_rows([a, b], "id", 3, 1)] == [2, 3, 4]
    assert [r["id"] for r in merge_rows([a, b], "id", None, 0)] == [1, 2, 3, 4, 9, 10]
    got = rows_in_key_order([[{"id": 1}, {"id": 9}], [{"id": 3}, {"id": 10}]], "id", [10, 1, 3, 9])
    assert [r["id"] for r in got] == [10, 1, 3, 9]


def result(hits: list[list[Hit]], fields: list[str]) -> SearchResult:
    """The shares as a query node sends them: arrays, the entities' fields as columns."""
    flat = [h for q in hits for h in q]
    return SearchResult(
        np.asarray([h["id"] for h in flat], np.int64),
        np.asarray([h["distance"] for h in flat], np.float32),
        np.cumsum([0, *map(len, hits)], dtype=np.int64),
        {f: [h["entity"][f] for h in flat] for f in fields},
    )


@pytest.mark.parametrize("nq", [1, 2, 3])  # one query takes a shorter way
def test_array_shares_merge_as_their_hits_do_ties_broken_by_key(nq: int) -> None:
    rng = random.Random(11)
    rows = [hit(i, float(rng.randrange(20)), tag=f"t{i}") for i in range(120)]  # many ties
    for metric, larger in (("L2", False), ("IP", True)):
        shares = [
            [
                nearest([r for r in rows if r["id"] % 4 == s and r["id"] % nq == q], 12, larger)
                for q in range(nq)
            ]
            for s in range(4)
        ]
        for limit, offset in ((10, 0), (5, 3), (30, 0)):
            want = merge_hits(shares, limit, offset, metric)
            got = merge_results([result(s, ["tag"]) for s in shares], limit, offset, metric)
            assert got.hits() == [
                [{**h, "distance": pytest.approx(h["distance"])} for h in q] for q in want
            ]
            assert got.topks() == [len(q) for q in want]


def test_a_merge_of_no_hits_keeps_every_query():
    empty = SearchResult.empty(3)
    got = merge_results([empty, empty], 10, 0, "COSINE")
    assert got.hits() == [[], [], []]
