"""SPARSE_FLOAT_VECTOR fields through `vectorlog.Client` on both log backends (issue 27): every
insert form pymilvus takes, exact inner-product search on growing rows, the inverted index of
Flushed segments (drop ratios honoured), restarts from the binlogs, deletes and compaction,
and bad rows refused with Milvus's messages before anything is written."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


ROWS, DIMS, NNZ, K = 300, 400, 12, 5


def matrix() -> sp.csr_array:
    """ROWS rows then 3 queries, NNZ distinct dims each, seeded positive values."""
    rng = np.random.default_rng(27)
    cols = np.concatenate([rng.choice(DIMS, NNZ, replace=False) for _ in range(ROWS + 3)])
    data = rng.random(len(cols)).astype(np.float32) + 0.01
    indptr = np.arange(0, len(cols) + 1, NNZ)
    return sp.csr_array((data, cols, indptr), shape=(ROWS + 3, DIMS))


def as_dict(m: sp.csr_array, i: int) -> dict[int, float]:
    a, b = m.indptr[i], m.indptr[i + 1]
    return dict(zip(m.indices[a:b].tolist(), m.data[a:b].tolist(), strict=True))


def create(client: Client, name: str = "sp", index: str | None = None, **params: float) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
    ix = None
    if index is not None:
        ix = client.prepare_index_params()
        ix.add_index("sv", index_type=index, metric_type="IP", params=params)
    client.create_collection(name, schema=schema, index_params=ix)


def insert_every_form(client: Client, m: sp.csr_array, name: str = "sp") -> None:
    """Rows as dicts, as (index, value) pairs and as 1 x N scipy rows, a third each."""
    forms = []
    for i in range(ROWS):
        d = as_dict(m, i)
        if i % 3 == 0:
            forms.append({"id": i, "sv": d})
        elif i % 3 == 1:
            forms.append({"id": i, "sv": list(reversed(d.items()))})  # any order
        else:
            forms.append({"id": i, "sv": m[[i]]})
    client.insert(name, forms)


def exact(m: sp.csr_array, q: int, alive: np.ndarray | None = None) -> tuple[list[int], list]:
    """The top K ids and scores by inner product among rows sharing a dim with query q."""
    scores = (m[:ROWS] @ m[[ROWS + q]].T).toarray().ravel()
    shares = (m[:ROWS] != 0).astype(np.int32) @ (m[[ROWS + q]] != 0).astype(np.int32).T
    ok = shares.toarray().ravel() > 0
    if alive is not None:
        ok &= alive
    ids = [i for i in np.lexsort((np.arange(ROWS), -scores)) if ok[i]][:K]
    return ids, [float(scores[i]) for i in ids]


def assert_exact(client: Client, m: sp.csr_array, alive: np.ndarray | None = None) -> None:
    for q in range(3):
        hits = client.search("sp", [as_dict(m, ROWS + q)], limit=K)[0]
        ids, scores = exact(m, q, alive)
        assert [h["id"] for h in hits] == ids
        assert [h["distance"] for h in hits] == pytest.approx(scores, rel=1e-5)


def test_growing_rows_in_every_form_are_searched_exactly_and_returned_as_dicts(
    client: Client,
):
    m = matrix()
    create(client)
    insert_every_form(client, m)
    assert_exact(client, m)
    got = client.query("sp", "id in [0, 1, 2]", output_fields=["sv"])
    assert [r["sv"] for r in got] == [pytest.approx(as_dict(m, i)) for i in range(3)]
    assert client.describe_collection("sp")["fields"][1]["params"] == {}


@pytest.mark.parametrize("kind", ["SPARSE_INVERTED_INDEX", "SPARSE_WAND"])
def test_flushed_segments_are_indexed_and_survive_a_restart(open_client: ClientFactory, kind: str):
    client = open_client()
    m = matrix()
    create(client, index=kind)
    insert_every_form(client, m)
    client.flush("sp")
    wait_until(lambda: client.describe_index("sp", "sv")["indexed_rows"] == ROWS, 60, "the index")
    wait_until(lambda: served(client), 30, "the index served")
    client.delete("sp", ids=[exact(m, 0)[0][0]])
    alive = np.ones(ROWS, bool)
    alive[exact(m, 0)[0][0]] = False
    assert_exact(client, m, alive)
    client.close()
    client = open_client()
    assert_exact(client, m, alive)
    row = client.get("sp", ids=[7], output_fields=["sv"])[0]["sv"]
    assert row == pytest.approx(as_dict(m, 7))


def served(client: Client) -> bool:
    """Whether every segment of the sparse field is served from an index."""
    cid = client.describe_collection("sp")["collection_id"]
    segs = [s for s in probes.served_segments(client, cid) if s.rows]
    return bool(segs) and all(s.indexed for s in segs)


def test_drop_ratios_drop_the_smallest_values_of_the_index_and_of_the_query(client: Client):
    create(client, index="SPARSE_INVERTED_INDEX", drop_ratio_build=0.5)
    rows = [{"id": 1, "sv": {1: 1.0, 2: 0.1}}, {"id": 2, "sv": {2: 0.2, 3: 5.0}}]
    rows += [{"id": i, "sv": {10 + i: 1.0}} for i in range(3, 6)]
    client.insert("sp", rows)
    q = [{1: 1.0, 2: 20.0}]  # row 1 scores 1 + 2, row 2 scores 4
    assert [h["id"] for h in client.search("sp", q, limit=K)[0]] == [2, 1]  # growing: exact
    client.flush("sp")
    wait_until(lambda: served(client), 60, "the index served")
    hits = client.search("sp", q, limit=K)[0]  # the values of dim 2 (0.1, 0.2) were dropped
    assert [(h["id"], h["distance"]) for h in hits] == [(1, pytest.approx(1.0))]
    dropped = client.search("sp", q, limit=K, search_params={"params": {"drop_ratio_search": 0.5}})
    assert dropped[0] == []  # only dim 2 of the query is left, and no row holds it any more


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({-1: 1.0}, "sparse vector index must be positive and less than 2^32-1: -1"),
        ({2**32 - 1: 1.0}, "sparse vector index must be positive and less than 2^32-1"),
        ([(3, 1.0), (3, 2.0)], "unsorted or same indices in sparse float vector"),
        (b"\x01\x00\x00\x00\x00\x00\x80\x3f" * 2, "unsorted or same indices"),
        ({1: float("inf")}, "is not a number or infinity"),
        ("text", "must be a dict of index: value"),
    ],
)
def test_bad_sparse_rows_are_refused_before_anything_is_written(
    client: Client, row: object, message: str
):
    create(client)
    with pytest.raises(SchemaMismatch, match=re.escape(message)):
        client.insert("sp", [{"id": 0, "sv": {1: 1.0}}, {"id": 1, "sv": row}])
    assert client.query("sp", "id >= 0", output_fields=["id"]) == []


def test_sparse_schemas_and_indexes_are_checked(client: Client):
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("sv", DataType.SPARSE_FLOAT_VECTOR, dim=8)
    with pytest.raises(InvalidArgument, match="dim should not be specified for sparse vector"):
        client.create_collection("sp", schema=schema)
    create(client)
    ix = client.prepare_index_params()
    ix.add_index("sv", index_type="HNSW", metric_type="IP")
    with pytest.raises(InvalidArgument, match="cannot index sparse vector field"):
        client.create_index("sp", ix)
    ix = client.prepare_index_params()
    ix.add_index("sv", index_type="SPARSE_WAND", metric_type="L2")
    with pytest.raises(InvalidArgument, match="metric type L2 not found or not supported"):
        client.create_index("sp", ix)
    with pytest.raises(InvalidArgument, match="metric type not match"):
        client.search("sp", [{1: 1.0}], search_params={"metric_type": "L2"})


def test_a_compaction_merges_sparse_segments_and_answers_as_before(open_client: ClientFactory):
    client = open_client(compaction_interval_s=None, log_retention_ms=None)
    m = matrix()
    create(client, index="SPARSE_INVERTED_INDEX")
    for first in range(0, ROWS, ROWS // 3):  # three small sealed segments
        client.insert("sp", [{"id": i, "sv": as_dict(m, i)} for i in range(first, first + 100)])
        client.flush("sp")
    gone = exact(m, 1)[0][:2]
    client.delete("sp", ids=gone)
    job = client.compact("sp", wait=True)
    assert client.get_compaction_state(job) == "Completed"
    assert len(client.list_segments("sp")) < 3
    alive = np.ones(ROWS, bool)
    alive[gone] = False
    wait_until(lambda: served(client), 60, "the merged segment's index served")
    assert_exact(client, m, alive)
