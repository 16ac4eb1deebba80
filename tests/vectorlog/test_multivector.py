"""Collections with several FLOAT_VECTOR fields (issue 26; Milvus 2.4 allows four), through
`vectorlog.Client` on both log backends: each field with its own index and metric, searched by
`anns_field` on growing and sealed segments, after a flush (indexes built per segment and
field) and after restarts (binlogs per field, then the segment cache's entries per field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import InvalidArgument
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


ROWS, K = 80, 5
#: vector field -> (dim, index metric)
FIELDS = {"text": (8, "L2"), "image": (6, "IP"), "audio": (4, "COSINE")}


def data() -> dict[str, np.ndarray]:
    """Per vector field ROWS rows then 3 queries, seeded (no ties among distances)."""
    rng = np.random.default_rng(26)
    return {
        name: rng.standard_normal((ROWS + 3, dim)).astype(np.float32)
        for name, (dim, _) in FIELDS.items()
    }


def create(client: Client, name: str = "mv", indexed: bool = True) -> None:
    """Creates the collection with one index per vector field, each its own type and metric
    (not `indexed`: none; each field has the metric as its metric_type)."""
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("n", DataType.INT64)
    for field, (dim, metric) in FIELDS.items():
        schema.add_field(field, DataType.FLOAT_VECTOR, dim=dim, metric_type=metric)
    if not indexed:
        client.create_collection(name, schema=schema)
        return
    index = client.prepare_index_params()
    kinds = {"text": ("HNSW", {"M": 8}), "image": ("IVF_FLAT", {"nlist": 4}), "audio": ("FLAT", {})}
    for field, (_, metric) in FIELDS.items():
        kind, params = kinds[field]
        index.add_index(field, index_type=kind, metric_type=metric, params=params)
    client.create_collection(name, schema=schema, index_params=index)


def rows(first: int = 0, end: int = ROWS) -> list[dict[str, Any]]:
    x = data()
    return [
        {"id": i, "n": i % 7, **{f: x[f][i].tolist() for f in FIELDS}} for i in range(first, end)
    ]


def nearest(field: str, q: np.ndarray, keep: np.ndarray | None = None) -> tuple[list[int], Any]:
    """The K nearest ids of query `q` in `field` under its metric by numpy, and distances."""
    x = data()[field][:ROWS].astype(np.float64)
    ids = np.arange(ROWS) if keep is None else keep
    x, q = x[ids], q.astype(np.float64)
    metric = FIELDS[field][1]
    if metric == "L2":
        d = ((x - q) ** 2).sum(1)
        order = np.argsort(d)
    else:
        if metric == "COSINE":
            x, q = x / np.linalg.norm(x, axis=1, keepdims=True), q / np.linalg.norm(q)
        d = x @ q
        order = np.argsort(-d)
    return ids[order[:K]].tolist(), d[order[:K]]


def assert_each_field_searched(client: Client, name: str = "mv", first: int = 0) -> None:
    """Asserts a search of every vector field ranks and measures as numpy does over the
    rows from id `first` on (with and without a filter), and returns that field's vectors
    as inserted."""
    x, alive = data(), np.arange(first, ROWS)
    for field in FIELDS:
        queries = x[field][ROWS:]
        got = client.search(
            name, queries.tolist(), limit=K, anns_field=field, output_fields=[field]
        )
        for q, hits in zip(queries, got, strict=True):
            ids, dist = nearest(field, q, alive)
            assert [h["id"] for h in hits] == ids, field
            assert np.allclose([h["distance"] for h in hits], dist, rtol=1e-4, atol=1e-4)
            for h in hits:
                assert np.allclose(h["entity"][field], x[field][h["id"]], atol=1e-5)
        (hits,) = client.search(
            name, [queries[0].tolist()], limit=K, anns_field=field, filter="n == 3"
        )
        assert [h["id"] for h in hits] == nearest(field, queries[0], alive[alive % 7 == 3])[0]


def wait_indexed(client: Client, name: str = "mv", timeout: float = 60) -> None:
    def built() -> bool:
        described = [client.describe_index(name, field) for field in FIELDS]
        return all(d["state"] == "Finished" and d["indexed_rows"] for d in described)

    wait_until(built, timeout, f"every vector field of {name} indexed")


def served(client: Client) -> set[tuple[int, int]]:
    """Returns the (segment, vector field id) pairs the query node serves from an index."""
    cid = client.describe_collection("mv")["collection_id"]
    return {(s.segment_id, s.field_id) for s in probes.served_segments(client, cid) if s.indexed}


def mapped(client: Client) -> set[tuple[int, int]]:
    """Returns the (segment, vector field id) pairs whose vectors map a cache entry."""
    cid = client.describe_collection("mv")["collection_id"]
    return {(s.segment_id, s.field_id) for s in probes.served_segments(client, cid) if s.mapped}


def field_ids(client: Client) -> set[int]:
    return {
        f["field_id"] for f in client.describe_collection("mv")["fields"] if f["name"] in FIELDS
    }


def test_each_vector_field_has_its_index_and_metric_and_is_searched_by_anns_field(client: Client):
    create(client)
    described = client.describe_collection("mv")
    assert [f["name"] for f in described["fields"]] == ["id", "n", *FIELDS]
    assert {client.describe_index("mv", f)["metric_type"] for f in FIELDS} == {"L2", "IP", "COSINE"}
    client.insert("mv", rows(0, ROWS // 2))
    client.flush("mv")  # half sealed and indexed per field, half growing
    client.insert("mv", rows(ROWS // 2))
    assert_each_field_searched(client)
    wait_indexed(client)
    sealed = {s["segment_id"] for s in client.list_segments("mv") if s["state"] == "Flushed"}
    ids = {f["name"]: f["field_id"] for f in described["fields"]}
    want = {(s, ids[f]) for s in sealed for f in FIELDS}
    wait_until(lambda: served(client) == want, 30, "every sealed segment served from its indexes")
    assert_each_field_searched(client)
    got = client.get("mv", [3], output_fields=list(FIELDS))
    assert all(np.allclose(got[0][f], data()[f][3], atol=1e-5) for f in FIELDS)


def test_a_restart_restores_every_vector_field_from_binlogs_then_from_the_cache(
    open_client: ClientFactory,
):
    first = open_client()
    create(first, indexed=False)  # no index frees the flat storage the cache maps
    first.insert("mv", rows())
    first.flush("mv")
    first.delete("mv", ids=[0, 1])
    assert_each_field_searched(first, first=2)
    before = first.search("mv", [data()["image"][ROWS].tolist()], limit=K, anns_field="image")
    first.close()
    maps: list[set[tuple[int, int]]] = []
    for _ in range(2):  # from binlogs (the live node may not have cached yet), then mapped
        again = open_client()
        assert (
            again.search("mv", [data()["image"][ROWS].tolist()], limit=K, anns_field="image")
            == before
        )
        assert_each_field_searched(again, first=2)
        maps.append(mapped(again))
        again.close()
    assert maps[1] == {(sid, fid) for sid, _ in maps[1] for fid in field_ids(again)} != set()
    cache = Path(again.cfg.state_dir()) / "querynode"
    fields = {p.name.split(".")[0].split("_")[1] for p in cache.rglob("*.flat")}
    assert len(fields) == len(FIELDS)  # one entry per vector field


def test_multi_vector_bad_input_is_refused_with_milvus_messages(client: Client):
    create(client)
    client.insert("mv", rows(0, 10))
    q = [data()["text"][ROWS].tolist()]
    with pytest.raises(InvalidArgument, match="multiple anns_fields exist, please specify"):
        client.search("mv", q, limit=K)
    with pytest.raises(InvalidArgument, match=r"fieldName\(nope\) not found"):
        client.search("mv", q, limit=K, anns_field="nope")
    with pytest.raises(InvalidArgument, match="anns_field 'n' is not a vector field"):
        client.search("mv", q, limit=K, anns_field="n")
    with pytest.raises(InvalidArgument, match="dim"):
        client.search("mv", q, limit=K, anns_field="image")  # 8-d queries of a 6-d field
    schema = client.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    for i in range(5):
        schema.add_field(f"v{i}", DataType.FLOAT_VECTOR, dim=4)
    with pytest.raises(
        InvalidArgument, match="maximum vector field's number should be limited to 4"
    ):
        client.create_collection("five", schema=schema)
    assert not client.has_collection("five")
    bad = rows(0, 1)[0]
    bad["image"] = bad["image"][:3]
    with pytest.raises(InvalidArgument, match="image"):
        client.insert("mv", [bad])
    assert client.query("mv", "", output_fields=["count(*)"]) == [{"count(*)": 10}]


def test_a_compaction_moves_every_vector_field_and_answers_as_before(open_client: ClientFactory):
    client = open_client(compaction_interval_s=None, log_retention_ms=None)
    create(client)
    for first in range(0, ROWS, ROWS // 4):  # four small sealed segments
        client.insert("mv", rows(first, first + ROWS // 4))
        client.flush("mv")
    client.delete("mv", ids=[0, 1])
    before = [
        client.search("mv", [data()[f][ROWS].tolist()], limit=K, anns_field=f) for f in FIELDS
    ]
    job = client.compact("mv", wait=True)
    assert client.get_compaction_state(job) == "Completed"
    assert len(client.list_segments("mv")) < 4
    wait_indexed(client)
    assert_each_field_searched(client, first=2)
    after = [client.search("mv", [data()[f][ROWS].tolist()], limit=K, anns_field=f) for f in FIELDS]
    assert [[h["id"] for h in q[0]] for q in after] == [[h["id"] for h in q[0]] for q in before]
