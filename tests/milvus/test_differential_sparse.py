"""Differential test of SPARSE_FLOAT_VECTOR (issue 27): the same MilvusClient calls on vectorlog
and on Milvus Lite (test_differential.py's pair: vectorlog in-process and over gRPC, both log
backends, and a process cluster in `make test-all`), on growing rows and after a flush with
the sparse inverted index."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.milvus import test_differential
from tests.milvus.test_differential import (
    Diffs,
    Pair,
    close_rows,
    each,
    eq,
    hits,
    rows,
    same_hits,
)

pymilvus = pytest.importorskip("pymilvus")
pair = test_differential.pair  # the fixture: Milvus Lite and vectorlog side by side

ROWS, DIMS, NNZ, QUERIES = 200, 300, 10, 4


def sparse_rows() -> tuple[list[dict[str, Any]], list[dict[int, float]]]:
    """ROWS rows {id, n, sv} and QUERIES queries, NNZ distinct dims each, seeded (values
    rounded to float32 so both sides hold the same numbers)."""
    rng = np.random.default_rng(270)

    def one() -> dict[int, float]:
        dims = rng.choice(DIMS, NNZ, replace=False).tolist()
        values = (rng.random(NNZ) + 0.05).astype(np.float32).tolist()
        return dict(zip(dims, values, strict=True))

    data = [{"id": i, "n": i % 5, "sv": one()} for i in range(ROWS)]
    return data, [one() for _ in range(QUERIES)]


def create(pair: Pair, name: str, kind: str) -> None:
    T = pymilvus.DataType
    for client, t in ((pair.lite, T), (pair.ours, pair.types)):
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", t.INT64, is_primary=True)
        s.add_field("n", t.INT64)
        s.add_field("sv", t.SPARSE_FLOAT_VECTOR)
        index = client.prepare_index_params()
        index.add_index("sv", index_type=kind, metric_type="IP")
        client.create_collection(name, schema=s, index_params=index)


def dicts(res: Any) -> Any:
    """Rows with their sparse vectors as plain {int: float} dicts."""
    return [{**r, "sv": {int(k): float(v) for k, v in r["sv"].items()}} for r in rows(res)]


def test_sparse_vectors(pair: Pair) -> None:
    """SPARSE_INVERTED_INDEX only: milvus-lite 3.2.2 refuses SPARSE_WAND (vectorlog builds
    both: tests/vectorlog/test_sparse.py)."""
    d = Diffs()
    data, queries = sparse_rows()
    create(pair, "sparse", "SPARSE_INVERTED_INDEX")
    got = pair.run("insert", "sparse", data)
    d.check("sparse.insert_count", each(lambda r: r["insert_count"], got), eq)
    for stage in ("growing", "flushed"):
        got = pair.both("search", "sparse", queries, limit=10, anns_field="sv", output_fields=["n"])
        d.check(f"sparse.search.{stage}", each(hits, got), same_hits)
        got = pair.both(
            "search",
            "sparse",
            queries,
            limit=5,
            filter="n == 2",
            output_fields=["sv"],
            anns_field="sv",
        )
        d.check(f"sparse.search_filtered.{stage}", each(hits, got), same_hits)
        got = pair.both("query", "sparse", filter="id < 20", output_fields=["sv", "n"])
        d.check(f"sparse.query.{stage}", each(dicts, got), close_rows)
        if stage == "growing":
            pair.run("flush", "sparse")
    pair.run("delete", "sparse", ids=[1, 2])
    got = pair.both("search", "sparse", queries, limit=10, anns_field="sv", output_fields=["n"])
    d.check("sparse.search.deleted", each(hits, got), same_hits)
    bad = [{"id": 999, "n": 0, "sv": [(3, 1.0), (3, 2.0)]}]
    got = pair.both("insert", "sparse", bad)
    d.check("sparse.insert_duplicate.refused", got, eq, "sparse.insert_duplicate")
    d.assert_none()


def test_sparse_range_and_group_by_search(pair: Pair) -> None:
    """Range search (IP: radius < score <= range_filter) and group_by on a sparse field, on
    growing rows and on Flushed segments served by the inverted index."""
    d = Diffs()
    data, queries = sparse_rows()
    create(pair, "ranged", "SPARSE_INVERTED_INDEX")
    pair.run("insert", "ranged", data)
    ranges = ({"radius": 0.3}, {"radius": 0.3, "range_filter": 1.2})
    for stage in ("growing", "flushed"):
        for i, params in enumerate(ranges):
            got = pair.both(
                "search",
                "ranged",
                queries,
                limit=100,
                anns_field="sv",
                output_fields=["n"],
                search_params={"metric_type": "IP", "params": params},
            )
            d.check(f"sparse.range{i}.{stage}", each(hits, got), same_hits)
        for size in (1, 2):
            got = pair.both(
                "search",
                "ranged",
                queries,
                limit=3,
                anns_field="sv",
                group_by_field="n",
                group_size=size,
                output_fields=["n"],
            )
            d.check(f"sparse.group_by{size}.{stage}", each(hits, got), same_hits)
        if stage == "growing":
            pair.run("flush", "ranged")
    d.assert_none()
