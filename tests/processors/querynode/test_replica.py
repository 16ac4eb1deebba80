"""`Replica`: the growing rows of one collection, read as of any timestamp (DESIGN.md s.6).

A row is visible at T iff it was inserted at or before T and not yet superseded at T by a
delete or a re-insert (upsert) of its key; partitions dropped at D hide their rows from D on.
Search is exact top-k, checked against a numpy brute force on each metric.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.processors.querynode import exact
from vectorlog.processors.querynode.replica import Replica
from vectorlog.schemas.columns import encode_column

DIM = 4
P1, P2 = 11, 12  # partition ids


def schema(metric: str = "L2", dim: int = DIM) -> CollectionSchema:
    return CollectionSchema(
        (
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=dim, metric_type=metric),
            FieldSchema("tag", DataType.VARCHAR, max_length=20),
            FieldSchema("n", DataType.INT64),
            FieldSchema("doc", DataType.JSON),
        )
    ).validated()


def rows_inserted(
    s: CollectionSchema,
    ids: list[int],
    vectors: Any = None,
    partition: int = P1,
    **values: list[Any],
) -> dict[str, Any]:
    """A RowsInserted body as the proxy builds it: one encoded column per field."""
    n, dim = len(ids), s.vector.dim or 0
    vecs = np.asarray(vectors if vectors is not None else [[float(i)] * dim for i in ids])
    cols = {
        "id": ids,
        "vec": vecs,
        "tag": values.get("tag", [f"t{i}" for i in ids]),
        "n": values.get("n", [i * 10 for i in ids]),
        "doc": values.get("doc", [{"i": i} for i in ids]),
    }
    return {
        "collection_id": 7,
        "partition_id": partition,
        "num_rows": n,
        "columns": [
            {
                "field_id": f.field_id,
                "field_name": f.name,
                "column": encode_column(f.dtype, cols[f.name], f.dim),
            }
            for f in s.fields
        ],
    }


def replica(metric: str = "L2") -> Replica:
    return Replica(7, schema(metric))


def ids_at(r: Replica, ts: int, partitions: list[int] | None = None) -> set[int]:
    """The keys a search at `ts` finds (k larger than the collection)."""
    (hits,) = r.search(np.zeros((1, DIM)), 1000, ts, partitions)
    return {h["id"] for h in hits}


def test_rows_are_invisible_before_their_insert_ts():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1, 2, 3]))
    r.insert(200, rows_inserted(r.schema, [4, 5]))
    assert [r.count(t) for t in (99, 100, 199, 200, 10**6)] == [0, 3, 3, 5, 5]
    assert ids_at(r, 99) == set()
    assert ids_at(r, 150) == {1, 2, 3}
    assert ids_at(r, 200) == {1, 2, 3, 4, 5}
    assert r.get([4], 150, ["n"]) == []
    assert r.get([4], 200, ["n"]) == [{"n": 40}]


def test_a_delete_hides_earlier_inserts_only_for_reads_at_or_after_it():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1, 2]))
    r.delete(300, [1, 99])  # 99 was never inserted: ignored
    assert (r.count(299), r.count(300)) == (2, 1)
    assert ids_at(r, 299) == {1, 2} and ids_at(r, 300) == {2}
    assert r.get([1], 299, ["n"]) == [{"n": 10}]
    assert r.get([1], 300, ["n"]) == []
    r.insert(400, rows_inserted(r.schema, [1], n=[11]))  # inserted after the delete
    assert ids_at(r, 350) == {2} and ids_at(r, 400) == {1, 2}
    assert r.get([1], 400, ["n"]) == [{"n": 11}]
    assert r.get([1], 200, ["n"]) == [{"n": 10}]  # time travel before the delete


def test_a_delete_in_one_partition_leaves_the_key_in_another_alone():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1], partition=P1))
    r.delete(200, [1], partition=P2)
    assert r.count(300) == 1
    r.delete(300, [1], partition=P1)
    assert (r.count(299), r.count(300)) == (1, 0)


def test_a_reinsert_supersedes_the_old_row_and_time_travel_still_sees_it():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1, 2], [[1, 0, 0, 0], [0, 1, 0, 0]], n=[1, 2]))
    r.insert(200, rows_inserted(r.schema, [1], [[0, 0, 1, 0]], n=[100]))
    assert (r.count(150), r.count(200)) == (2, 2)  # one row per key, not three
    assert r.get([1], 150, ["n", "vec"]) == [{"n": 1, "vec": [1.0, 0.0, 0.0, 0.0]}]
    assert r.get([1], 200, ["n", "vec"]) == [{"n": 100, "vec": [0.0, 0.0, 1.0, 0.0]}]
    q = np.array([[0.0, 0.0, 1.0, 0.0]])
    (new,) = r.search(q, 10, 200, output_fields=["n"])
    assert [(h["id"], h["distance"], h["entity"]) for h in new] == [
        (1, 0.0, {"n": 100}),
        (2, 2.0, {"n": 2}),
    ]
    (old,) = r.search(q, 10, 150, output_fields=["n"])
    assert sorted((h["id"], h["distance"], h["entity"]["n"]) for h in old) == [
        (1, 2.0, 1),
        (2, 2.0, 2),
    ]
    r.delete(300, [1])  # hides the newest row; the old one stays visible in its own past
    assert r.get([1], 300, ["n"]) == [] and ids_at(r, 300) == {2}
    assert r.get([1], 250, ["n"]) == [{"n": 100}]
    assert r.get([1], 150, ["n"]) == [{"n": 1}]


def test_drop_partition_hides_its_rows_from_the_drop_ts_and_discards_later_inserts():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1, 2], partition=P1))
    r.insert(100, rows_inserted(r.schema, [3], partition=P2))
    r.drop_partition(200, P1)
    assert (r.count(199), r.count(200)) == (3, 1)
    assert ids_at(r, 199, [P1]) == {1, 2} and ids_at(r, 200, [P1]) == set()
    assert ids_at(r, 250) == {3}
    r.insert(300, rows_inserted(r.schema, [4], partition=P1))  # its partition is gone
    assert r.count(300) == 1 and r.get([4], 300, ["n"]) == []
    assert r.get([1], 150, ["n"]) == [{"n": 10}]  # time travel before the drop


def test_an_insert_stamped_before_a_partition_drop_that_arrives_after_it_is_kept():
    # another pchannel's copy of the drop can be applied first: the insert is still older
    r = replica()
    r.drop_partition(200, P1)
    r.insert(150, rows_inserted(r.schema, [1, 2], partition=P1))
    assert ids_at(r, 150) == {1, 2} and r.get([1], 199, ["n"]) == [{"n": 10}]
    assert r.count(200) == 0 and ids_at(r, 200, [P1]) == set()
    r.drop_partition(210, P1)  # a later copy of the same drop moves nothing
    assert r.count(205) == 0


def test_a_dropped_collection_reads_as_before_its_drop_and_takes_nothing_after():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1, 2]))
    r.drop(200)
    assert not r.readable(200) and r.readable(199)
    r.insert(150, rows_inserted(r.schema, [3]))  # from a pchannel behind the drop
    r.insert(250, rows_inserted(r.schema, [4]))  # at or after the drop: discarded
    r.delete(260, [1])
    assert ids_at(r, 199) == {1, 2, 3} and r.get([4], 300, ["n"]) == []


def test_count_and_search_restricted_to_partitions():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1, 2], partition=P1))
    r.insert(110, rows_inserted(r.schema, [3], partition=P2))
    assert (r.count(200, [P1]), r.count(200, [P2]), r.count(200, [P1, P2])) == (2, 1, 3)
    assert r.count(200, [999]) == 0
    assert ids_at(r, 200, [P2]) == {3} and ids_at(r, 200, [P1, P2]) == {1, 2, 3}


def test_get_returns_the_requested_fields_of_each_visible_key_in_request_order():
    r = replica()
    r.insert(
        100,
        rows_inserted(
            r.schema,
            [5, 6],
            [[0.5, 1, 2, 3], [4, 5, 6, 7.25]],
            tag=["five", "six"],
            n=[-5, 2**62],
            doc=[{"a": [1, 2]}, None],
        ),
    )
    got = r.get([6, 404, 5], 100, ["doc", "tag", "n", "vec"])
    assert got == [
        {"doc": None, "tag": "six", "n": 2**62, "vec": [4.0, 5.0, 6.0, 7.25]},
        {"doc": {"a": [1, 2]}, "tag": "five", "n": -5, "vec": [0.5, 1.0, 2.0, 3.0]},
    ]
    assert r.get([5], 100, ["tag"]) == [{"tag": "five"}]
    assert r.get([5], 100, []) == [{}]


def test_cosine_returns_the_inserted_vectors_not_the_normalized_ones():
    r = replica("COSINE")
    r.insert(100, rows_inserted(r.schema, [1], [[3.0, 4.0, 0.0, 0.0]]))
    r.insert(200, rows_inserted(r.schema, [2], [[0.0, 0.0, 0.0, 2.0]]))
    assert r.get([1, 2], 200, ["vec"]) == [
        {"vec": [3.0, 4.0, 0.0, 0.0]},
        {"vec": [0.0, 0.0, 0.0, 2.0]},
    ]
    (hits,) = r.search(np.array([[6.0, 8.0, 0.0, 0.0]]), 1, 200, output_fields=["vec"])
    assert hits[0]["id"] == 1 and hits[0]["distance"] == pytest.approx(1.0)
    assert hits[0]["entity"] == {"vec": [3.0, 4.0, 0.0, 0.0]}


def test_an_insert_that_breaks_the_schema_changes_nothing():
    r = replica()
    r.insert(100, rows_inserted(r.schema, [1]))
    with pytest.raises(InvalidArgument, match="dim"):
        r.insert(200, rows_inserted(schema(dim=3), [2]))
    missing = rows_inserted(r.schema, [3])
    missing["columns"] = [c for c in missing["columns"] if c["field_name"] != "tag"]
    with pytest.raises(InvalidArgument, match="'tag'"):
        r.insert(300, missing)
    assert r.count(10**6) == 1 and ids_at(r, 10**6) == {1}


def brute_force(x: np.ndarray, q: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, distances) of the exact top-k, as the replica reports them: squared L2
    ascending; inner product (of normalized vectors for COSINE) descending."""
    x, q = x.astype(np.float64), q.astype(np.float64)
    if metric == "L2":
        d = ((x - q) ** 2).sum(1)
        order = np.argsort(d, kind="stable")[:k]
    else:
        if metric == "COSINE":
            x = x / np.linalg.norm(x, axis=1, keepdims=True)
            q = q / np.linalg.norm(q)
        d = x @ q
        order = np.argsort(-d, kind="stable")[:k]
    return order, d[order]


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_search_matches_a_brute_force_top_k_among_visible_rows(metric):
    rng = np.random.default_rng(42)
    x = rng.normal(size=(300, DIM)).astype(np.float32)
    queries = rng.normal(size=(5, DIM)).astype(np.float32)
    keys = np.arange(1000, 1300)
    r = replica(metric)
    r.insert(100, rows_inserted(r.schema, keys[:200].tolist(), x[:200]))
    r.insert(200, rows_inserted(r.schema, keys[200:].tolist(), x[200:]))
    deleted = keys[::7]
    r.delete(300, deleted.tolist())
    cases = {  # read ts -> rows visible then
        150: np.arange(200),  # the second batch is in the future
        250: np.arange(300),  # everything: the unfiltered path
        300: np.setdiff1d(np.arange(300), np.arange(0, 300, 7)),
    }
    k = 10
    for ts, rows in cases.items():
        hits = r.search(queries, k, ts)
        assert len(hits) == len(queries)
        for q, got in zip(queries, hits, strict=True):
            order, dist = brute_force(x[rows], q, k, metric)
            assert [h["id"] for h in got] == keys[rows][order].tolist(), (metric, ts)
            np.testing.assert_allclose([h["distance"] for h in got], dist, rtol=1e-4, atol=1e-4)
            assert all(h["entity"] == {} for h in got)


@pytest.mark.parametrize("chunk_rows", [1, 12, 70, 130])
@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_a_search_of_several_queries_answers_each_as_it_would_alone(
    metric, chunk_rows, monkeypatch
):
    # the proxy sends coalesced searches as one of several queries: each scanned chunk by
    # chunk (here 64 or 128 rows a chunk, whole kernel blocks on AVX2 and AVX-512 alike, the
    # last one partial), deleted rows masked: the distances bit for bit as alone
    monkeypatch.setattr(exact, "CHUNK_BYTES", chunk_rows * DIM * 4)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, DIM)).astype(np.float32)
    queries = rng.normal(size=(6, DIM)).astype(np.float32)
    r = replica(metric)
    r.insert(100, rows_inserted(r.schema, list(range(300)), x))
    r.delete(200, list(range(0, 300, 5)))
    for ts in (150, 200):
        together = r.search(queries, 10, ts)
        alone = [r.search(queries[i : i + 1], 10, ts)[0] for i in range(len(queries))]
        assert together == alone
        order, _ = brute_force(x, queries[0], 10, metric)
        if ts == 150:
            assert [h["id"] for h in together[0]] == order.tolist()


def test_search_returns_fewer_than_k_hits_when_fewer_rows_are_visible():
    r = replica()
    assert r.search(np.zeros((2, DIM)), 5, 100) == [[], []]
    r.insert(100, rows_inserted(r.schema, [1, 2, 3]))
    r.delete(200, [2])
    (hits,) = r.search(np.zeros((1, DIM)), 5, 200)
    assert [h["id"] for h in hits] == [1, 3]
