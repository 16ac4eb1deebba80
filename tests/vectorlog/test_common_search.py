"""The common search (issue 28: one query vector per call, no filter, output fields or
partitions, read at Strong, Bounded or Eventually) answered in one call through
`vectorlog.Client` on both log backends: the same call, repeated, returns exactly what an
exact numpy search of the rows visible then returns, across shards, sealed and growing
segments, deletes after load, each metric, index changes, drop and recreate, release and
load, and compaction. Exact searches (no index, FLAT) make the oracle exact."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument, VectorlogError

DIM = 8
K = 5


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def create(client: Client, name: str, metric: str, shards: int = 1, index: str = "") -> None:
    """Creates `name` (int64 key, DIM-dim float vectors of `metric`), with `index` (FLAT,
    IVF_FLAT) or none (exact search of every segment)."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    params = None
    if index:
        params = client.prepare_index_params()
        knobs = {"nlist": 4} if index == "IVF_FLAT" else {}
        params.add_index("vector", index_type=index, metric_type=metric, params=knobs)
    client.create_collection(
        name, schema=s, metric_type=metric, num_shards=shards, index_params=params
    )


def insert(client: Client, name: str, ids: range, seed: int) -> dict[int, np.ndarray]:
    """Inserts rows `ids` with random vectors; returns them by id."""
    v = np.random.default_rng(seed).normal(size=(len(ids), DIM)).astype(np.float32)
    client.insert(name, [{"id": i, "vector": v[n].tolist()} for n, i in enumerate(ids)])
    return dict(zip(ids, v, strict=True))


def oracle(rows: dict[int, np.ndarray], q: np.ndarray, metric: str) -> list[int]:
    """Returns the ids of the exact top K of `rows` for `q` under `metric`."""
    ids = np.array(list(rows), np.int64)
    v = np.stack(list(rows.values()))
    if metric == "L2":
        score = ((v - q) ** 2).sum(axis=1)
    elif metric == "IP":
        score = -(v @ q)
    else:
        score = -(v @ q) / np.linalg.norm(v, axis=1) / np.linalg.norm(q)
    return ids[np.argsort(score, kind="stable")[:K]].tolist()


def hits(client: Client, name: str, q: np.ndarray, level: str = "Strong", **kw: Any) -> list[int]:
    """Returns the ids one common search finds; at Strong, after checking that a repeat of
    the same call (the one its first call prepares) finds the same."""
    args: dict[str, Any] = {"limit": K, "consistency_level": level, **kw}
    first = [h["id"] for h in client.search(name, [q], **args)[0]]
    if level == "Strong":
        again = [h["id"] for h in client.search(name, [q], **args)[0]]
        assert again == first
    return first


def queries(n: int = 6) -> np.ndarray:
    return np.random.default_rng(99).normal(size=(n, DIM)).astype(np.float32)


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_shards_segments_growing_rows_and_deletes_after_load(client: Client, metric: str):
    create(client, "c", metric, shards=2)
    rows = insert(client, "c", range(0, 60), 1)
    client.flush("c")
    rows |= insert(client, "c", range(60, 120), 2)
    client.flush("c")
    rows |= insert(client, "c", range(120, 150), 3)  # growing
    for q in queries():
        assert hits(client, "c", q) == oracle(rows, q, metric)
    nearest = {i for q in queries() for i in oracle(rows, q, metric)}
    client.delete("c", ids=sorted(nearest))
    rows = {i: v for i, v in rows.items() if i not in nearest}
    for q in queries():
        assert hits(client, "c", q) == oracle(rows, q, metric)


def test_bounded_and_eventually_see_a_delete_once_applied(client: Client):
    create(client, "c", "L2")
    rows = insert(client, "c", range(40), 4)
    q = queries(1)[0]
    top = oracle(rows, q, "L2")
    wait_until(lambda: hits(client, "c", q, "Bounded") == top, 20, "the rows at Bounded")
    client.delete("c", ids=top[:2])
    rows = {i: v for i, v in rows.items() if i not in top[:2]}
    want = oracle(rows, q, "L2")
    for level in ("Bounded", "Eventually"):

        def deleted(lv: str = level) -> bool:
            return hits(client, "c", q, lv) == want

        wait_until(deleted, 20, f"the delete, {level}")


def test_an_upsert_moves_a_row(client: Client):
    create(client, "c", "L2")
    rows = insert(client, "c", range(30), 5)
    q = queries(1)[0]
    assert hits(client, "c", q) == oracle(rows, q, "L2")
    far = oracle(rows, -q, "L2")[0]
    client.upsert("c", [{"id": far, "vector": q.tolist()}])
    rows[far] = q
    assert hits(client, "c", q) == oracle(rows, q, "L2") and oracle(rows, q, "L2")[0] == far


def test_a_new_index_metric_is_searched_by_the_same_call(client: Client):
    create(client, "c", "L2", index="FLAT")
    rows = insert(client, "c", range(50), 6)
    client.flush("c")
    q = queries(1)[0] * 3
    knobs = {"params": {"nprobe": 4}}  # the same call before and after: no metric named
    assert hits(client, "c", q, search_params=knobs) == oracle(rows, q, "L2")
    client.release_collection("c")
    client.drop_index("c", "vector")
    params = client.prepare_index_params()
    params.add_index("vector", index_type="IVF_FLAT", metric_type="IP", params={"nlist": 4})
    client.create_index("c", params)
    client.load_collection("c")
    want = oracle(rows, q, "IP")

    def bounded() -> bool:  # first: a read that never waits (until the node has the index)
        try:
            return hits(client, "c", q, "Bounded", search_params=knobs) == want
        except InvalidArgument:  # the node still serving the L2 index at its tsafe
            return False

    wait_until(bounded, 20, "the IP index searched at Bounded")
    assert hits(client, "c", q, search_params=knobs) == want


def test_a_dropped_index_leaves_the_same_answers(client: Client):
    create(client, "c", "COSINE", index="IVF_FLAT")
    rows = insert(client, "c", range(50), 7)
    client.flush("c")
    knobs = {"params": {"nprobe": 4}}
    for q in queries(3):
        assert hits(client, "c", q, search_params=knobs) == oracle(rows, q, "COSINE")
    client.release_collection("c")
    client.drop_index("c", "vector")
    client.load_collection("c")
    for q in queries(3):
        assert hits(client, "c", q, search_params=knobs) == oracle(rows, q, "COSINE")


def test_a_recreated_collection_of_the_same_name(client: Client):
    create(client, "c", "L2")
    rows = insert(client, "c", range(40), 8)
    q = queries(1)[0]
    assert hits(client, "c", q) == oracle(rows, q, "L2")
    client.drop_collection("c")
    create(client, "c", "IP")
    rows = insert(client, "c", range(1000, 1040), 9)
    assert hits(client, "c", q) == oracle(rows, q, "IP")


def test_release_then_load(client: Client):
    create(client, "c", "L2")
    rows = insert(client, "c", range(40), 10)
    client.flush("c")
    q = queries(1)[0]
    assert hits(client, "c", q) == oracle(rows, q, "L2")
    client.release_collection("c")
    rows |= insert(client, "c", range(40, 60), 11)  # applied while released
    client.load_collection("c")
    assert hits(client, "c", q) == oracle(rows, q, "L2")


def test_compaction_keeps_the_answers(client: Client):
    create(client, "c", "L2", shards=2)
    rows: dict[int, np.ndarray] = {}
    for part in range(3):
        rows |= insert(client, "c", range(part * 30, part * 30 + 30), 20 + part)
        client.flush("c")
    qs = queries()
    gone = sorted({oracle(rows, q, "L2")[0] for q in qs})
    client.delete("c", ids=gone)
    rows = {i: v for i, v in rows.items() if i not in gone}
    for q in qs:
        assert hits(client, "c", q) == oracle(rows, q, "L2")
    assert client.get_compaction_state(client.compact("c", wait=True)) == "Completed"
    for q in qs:
        assert hits(client, "c", q) == oracle(rows, q, "L2")


def test_limit_and_params_are_each_their_own_call(client: Client):
    create(client, "c", "L2")
    rows = insert(client, "c", range(40), 12)
    q = queries(1)[0]
    for limit in (1, 3, 10, 1):
        args: dict[str, Any] = {"limit": limit, "consistency_level": "Strong"}
        found = [h["id"] for h in client.search("c", [q], **args)[0]]
        assert found == [int(i) for i in oracle_all(rows, q)[:limit]]


def oracle_all(rows: dict[int, np.ndarray], q: np.ndarray) -> list[int]:
    ids = np.array(list(rows), np.int64)
    d = ((np.stack(list(rows.values())) - q) ** 2).sum(axis=1)
    return ids[np.argsort(d, kind="stable")].tolist()


def test_a_refused_query_vector_is_refused_on_every_call(client: Client):
    create(client, "c", "L2")
    insert(client, "c", range(10), 13)
    q = queries(1)[0]
    hits(client, "c", q)
    bad = q.copy()
    bad[0] = np.nan
    for _ in range(2):
        with pytest.raises(VectorlogError, match="NaN"):
            client.search("c", [bad], limit=K, consistency_level="Strong")
    with pytest.raises(VectorlogError, match="dim|dimension"):
        client.search("c", [q[:4]], limit=K, consistency_level="Strong")
