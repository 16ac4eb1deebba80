"""The insert -> search slice through `vectorlog.Client`, on both log backends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.clients import ClientFactory, data_events, log_events
from tests.support import wait_until
from vectorlog import Client, DataType
from vectorlog.core.errors import CollectionNotFound, ConsistencyTimeout, VectorlogError
from vectorlog.sdk import probes


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    return d.data.astype(np.float32), d.target


def brute_force(x: np.ndarray, q: np.ndarray, k: int, metric: str) -> np.ndarray:
    if metric == "L2":
        return np.argsort(((x - q) ** 2).sum(1), kind="stable")[:k]
    if metric == "COSINE":
        x = x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)
        q = q / np.linalg.norm(q).clip(1e-12)
    return np.argsort(-(x @ q), kind="stable")[:k]


@pytest.mark.parametrize("metric", ["L2", "IP", "COSINE"])
def test_search_returns_exact_top_k_on_real_vectors(client: Client, digits, metric):
    x, labels = digits
    client.create_collection("digits", dimension=64, metric_type=metric, num_shards=2)
    rows = [{"id": i, "vector": x[i]} for i in range(len(x))]
    res = client.insert("digits", rows)
    assert res["insert_count"] == len(x) and res["ids"] == list(range(len(x)))
    queries = x[[0, 500, 1000]] + 0.5
    hits = client.search("digits", queries, limit=5)
    for q, h in zip(queries, hits, strict=True):
        expected = set(brute_force(x, q, 5, metric).tolist())
        assert len(h) == 5
        assert len({hit["id"] for hit in h} & expected) >= 4  # ties may reorder the 5th
        assert all(set(hit) == {"id", "distance", "entity"} for hit in h)


def full_schema(client: Client):
    s = client.create_schema()
    s.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=32)
    s.add_field("vec", DataType.FLOAT_VECTOR, dim=4)
    s.add_field("n", DataType.INT64)
    s.add_field("score", DataType.DOUBLE)
    s.add_field("ok", DataType.BOOL)
    s.add_field("title", DataType.VARCHAR, max_length=100)
    s.add_field("doc", DataType.JSON)
    return s


def test_every_scalar_type_round_trips_through_the_log(client: Client):
    client.create_collection("things", schema=full_schema(client), metric_type="L2", num_shards=3)
    rows = [
        {
            "pk": f"k{i}",
            "vec": [i, 0, 0, 0],
            "n": -i,
            "score": i / 2,
            "ok": i % 2 == 0,
            "title": f"title {i}",
            "doc": {"i": i, "tags": ["a", "b"]},
        }
        for i in range(30)
    ]
    client.insert("things", rows)
    (hits,) = client.search(
        "things", [[3.1, 0, 0, 0]], limit=2, output_fields=["n", "score", "ok", "title", "doc"]
    )
    assert [h["id"] for h in hits] == ["k3", "k4"]
    assert hits[0]["entity"] == {
        "n": -3,
        "score": 1.5,
        "ok": False,
        "title": "title 3",
        "doc": {"i": 3, "tags": ["a", "b"]},
    }
    assert hits[0]["distance"] == pytest.approx(0.01, abs=1e-5)
    got = client.get("things", ["k7", "missing"])
    assert got == [{**rows[7], "vec": [7.0, 0.0, 0.0, 0.0]}]


def test_rows_are_routed_to_vchannels_by_primary_key(client: Client):
    client.create_collection("sharded", dimension=2, num_shards=4)
    client.insert("sharded", [{"id": i, "vector": [1.0, float(i)]} for i in range(400)])
    inserted = [e for e in data_events(client) if e.type == "RowsInserted"]
    desc = client.describe_collection("sharded")
    assert {e.vchannel for e in inserted} == set(desc["virtual_channel_names"])
    assert sum(e.body["num_rows"] for e in inserted) == 400
    assert len({e.ts for e in inserted}) == 1  # one batch, one timestamp


def test_delete_hides_rows_and_time_travel_still_sees_them(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    ins = client.insert("c", [{"id": i, "vector": [float(i), 0.0]} for i in range(10)])
    client.delete("c", ids=[0, 1])
    (hits,) = client.search("c", [[0.0, 0.0]], limit=3)
    assert [h["id"] for h in hits] == [2, 3, 4]
    (before,) = client.search("c", [[0.0, 0.0]], limit=3, as_of=ins["timestamp"])
    assert [h["id"] for h in before] == [0, 1, 2]
    assert client.get("c", [0, 5], output_fields=["id"]) == [{"id": 5}]
    assert client.get_collection_stats("c") == {"row_count": 8}


def test_reinserting_a_key_replaces_the_row(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}, {"id": 2, "vector": [5.0, 5.0]}])
    client.insert("c", [{"id": 1, "vector": [9.0, 9.0]}])
    (hits,) = client.search("c", [[0.0, 0.0]], limit=5)
    assert [h["id"] for h in hits] == [2, 1]
    assert client.get_collection_stats("c")["row_count"] == 2


def test_auto_id_assigns_unique_keys(client: Client):
    client.create_collection("auto", dimension=3, auto_id=True)
    a = client.insert("auto", [{"vector": [1, 2, 3]}] * 5)["ids"]
    b = client.insert("auto", [{"vector": [1, 2, 3]}] * 5)["ids"]
    assert len(set(a + b)) == 10
    assert len(client.get("auto", a + b)) == 10


def test_acknowledged_data_survives_a_restart(open_client: ClientFactory, digits):
    x, _ = digits
    c = open_client()
    c.create_collection("digits", dimension=64, num_shards=2)
    for lo in range(0, 1000, 250):
        c.insert("digits", [{"id": i, "vector": x[i]} for i in range(lo, lo + 250)])
    c.delete("digits", ids=[10, 20])
    expect = c.search("digits", x[:3], limit=4)
    c.close()
    c2 = open_client()
    assert c2.list_collections() == ["digits"]
    assert c2.search("digits", x[:3], limit=4) == expect
    assert c2.get_collection_stats("digits") == {"row_count": 998}
    c2.insert("digits", [{"id": 5000, "vector": x[5]}])
    assert c2.get_collection_stats("digits") == {"row_count": 999}


def test_large_batches_are_split_under_the_message_size(open_client: ClientFactory):
    c = open_client(max_message_bytes=64 * 1024)
    c.create_collection("big", dimension=128)
    vecs = np.random.default_rng(1).standard_normal((2000, 128)).astype(np.float32)
    c.insert("big", [{"id": i, "vector": v} for i, v in enumerate(vecs)])
    events = [e for e in data_events(c) if e.type == "RowsInserted"]
    assert len(events) >= 2000 * 128 * 4 // (64 * 1024)
    assert sum(e.body["num_rows"] for e in events) == 2000
    assert c.get_collection_stats("big") == {"row_count": 2000}


def test_drop_and_recreate_is_a_new_collection(client: Client):
    client.create_collection("c", dimension=2)
    old = client.describe_collection("c")["collection_id"]
    client.insert("c", [{"id": 1, "vector": [1.0, 0.0]}])
    client.drop_collection("c")
    assert not client.has_collection("c")
    with pytest.raises(CollectionNotFound, match="collection=c\\]"):
        client.search("c", [[1.0, 0.0]])
    client.create_collection("c", dimension=2)
    assert client.describe_collection("c")["collection_id"] != old
    assert client.search("c", [[1.0, 0.0]]) == [[]]


def test_eventually_reads_without_waiting_and_strong_sees_own_writes(client: Client):
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": 1, "vector": [1.0, 0.0]}])
    assert len(client.search("c", [[1.0, 0.0]], consistency_level="Strong")[0]) == 1
    assert len(client.search("c", [[1.0, 0.0]], consistency_level="Session")[0]) == 1
    assert client.search("c", [[1.0, 0.0]], consistency_level="Eventually")[0][0]["id"] == 1


@pytest.mark.fresh_cluster  # it stops the cluster's ticker
def test_read_times_out_clearly_when_ticks_stop(client: Client):
    client.create_collection("c", dimension=2)
    client.cluster.ticker.stop()
    with pytest.raises(ConsistencyTimeout, match="waiting for the query node"):
        client.search("c", [[1.0, 0.0]], timeout=0.5)


def test_upsert_replaces_rows_and_needs_keys_even_with_auto_id(client: Client):
    client.create_collection("auto", dimension=2, auto_id=True, metric_type="L2")
    (key,) = client.insert("auto", [{"vector": [0.0, 0.0]}])["ids"]
    res = client.upsert("auto", [{"id": key, "vector": [5.0, 5.0]}])
    assert res["upsert_count"] == 1 and res["ids"] == [key]
    assert client.get("auto", [key], output_fields=["vector"]) == [
        {"id": key, "vector": [5.0, 5.0]}
    ]
    assert client.get_collection_stats("auto") == {"row_count": 1}
    from vectorlog.core.errors import SchemaMismatch

    with pytest.raises(SchemaMismatch, match=r"missing field\(s\) \['id'\]"):
        client.upsert("auto", [{"vector": [1.0, 1.0]}])


def test_get_names_each_key_once(client: Client):
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": 1, "vector": [1.0, 2.0]}, {"id": 2, "vector": [1.0, 3.0]}])
    got = client.get("c", [2, 1, 99, 2], output_fields=["vector"])
    assert got == [{"id": 2, "vector": [1.0, 3.0]}, {"id": 1, "vector": [1.0, 2.0]}]


def test_every_consistency_level_reads_a_fresh_collection(client: Client):
    for level in ("Strong", "Bounded", "Session", "Eventually"):
        client.create_collection(f"c_{level}", dimension=2)
        assert client.search(f"c_{level}", [[1.0, 0.0]], consistency_level=level) == [[]]


def test_large_deletes_are_split_under_the_message_size(open_client: ClientFactory):
    c = open_client(max_message_bytes=64 * 1024)
    c.create_collection("c", dimension=2, num_shards=2)
    c.insert("c", [{"id": i, "vector": [1.0, 0.0]} for i in range(60_000)])
    res = c.delete("c", ids=list(range(60_000)))
    deletes = [e for e in data_events(c) if e.type == "RowsDeleted"]
    assert len(deletes) > 2 and {e.ts for e in deletes} == {res["timestamp"]}
    assert c.get_collection_stats("c") == {"row_count": 0}


@pytest.mark.fresh_cluster  # the whole cluster must be idle
def test_an_idle_cluster_does_not_grow_its_log(client: Client):
    from vectorlog.processors.rootcoord.tso import physical_ms

    client.create_collection("c", dimension=2)
    client.search("c", [[1.0, 0.0]])
    before = len(log_events(client))
    # the cluster's timestamp oracle: reading it stamps nothing
    idle_until = physical_ms(probes.now(client)) + 10 * client.cluster.cfg.tick_interval_ms
    wait_until(
        lambda: physical_ms(probes.now(client)) >= idle_until,
        10.0,
        "ten tick intervals of cluster time with nothing to promise",
    )
    assert len(log_events(client)) - before <= 2 * client.cluster.topics.dml_partitions  # markers
    client.insert("c", [{"id": 1, "vector": [1.0, 0.0]}])
    assert client.search("c", [[1.0, 0.0]])[0][0]["id"] == 1


def test_confluent_wire_format_with_a_schema_registry(
    open_client: ClientFactory, schema_registry_url: str
):
    from vectorlog.streams.scan import read_to_end

    c = open_client(schema_registry_url=schema_registry_url)
    c.create_collection("c", dimension=2, metric_type="L2")
    c.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert [h["id"] for h in c.search("c", [[0.0, 0.0]])[0]] == [1]
    node = c.cluster
    first_bytes = {
        r.value[:1]
        for r in read_to_end(node.log, node.topics.dml)
        if not r.value.startswith(b"\xc3\x01")
    }  # end markers are single-object
    assert first_bytes == {b"\x00"}  # every event: magic 0 + schema id
    c.close()
    again = open_client(schema_registry_url=schema_registry_url)
    assert again.get_collection_stats("c") == {"row_count": 1}


def test_a_second_client_on_an_open_directory_is_refused_naming_it(tmp_path: Path):
    from vectorlog.state.errors import StateStoreInUse

    with Client(str(tmp_path / "db"), tick_interval_ms=50) as first:
        first.create_collection("c", dimension=2)
        with pytest.raises(StateStoreInUse, match="is in use") as err:
            Client(str(tmp_path / "db"))
        assert isinstance(err.value, VectorlogError) and str(tmp_path / "db") in str(err.value)
        assert first.list_collections() == ["c"]  # the refused open disturbed nothing


@pytest.mark.fresh_cluster  # it closes the cluster
def test_every_error_after_close_is_a_vectorlog_error(client: Client):
    """`except VectorlogError` is enough: the log's and the state store's errors derive from it."""
    client.create_collection("c", dimension=2)
    client.close()
    with pytest.raises(VectorlogError, match="closed"):
        client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])


def test_a_state_directory_reopened_under_another_cluster_name_is_refused_at_once(
    open_client: ClientFactory,
):
    from vectorlog.config import ConfigError

    first = open_client()
    first.create_collection("c", dimension=2)
    owner = first.cfg.cluster
    first.close()
    with pytest.raises(ConfigError, match=f"belongs to cluster '{owner}', not 'someoneelse'"):
        open_client(cluster="someoneelse")
    again = open_client()  # the refused open changed nothing
    assert again.list_collections() == ["c"]
