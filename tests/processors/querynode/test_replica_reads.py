"""`Replica` reads with filters (issue 8): query in primary-key order with paging, count,
filtered search (checked against a numpy brute force over the matching rows), offset and
group-by, over scalar columns (numbers in numpy, strings in Arrow, JSON decoded once).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.processors.querynode.test_replica import (
    DIM,
    P1,
    P2,
    brute_force,
    replica,
    rows_inserted,
    schema,
)
from vectorlog.expr import Expr, parse
from vectorlog.processors.querynode.replica import Replica

N = 300


def expr(text: str, params: dict[str, Any] | None = None) -> Expr:
    return parse(text, schema(), params)


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    keys = rng.permutation(np.arange(1000, 1000 + N))  # inserted out of key order
    return {
        "keys": keys,
        "x": rng.normal(size=(N, DIM)).astype(np.float32),
        "tag": [f"t{k % 7}" for k in keys],
        "n": (keys % 10).tolist(),
        "doc": [{"k": int(k), "even": bool(k % 2 == 0)} for k in keys],
    }


def loaded(d: dict[str, Any], metric: str = "L2") -> Replica:
    """A replica with the rows in two batches (two partitions); keys 1000..1009 deleted."""
    r = replica(metric)
    half = N // 2
    for lo, hi, part, ts in ((0, half, P1, 100), (half, N, P2, 110)):
        r.insert(
            ts,
            rows_inserted(
                r.schema,
                d["keys"][lo:hi].tolist(),
                d["x"][lo:hi],
                part,
                tag=d["tag"][lo:hi],
                n=d["n"][lo:hi],
                doc=d["doc"][lo:hi],
            ),
        )
    r.delete(120, list(range(1000, 1010)))
    return r


def matching(d: dict[str, Any], keep: Any) -> np.ndarray:
    """Rows (indices into the data) alive at ts >= 120 for which keep(i) holds."""
    return np.array([i for i in range(N) if d["keys"][i] >= 1010 and keep(i)], dtype=np.int64)


def test_query_returns_matching_rows_in_key_order_paged(data):
    r = loaded(data)
    rows = matching(data, lambda i: data["n"][i] >= 5 and data["tag"][i] != "t3")
    want = sorted(data["keys"][rows].tolist())
    got = r.query(200, ["id", "n"], expr=expr('n >= 5 and tag != "t3"'))
    assert [g["id"] for g in got] == want
    assert all(g["n"] >= 5 and set(g) == {"id", "n"} for g in got)
    page = r.query(200, ["id"], expr=expr("n >= 5 and tag != 't3'"), limit=7, offset=5)
    assert [g["id"] for g in page] == want[5:12]
    assert r.count(200, expr=expr('n >= 5 and tag != "t3"')) == len(want)


def test_query_sees_the_ts_partitions_and_keys(data):
    r = loaded(data)
    everything = r.query(115, ["id"], expr=expr("n >= 0"))
    assert len(everything) == N  # before the delete
    assert r.count(200, [P2], expr=expr("n >= 0")) == len(matching(data, lambda i: i >= N // 2))
    picked = [int(k) for k in data["keys"][:5]] + [1003, 99]  # 1003 was deleted, 99 never was
    got = r.query(200, ["id"], keys=picked)
    assert [g["id"] for g in got] == sorted(k for k in picked[:5] if k >= 1010)
    assert r.count(200, expr=expr(f"id in {picked}")) == len(got)  # the key path
    first_batch = set(data["keys"][: N // 2].tolist())  # all that is visible at 105
    assert r.count(105, expr=expr(f"id in {picked}")) == len(first_batch & set(picked))
    assert r.count(200, expr=expr(f"id in {picked} and n >= 5")) == len(
        [g for g in got if data["n"][data["keys"].tolist().index(g["id"])] >= 5]
    )


def test_json_is_decoded_once_and_handed_out_as_copies(data):
    r = loaded(data)
    key = int(data["keys"][-1])
    (row,) = r.query(200, ["doc"], keys=[key])
    assert row["doc"] == {"k": key, "even": key % 2 == 0}
    row["doc"]["k"] = -1  # the caller's copy
    assert r.get([key], 200, ["doc"]) == [{"doc": {"k": key, "even": key % 2 == 0}}]
    assert r.count(200, expr=expr('doc["even"] == true')) == len(
        matching(data, lambda i: data["keys"][i] % 2 == 0)
    )


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_filtered_search_equals_a_brute_force_over_the_matching_rows(data, metric):
    r = loaded(data, metric)
    queries = np.random.default_rng(3).normal(size=(4, DIM)).astype(np.float32)
    text = "n in [1, 2, 3] or tag like 't6%'"
    rows = matching(data, lambda i: data["n"][i] in (1, 2, 3) or data["tag"][i] == "t6")
    hits = r.search(queries, 10, 200, output_fields=["n", "tag"], expr=expr(text))
    for q, got in zip(queries, hits, strict=True):
        order, dist = brute_force(data["x"][rows], q, 10, metric)
        assert [h["id"] for h in got] == data["keys"][rows][order].tolist()
        np.testing.assert_allclose([h["distance"] for h in got], dist, rtol=1e-4, atol=1e-4)
        assert all(h["entity"]["n"] in (1, 2, 3) or h["entity"]["tag"] == "t6" for h in got)


def test_search_offset_skips_the_first_hits(data):
    r = loaded(data)
    q = data["x"][:2] + 0.1
    full = r.search(q, 15, 200)
    skipped = r.search(q, 10, 200, offset=5)
    assert [[h["id"] for h in s] for s in skipped] == [[h["id"] for h in f[5:]] for f in full]
    assert r.search(q, 5, 200, expr=expr("n == 99")) == [[], []]


@pytest.mark.parametrize("field", ["tag", "n"])
def test_group_by_returns_the_best_hit_of_each_group(data, field):
    r = loaded(data)
    q = data["x"][10:12] - 0.2
    rows = matching(data, lambda i: True)
    values = np.array(data[field], dtype=object)[rows]
    for limit, offset in ((3, 0), (20, 0), (2, 3)):
        hits = r.search(q, limit, 200, output_fields=[field], group_by=field, offset=offset)
        for qv, got in zip(q, hits, strict=True):
            order, dist = brute_force(data["x"][rows], qv, len(rows), "L2")
            first: dict[Any, int] = {}
            for i in order:
                first.setdefault(values[i], int(i))
            best = list(first.values())[offset : offset + limit]
            assert [h["id"] for h in got] == data["keys"][rows][best].tolist()
            assert len({h["entity"][field] for h in got}) == len(got)


def test_an_empty_replica_answers_every_read():
    r = replica()
    assert r.query(10, ["id", "tag"], expr=expr("tag == 'x'")) == []
    assert r.count(10, expr=expr("n > 1")) == 0
    assert r.search(np.zeros((1, DIM)), 3, 10, expr=expr("n > 1"), group_by="tag") == [[]]
