"""Filtered searches through `vectorlog.Client` (issue 28), on both log backends: a filter over
an indexed collection with growing rows after the index, deletes and upserts returns the ids
brute force returns over the visible rows that match, each time the data changes (the filter
results a query node keeps per segment follow inserts, deletes and upserts); a filter too
unselective for an exact scan still returns only rows that match and are not deleted; each
branch of the choice between an exact scan of the selected rows and the index searched with
the filter's bitmap (filterplan.py), forced in turn, returns brute force's ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.processors.querynode.index_support import forced_branch
from tests.support import wait_until
from vectorlog import Client, DataType


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


DIM, SEALED, K = 8, 3000, 10
PKS = list(range(5, SEALED + 500, 37))  # a primary key filter: selected per search
FILTERS = {
    "tag == 3": lambda tag, pk: tag == 3,
    "tag < 6": lambda tag, pk: tag < 6,
    "tag < 9": lambda tag, pk: tag < 9,
    "tag in [1, 2] and id > 400": lambda tag, pk: np.isin(tag, [1, 2]) & (pk > 400),
    f"id in {PKS}": lambda tag, pk: np.isin(pk, PKS),
}


class Truth:
    """The rows the collection holds (pk -> (tag, vector)), searched by brute force."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, np.ndarray]] = {}
        self.rng = np.random.default_rng(28)

    def new_rows(self, pks: range, tag_of: Any) -> list[dict[str, Any]]:
        """Returns rows for `pks` (random vectors, tag `tag_of(pk)`), recorded as held."""
        out = []
        for pk in pks:
            v = self.rng.standard_normal(DIM).astype(np.float32)
            self.rows[pk] = (int(tag_of(pk)), v)
            out.append({"id": pk, "vector": v.tolist(), "tag": int(tag_of(pk))})
        return out

    def nearest(self, q: np.ndarray, expr: str) -> list[int]:
        """Returns the K ids of the matching rows nearest to `q` by cosine similarity."""
        pks = np.array(sorted(self.rows))
        tags = np.array([self.rows[p][0] for p in pks])
        x = np.array([self.rows[p][1] for p in pks], dtype=np.float64)
        keep = FILTERS[expr](tags, pks)
        x, pks = x[keep], pks[keep]
        sim = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
        return pks[np.argsort(-sim, kind="stable")[:K]].tolist()


def indexed_collection(client: Client, truth: Truth, index: str, **params: Any) -> None:
    """Creates "f" with a COSINE `index`, SEALED flushed rows (tag = id % 10), and waits
    until the index is built."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    s.add_field("tag", DataType.INT64)
    ip = client.prepare_index_params()
    ip.add_index("vector", index_type=index, metric_type="COSINE", params=params)
    client.create_collection("f", schema=s, index_params=ip)
    client.insert("f", truth.new_rows(range(SEALED), lambda pk: pk % 10))
    client.flush("f")

    def built() -> bool:
        d = client.describe_index("f", "vector")
        return d["state"] == "Finished" and d["indexed_rows"] == SEALED

    wait_until(built, 60, "the index built on the flushed segment")


def assert_brute_force(client: Client, truth: Truth, **params: Any) -> None:
    """Asserts every filter's top K equals brute force for 5 queries (search `params`)."""
    queries = truth.rng.standard_normal((5, DIM)).astype(np.float32)
    for expr in FILTERS:
        for q in queries:
            (hits,) = client.search(
                "f", [q.tolist()], filter=expr, limit=K, search_params={"params": params}
            )
            assert [h["id"] for h in hits] == truth.nearest(q, expr), expr


def change(client: Client, truth: Truth) -> None:
    """Inserts growing rows, deletes some rows and upserts others (with another tag)."""
    client.insert("f", truth.new_rows(range(SEALED, SEALED + 500), lambda pk: pk % 10))
    gone = list(range(3, SEALED + 500, 7))
    client.delete("f", ids=gone)
    for pk in gone:
        truth.rows.pop(pk, None)
    client.upsert("f", truth.new_rows(range(0, SEALED, 11), lambda pk: (pk + 3) % 10))


def test_filtered_search_of_an_hnsw_index_equals_brute_force(client: Client):
    truth = Truth()
    indexed_collection(client, truth, "HNSW", M=8, efConstruction=64)
    assert_brute_force(client, truth)
    change(client, truth)
    assert_brute_force(client, truth)
    change(client, truth)  # deletes of already deleted keys, more growing rows
    assert_brute_force(client, truth)


@pytest.mark.parametrize("branch", ["exact", "compressed", "index", "chosen"])
def test_each_branch_of_a_filtered_search_equals_brute_force(client: Client, monkeypatch, branch):
    """Each way a filtered search of an indexed segment can go returns brute force's ids:
    forced to the exact scan of the selected rows, to the scan of their compressed copy with
    an exact rerank, to the index with the filter's bitmap (ef 4,096: over 3,000 rows the
    graph walk reaches every row), and as the shipped thresholds choose (on segments this
    small: the exact scan)."""
    chosen = forced_branch(monkeypatch, branch)
    truth = Truth()
    indexed_collection(client, truth, "HNSW", M=8, efConstruction=64)
    change(client, truth)
    assert_brute_force(client, truth, ef=4096)
    ran = set(chosen) - {"exact"} if branch == "compressed" else set(chosen)
    assert ran == {"exact" if branch == "chosen" else branch}


def test_filtered_search_of_a_flat_index_equals_brute_force(client: Client):
    truth = Truth()
    indexed_collection(client, truth, "FLAT")
    change(client, truth)
    assert_brute_force(client, truth)


def test_an_unselective_filter_returns_only_matching_live_rows(client: Client):
    """`tag < 9` keeps 90 %: at ef 10 the HNSW index is searched with the filter's bitmap
    (no exact scan); every hit matches and none is deleted, recall stays high."""
    truth = Truth()
    indexed_collection(client, truth, "HNSW", M=8, efConstruction=64)
    change(client, truth)
    queries = truth.rng.standard_normal((20, DIM)).astype(np.float32)
    found = 0
    for q in queries:
        (hits,) = client.search(
            "f", [q.tolist()], filter="tag < 9", limit=K, search_params={"params": {"ef": 10}}
        )
        ids = [h["id"] for h in hits]
        assert len(ids) == K and all(pk in truth.rows and truth.rows[pk][0] < 9 for pk in ids)
        found += len(set(ids) & set(truth.nearest(q, "tag < 9")))
    assert found / (K * len(queries)) >= 0.8
