"""Query node recovery from binlogs (issue 10): a restart loads segments from binlogs up to the
data node's published checkpoint and consumes dml only after it, and answers every read (get,
query, count, search, as of now and as of earlier ts) exactly as before the restart and as a
full replay of the log does; on both log backends."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.support import stored_files
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client, DataType
from vectorlog.core.errors import CollectionNotFound
from vectorlog.sdk import probes

#: no two rows at one distance (no ties to order), and distances compared to 1e-3: a segment
#: may be searched exactly before the restart and through its index after it (or the reverse)
Q = [[3.3, 1.0, 0.0, 0.0], [150.4, 0.0, 1.0, 0.0]]
OUT = ["id", "tag", "vector"]


def rows(ids: range | list[int], tag: str = "a") -> list[dict[str, Any]]:
    return [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0], "tag": f"{tag}{i % 3}"} for i in ids]


def answers(client: Client, stamps: list[int]) -> list[Any]:
    """Every kind of read, as of now and as of each of `stamps`."""
    out: list[Any] = []
    for ts in [None, *stamps]:
        out.append(client.query("c", "id >= 0", output_fields=OUT, as_of=ts, limit=1000))
        out.append(client.query("c", 'tag == "a1"', output_fields=["id"], as_of=ts))
        out.append(client.get("c", [0, 3, 7, 150, 299, 405], output_fields=OUT, as_of=ts))
        hits = client.search("c", Q, limit=5, output_fields=["id", "tag"], as_of=ts)
        out.append([[(h["id"], round(h["distance"], 3), h["entity"]) for h in q] for q in hits])
        out.append(client.query("c", "", output_fields=["count(*)"], as_of=ts))
    return out


def build(client: Client) -> list[int]:
    """Rows flushed with deletes and upserts, a dropped partition, rows left growing;
    returns the ts of its stages."""
    schema = client.create_schema(enable_dynamic_field=True)  # no index: searches are exact,
    schema.add_field("id", DataType.INT64, is_primary=True)  # so answers cannot depend on
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)  # whether an index is loaded yet
    client.create_collection("c", schema=schema, metric_type="L2", num_shards=2)
    client.create_partition("c", "p")
    stamps = [int(client.insert("c", rows(range(300)))["timestamp"])]
    client.insert("c", rows(range(1000, 1010)), partition_name="p")
    stamps.append(int(client.delete("c", ids=[3, 4, 150])["timestamp"]))
    stamps.append(int(client.insert("c", rows([7, 8], tag="up"))["timestamp"]))  # upserts
    client.flush("c", timeout=60)
    stamps.append(int(client.delete("c", ids=[8, 9])["timestamp"]))  # aimed at flushed rows
    client.drop_partition("c", "p")
    stamps.append(int(client.insert("c", rows(range(400, 420)))["timestamp"]))  # growing
    client.insert("c", rows([7], tag="again"))  # an upsert of a flushed, upserted key
    caught_up(client)
    return stamps


def test_a_restart_loads_binlogs_and_consumes_dml_only_after_the_checkpoint(
    open_client: ClientFactory,
):
    first = open_client()
    stamps = build(first)
    before = answers(first, stamps)
    first.close()
    second = open_client()
    assert probes.loaded_rows(second) >= 310  # the flushed rows (and the growing ones written)
    assert all(offset > 0 for offset in probes.start_offsets(second).values())
    assert answers(second, stamps) == before
    second.close()
    replayed = open_client(querynode_recovery="log")  # the whole log, from offset 0
    assert probes.loaded_rows(replayed) == 0
    assert answers(replayed, stamps) == before


def test_writes_after_a_recovery_supersede_and_delete_loaded_rows(open_client: ClientFactory):
    first = open_client()
    build(first)
    first.close()
    second = open_client()
    second.insert("c", rows([1, 2], tag="new"))
    second.delete("c", ids=[5, 400])
    got = second.get("c", [1, 2, 5, 400, 401], output_fields=["id", "tag"])
    assert got == [
        {"id": 1, "tag": "new1"},
        {"id": 2, "tag": "new2"},
        {"id": 401, "tag": "a2"},
    ]
    assert second.query("c", "", output_fields=["count(*)"]) == [{"count(*)": 313}]


def test_a_collection_dropped_before_the_restart_still_answers_reads_before_its_drop(
    open_client: ClientFactory,
):
    first = open_client()
    first.create_collection("gone", dimension=4, metric_type="L2")
    t = int(first.insert("gone", rows(range(50)))["timestamp"])
    first.flush("gone", timeout=60)
    first.drop_collection("gone")
    caught_up(first)
    first.close()
    second = open_client()
    assert probes.loaded_rows(second) == 50
    got = second.query("gone", "", output_fields=["count(*)"], as_of=t)
    assert got == [{"count(*)": 50}]
    with pytest.raises(CollectionNotFound):
        second.query("gone", "", output_fields=["count(*)"])


def test_an_unreadable_binlog_falls_back_to_replaying_the_log(
    open_client: ClientFactory, caplog: pytest.LogCaptureFixture
):
    first = open_client()
    stamps = build(first)
    before = answers(first, stamps)
    storage = Path(first.cfg.storage_uri())
    first.close()
    victim = stored_files(storage / "insert_log")[0]
    victim.write_bytes(b"not a binlog")
    with caplog.at_level(logging.ERROR):
        second = open_client()
    assert "replaying dml from 0" in caplog.text and str(victim.name) in caplog.text
    assert probes.loaded_rows(second) == 0
    assert answers(second, stamps) == before


def test_string_keys_and_dynamic_fields_survive_a_restart_from_binlogs(
    open_client: ClientFactory,
):
    first = open_client()
    s = first.create_schema(enable_dynamic_field=True)
    s.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=20)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    first.create_collection("s", schema=s, metric_type="L2", num_shards=2)
    first.insert(
        "s", [{"pk": f"k{i}", "vector": [float(i), 0.0], "extra": {"i": i}} for i in range(50)]
    )
    first.delete("s", ids=["k1", "k2", "k3"])
    first.insert("s", [{"pk": "k4", "vector": [4.0, 1.0], "extra": "up"}])
    first.flush("s", timeout=60)
    caught_up(first)
    before = first.query("s", "pk >= ''", output_fields=["pk", "extra", "vector"])
    first.close()
    second = open_client()
    assert probes.loaded_rows(second) == 51
    assert second.query("s", "pk >= ''", output_fields=["pk", "extra", "vector"]) == before
    assert len(before) == 47 and {"pk": "k4", "extra": "up"} in [
        {k: r[k] for k in ("pk", "extra")} for r in before
    ]
