"""Milvus's index semantics through `vectorlog.Client` (issue 8), on both log backends: the
metric belongs to the index (quick setup's AUTOINDEX, `create_collection(index_params=)`,
create_index with another metric than the field's), index parameters checked as Milvus
checks them (ints or the strings pymilvus sends), describe_index's keys, and searches that
resolve the index's metric, also after a restart and after the index is dropped."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory, ddl_changes
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import CollectionNotFound, IndexExists, InvalidArgument


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


DIM, ROWS, K = 8, 60, 5
IDLE = {"total_rows": 0, "indexed_rows": 0, "pending_index_rows": 0, "state": "Finished"}


def vectors() -> np.ndarray:
    """ROWS rows and 3 queries, seeded (no ties among the distances)."""
    return np.random.default_rng(3).standard_normal((ROWS + 3, DIM)).astype(np.float32)


def insert(client: Client, name: str) -> np.ndarray:
    """Inserts ROWS rows with ids 0.. into `name`; returns the 3 query vectors."""
    x = vectors()
    client.insert(name, [{"id": i, "vector": x[i].tolist(), "n": i} for i in range(ROWS)])
    return x[ROWS:]


def nearest(metric: str, q: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The K nearest ids of query `q` under `metric` by numpy, and their distances."""
    x = vectors()[:ROWS].astype(np.float64)
    if metric == "L2":
        d = ((x - q) ** 2).sum(1)
        order = np.argsort(d)
    else:
        if metric == "COSINE":
            x, q = x / np.linalg.norm(x, axis=1, keepdims=True), q / np.linalg.norm(q)
        d = x @ q
        order = np.argsort(-d)
    return order[:K].tolist(), d[order[:K]]


def assert_searched_with(client: Client, name: str, metric: str, **kwargs: Any) -> None:
    """Asserts a search of `name` ranks and measures as numpy does under `metric`."""
    queries = vectors()[ROWS:]
    got = client.search(name, queries.tolist(), limit=K, **kwargs)
    for q, hits in zip(queries, got, strict=True):
        ids, dist = nearest(metric, q.astype(np.float64))
        assert [h["id"] for h in hits] == ids
        assert np.allclose([h["distance"] for h in hits], dist, rtol=1e-4, atol=1e-4)


def schema(client: Client) -> Any:
    """id (INT64 key), vector (FLOAT_VECTOR, no metric given: COSINE), n (INT64)."""
    s = client.create_schema()
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    return s.add_field("n", DataType.INT64)


def refused(client: Client, match: str, fn: Any, *args: Any, **kwargs: Any) -> None:
    """Asserts fn(...) raises InvalidArgument matching `match` and appends no DDL event."""
    before = len(ddl_changes(client))
    with pytest.raises(InvalidArgument, match=match):
        fn(*args, **kwargs)
    assert len(ddl_changes(client)) == before


@pytest.mark.parametrize("metric", [None, "L2", "ip"])
def test_quick_setup_creates_an_autoindex_index_with_its_metric(client: Client, metric):
    kwargs = {} if metric is None else {"metric_type": metric}
    client.create_collection("q", dimension=DIM, **kwargs)
    want = (metric or "COSINE").upper()  # Milvus's default metric
    assert client.list_indexes("q") == ["vector"] == client.list_indexes("q", "vector")
    assert client.describe_collection("q")["indexes"] == ["vector"]
    assert client.describe_index("q", "vector") == {
        "index_type": "AUTOINDEX",
        "metric_type": want,
        "params": {},
        "field_name": "vector",
        "index_name": "vector",
        **IDLE,
    }
    client.insert("q", [{"id": i, "vector": v.tolist()} for i, v in enumerate(vectors()[:ROWS])])
    assert_searched_with(client, "q", want)
    assert_searched_with(client, "q", want, search_params={"metric_type": want.lower()})
    other = "L2" if want != "L2" else "IP"
    with pytest.raises(InvalidArgument, match=f"'{other}' does not match.*metric type not match"):
        client.search("q", [[1.0] * DIM], search_params={"metric_type": other})


def test_the_metric_belongs_to_the_index_also_after_a_restart(open_client: ClientFactory):
    client = open_client()
    index = client.prepare_index_params()
    index.add_index("vector", "HNSW", "vidx", "IP", params={"M": "8"}, efConstruction=64)
    client.create_collection("c", schema=schema(client), index_params=index)
    assert client.list_indexes("c") == ["vidx"]
    described = client.describe_index("c", "vidx")
    assert described == {
        "index_type": "HNSW",
        "metric_type": "IP",
        "params": {"M": 8, "efConstruction": 64},
        "field_name": "vector",
        "index_name": "vidx",
        **IDLE,
    }
    insert(client, "c")
    assert_searched_with(client, "c", "IP")  # not the field's COSINE
    assert_searched_with(
        client, "c", "IP", search_params={"metric_type": "IP", "params": {"ef": "16"}}
    )
    with pytest.raises(InvalidArgument, match="metric type not match"):
        client.search("c", [[1.0] * DIM], search_params={"metric_type": "COSINE"})
    client.close()
    client = open_client()  # the index, and so the metric, comes back from the log
    assert client.describe_index("c", "vidx") == described
    assert_searched_with(client, "c", "IP")
    client.drop_index("c", "vidx")  # unindexed: the vector field's metric (COSINE) again
    assert client.list_indexes("c") == []
    before = len(ddl_changes(client))
    client.drop_index("c", "vidx")  # gone already: a no-op, as in Milvus
    assert len(ddl_changes(client)) == before
    with pytest.raises(CollectionNotFound):
        client.drop_index("nope", "vidx")
    assert_searched_with(client, "c", "COSINE")
    with pytest.raises(InvalidArgument, match="metric type not match"):
        client.search("c", [[1.0] * DIM], search_params={"metric_type": "IP"})


def test_a_collection_without_index_searches_with_the_field_metric(client: Client):
    client.create_collection("plain", schema=schema(client))  # as Milvus Lite: COSINE
    client.create_collection("l2", schema=schema(client), metric_type="L2")
    assert client.list_indexes("plain") == client.list_indexes("l2") == []
    insert(client, "plain")
    insert(client, "l2")
    assert_searched_with(client, "plain", "COSINE")
    assert_searched_with(client, "l2", "L2")
    index = client.prepare_index_params().add_index("vector", "FLAT", metric_type="IP")
    client.create_index("l2", index)  # another metric than the field's: the index's wins
    assert_searched_with(client, "l2", "IP")


BAD_INDEXES: list[tuple[str, Any, dict[str, Any], str]] = [
    (
        "IVF_FLAT",
        None,
        {"nlist": 0},
        r"IVF_FLAT parameter 'nlist' must be an integer in \[1, 65536\], not 0",
    ),
    ("IVF_FLAT", "L2", {"nlist": "abc"}, r"'nlist' must be an integer .*'abc'"),
    ("IVF_SQ8", None, {"nlist": 65_537}, r"IVF_SQ8 parameter 'nlist'"),
    ("IVF_PQ", None, {"nlist": 4, "m": 3}, r"'m' \(3\) must divide the dim 8 of 'vector'"),
    ("IVF_PQ", None, {"m": 4, "nbits": 17}, r"'nbits' must be an integer in \[1, 16\]"),
    ("HNSW", None, {"M": 1}, r"HNSW parameter 'M' must be an integer in \[2, 2048\]"),
    ("HNSW", None, {"efConstruction": True}, "'efConstruction'"),
    ("HNSW", None, {"ef": 16}, r"HNSW has no parameter 'ef' \(has \['M', 'efConstruction'\]\)"),
    ("AUTOINDEX", None, {"M": 16}, r"AUTOINDEX has no parameter 'M' \(takes none\)"),
    ("FLAT", "IP", {"nlist": 8}, "FLAT has no parameter 'nlist'"),
    ("DISKANN", None, {}, "index_type 'DISKANN' is not one of"),
    ("HNSW", "HAMMING", {}, "metric_type 'HAMMING' is not one of"),
    ("HNSW", 3, {}, "metric_type 3 is not one of"),
]


def test_index_parameters_are_checked_as_milvus_checks_them(client: Client):
    client.create_collection("c", schema=schema(client))
    for kind, metric, params, match in BAD_INDEXES:
        index = client.prepare_index_params().add_index("vector", kind, "", metric, params)
        refused(client, match, client.create_index, "c", index)
    refused(
        client, "index_params is empty", client.create_index, "c", client.prepare_index_params()
    )
    good: list[tuple[str, dict[str, Any]]] = [
        ("IVF_PQ", {"nlist": "16", "m": "4", "nbits": "8"}),
        ("IVF_SQ8", {"nlist": 1}),
        ("HNSW", {"M": 2048, "efConstruction": "1", "mmap.enabled": "true"}),
        ("", {}),  # AUTOINDEX, as pymilvus's default index_type ""
    ]
    for kind, params in good:
        client.create_index(
            "c", client.prepare_index_params().add_index("vector", kind, params=params)
        )
        d = client.describe_index("c", "vector")
        assert d["index_type"] == (kind or "AUTOINDEX") and d["metric_type"] == "COSINE"
        assert d["params"] == {k: int(v) for k, v in params.items() if k != "mmap.enabled"}
        client.drop_index("c", "vector")


def test_bad_index_params_create_no_collection(client: Client):
    index = client.prepare_index_params().add_index("vector", "HNSW", params={"M": 0})
    refused(client, "'M'", client.create_collection, "c", schema=schema(client), index_params=index)
    two = client.prepare_index_params().add_index("vector", "FLAT").add_index("vector", "HNSW", "h")
    refused(
        client,
        "two indexes with field_name 'vector'",
        client.create_collection,
        "c",
        schema=schema(client),
        index_params=two,
    )
    refused(
        client,
        "index_params needs schema=",
        client.create_collection,
        "c",
        dimension=4,
        index_params=index,
    )
    assert not client.has_collection("c") and ddl_changes(client) == []


def test_an_identical_index_is_created_once_another_on_the_field_is_refused(client: Client):
    client.create_collection("q", dimension=DIM, metric_type="L2")
    before = len(ddl_changes(client))
    same = client.prepare_index_params().add_index("vector", "AUTOINDEX", metric_type="l2")
    client.create_index("q", same)  # as Milvus: a no-op
    assert len(ddl_changes(client)) == before
    other = client.prepare_index_params().add_index("vector", "AUTOINDEX", metric_type="IP")
    with pytest.raises(IndexExists, match="'vector'"):
        client.create_index("q", other)
    assert client.describe_index("q", "vector")["metric_type"] == "L2"


def test_pymilvus_index_params_are_accepted(client: Client):
    pm_index = pytest.importorskip("pymilvus.milvus_client.index")
    index = pm_index.IndexParams()
    index.add_index("vector", index_type="IVF_FLAT", metric_type="L2", params={"nlist": 4})
    client.create_collection("c", schema=schema(client), index_params=index)
    d = client.describe_index("c", "vector")
    assert (d["index_type"], d["metric_type"], d["params"]) == ("IVF_FLAT", "L2", {"nlist": 4})
    insert(client, "c")
    assert_searched_with(client, "c", "L2", search_params={"params": {"nprobe": 4}})


def test_describe_index_counts_the_flushed_rows_the_index_node_indexed(client: Client):
    client.create_collection("q", dimension=DIM, metric_type="L2")
    insert_plain = [{"id": i, "vector": v.tolist()} for i, v in enumerate(vectors()[:ROWS])]
    client.insert("q", insert_plain)
    assert client.describe_index("q", "vector") == {
        "index_type": "AUTOINDEX",
        "metric_type": "L2",
        "params": {},
        "field_name": "vector",
        "index_name": "vector",
        **IDLE,  # growing rows are not counted (Milvus: only Flushed segments are indexed)
    }
    client.flush("q")

    def finished() -> dict[str, Any] | None:
        d = client.describe_index("q", "vector")
        return d if d["state"] == "Finished" and d["indexed_rows"] == ROWS else None

    done = wait_until(finished, 30, "the index built on the flushed segment")
    assert done is not None and (done["total_rows"], done["pending_index_rows"]) == (ROWS, 0)
    assert_searched_with(client, "q", "L2")


def test_an_index_file_whose_bytes_changed_is_never_served(
    open_client: ClientFactory, caplog: pytest.LogCaptureFixture
):
    """The index node writes a checksum with each build; a query node that reads a build whose
    bytes changed since (one flipped byte in its vectors) logs it and serves the segment from
    its binlog vectors: answers stay exact. The checksums outlive restarts (each start's
    sweep of orphaned index files keeps them)."""
    client = open_client()
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_collection("f", schema=schema(client), index_params=params)
    insert(client, "f")
    client.flush("f")

    def finished() -> bool:
        d = client.describe_index("f", "vector")
        return d["state"] == "Finished" and d["indexed_rows"] == ROWS

    wait_until(finished, 30, "the index built on the flushed segment")
    client.close()
    open_client().close()  # a restart before the bytes change
    (index_file,) = (Path(client.cfg.storage_uri()) / "index_files").rglob("index.faiss")
    spoiled = bytearray(index_file.read_bytes())
    spoiled[-1] ^= 0x7F  # the top byte of the last row's last float: that vector moves
    index_file.write_bytes(bytes(spoiled))
    with caplog.at_level(logging.WARNING, logger="vectorlog.processors.querynode.indexes"):
        again = open_client()

        def refused() -> bool:
            return any("checksum mismatch" in r.getMessage() for r in caplog.records)

        wait_until(refused, 30, "the query node refusing the changed index file")
    last = vectors()[ROWS - 1]
    (hit,) = again.search("f", [last.tolist()], limit=1)[0]
    assert hit["id"] == ROWS - 1 and hit["distance"] == pytest.approx(0.0, abs=1e-5)
    assert_searched_with(again, "f", "L2")
