"""BINARY_VECTOR fields through `vectorlog.Client` on both log backends (issue 27): rows as
bytes or bits, HAMMING and JACCARD searched exactly on growing rows, BIN_FLAT and BIN_IVF_FLAT
(faiss's binary indexes) after a flush, a restart from the binlogs, rows returned as bytes;
a dim that is not a multiple of 8 and rows of the wrong size refused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument, SchemaMismatch


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


ROWS, DIM, K = 1200, 64, 5


def bits() -> np.ndarray:
    """ROWS + 3 seeded bit vectors (0/1), the last 3 the queries."""
    return np.random.default_rng(8).integers(0, 2, (ROWS + 3, DIM)).astype(np.uint8)


def expected(metric: str, q: int, alive: np.ndarray | None = None) -> tuple[list[int], list]:
    b = bits().astype(bool)
    x, query = b[:ROWS], b[ROWS + q]
    if metric == "HAMMING":
        d = (x ^ query).sum(axis=1).astype(float)
    else:
        d = 1 - (x & query).sum(axis=1) / (x | query).sum(axis=1)
    order = [i for i in np.lexsort((np.arange(ROWS), d)) if alive is None or alive[i]]
    return order[:K], [float(d[i]) for i in order[:K]]


def create(client: Client, metric: str, kind: str = "BIN_FLAT", **params: int) -> None:
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("b", DataType.BINARY_VECTOR, dim=DIM)
    ix = client.prepare_index_params()
    ix.add_index("b", index_type=kind, metric_type=metric, params=params)
    client.create_collection("bin", schema=schema, index_params=ix)


def insert(client: Client) -> None:
    b, packed = bits(), np.packbits(bits(), axis=1)
    rows = [{"id": i, "b": packed[i].tobytes() if i % 2 else b[i].tolist()} for i in range(ROWS)]
    client.insert("bin", rows)


def assert_exact(client: Client, metric: str, ties_by_id: bool = True) -> None:
    packed = np.packbits(bits(), axis=1)
    for q in range(3):
        hits = client.search("bin", [packed[ROWS + q].tobytes()], limit=K)[0]
        ids, dist = expected(metric, q)
        assert [h["distance"] for h in hits] == pytest.approx(dist, abs=1e-6)
        if ties_by_id:
            assert [h["id"] for h in hits] == ids


@pytest.mark.parametrize("metric", ["HAMMING", "JACCARD"])
def test_binary_vectors_are_searched_exactly_through_flush_and_restart(
    open_client: ClientFactory, metric: str
):
    client = open_client()
    create(client, metric)
    insert(client)
    assert_exact(client, metric)
    got = client.get("bin", ids=[4], output_fields=["b"])[0]["b"]
    assert got == np.packbits(bits()[4]).tobytes()
    client.flush("bin")
    wait_until(lambda: client.describe_index("bin", "b")["indexed_rows"] == ROWS, 60, "index")
    assert_exact(client, metric)
    client.close()
    client = open_client()
    assert_exact(client, metric)


def test_bin_ivf_flat_finds_the_nearest_with_every_list_probed(client: Client):
    create(client, "HAMMING", "BIN_IVF_FLAT", nlist=4)
    insert(client)
    client.flush("bin")
    wait_until(lambda: client.describe_index("bin", "b")["indexed_rows"] == ROWS, 60, "index")
    packed = np.packbits(bits(), axis=1)
    for q in range(3):
        hits = client.search(
            "bin", [packed[ROWS + q].tobytes()], limit=K, search_params={"params": {"nprobe": 4}}
        )[0]
        assert [h["distance"] for h in hits] == pytest.approx(expected("HAMMING", q)[1])


def test_bad_binary_input_is_refused(client: Client):
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("b", DataType.BINARY_VECTOR, dim=12)
    with pytest.raises(InvalidArgument, match="should be multiple of 8, but got 12"):
        client.create_collection("bin", schema=schema)
    create(client, "HAMMING")
    with pytest.raises(SchemaMismatch, match="has 3 bytes, expected 8"):
        client.insert("bin", [{"id": 0, "b": bytes(8)}, {"id": 1, "b": b"abc"}])
    with pytest.raises(SchemaMismatch, match="list of 0/1 bits"):
        client.insert("bin", [{"id": 1, "b": [2] * DIM}])
    assert client.query("bin", "id >= 0", output_fields=["id"]) == []
    ix = client.prepare_index_params()
    ix.add_index("b", index_name="other", index_type="HNSW", metric_type="HAMMING")
    with pytest.raises(InvalidArgument, match="cannot index binary vector field"):
        client.create_index("bin", ix)


def test_range_search_and_group_by_on_hamming_growing_and_flushed(client: Client):
    """HAMMING (smaller is nearer): range_filter <= d < radius; group_by keeps the nearest
    row of each value of a field."""
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("g", DataType.INT64)
    schema.add_field("b", DataType.BINARY_VECTOR, dim=DIM)
    ix = client.prepare_index_params()
    ix.add_index("b", index_type="BIN_FLAT", metric_type="HAMMING")
    client.create_collection("bin", schema=schema, index_params=ix)
    b, packed = bits(), np.packbits(bits(), axis=1)
    client.insert("bin", [{"id": i, "g": i % 7, "b": packed[i].tobytes()} for i in range(ROWS)])
    d = (b[:ROWS] ^ b[ROWS]).sum(axis=1)
    order = np.lexsort((np.arange(ROWS), d))
    lo, hi = 24, 28
    in_range = [int(i) for i in order if lo <= d[i] < hi]
    groups: dict[int, int] = {}
    for i in order.tolist():
        groups.setdefault(i % 7, i)
    best = sorted(groups.values(), key=lambda i: (d[i], i))[:3]
    q = [packed[ROWS].tobytes()]
    for stage in ("growing", "flushed"):
        params = {"metric_type": "HAMMING", "params": {"radius": hi, "range_filter": lo}}
        hits = client.search("bin", q, limit=ROWS, search_params=params)[0]
        assert sorted(h["id"] for h in hits) == sorted(in_range)
        assert all(lo <= h["distance"] < hi for h in hits)
        hits = client.search("bin", q, limit=3, group_by_field="g", output_fields=["g"])[0]
        assert [h["id"] for h in hits] == best
        if stage == "growing":
            client.flush("bin")
            wait_until(lambda: client.describe_index("bin", "b")["indexed_rows"] == ROWS, 60,
                       "index")  # fmt: skip
