"""Flush and the data node end to end (seeds 002-004), on both log backends: segments sealed
and Flushed, every acknowledged row exactly once in Milvus binlogs, read back by the tests'
independent reader; deletes and upserts in delta logs; restarts and a data node killed
between writing files and reporting them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory, log_events
from tests.support import stored_files, wait_until
from tests.vectorlog.storage import milvus_reader as mr
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound
from vectorlog.core.faults import CRASH_EXIT, ENV, armed
from vectorlog.sdk import probes
from vectorlog.storage.segment_views import SegmentViews

ROOT = Path(__file__).resolve().parents[2]


def storage(client: Client) -> Path:
    return Path(client.cfg.storage_uri())


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py): a test reads
    the files of its own collection "c" (ids are the cluster's: never another's)."""
    return shared_client


def files(client: Client, kind: str, collection: str | None = None) -> list[Path]:
    """Returns the files of one kind (insert_log, delta_log...) in storage: every one, or
    those of `collection`."""
    root = storage(client) / kind
    if collection is not None:
        root /= str(client.describe_collection(collection)["collection_id"])
    return stored_files(root)


def segment_rows(client: Client, info: dict[str, Any]) -> dict[int, Any]:
    """Returns {field id: values} of a segment, read from its insert logs."""
    seg = f"{info['collection_id']}/{info['partition_id']}/{info['segment_id']}"
    out: dict[int, Any] = {}
    for path in stored_files(storage(client) / "insert_log" / seg):
        binlog = mr.read_binlog(path.read_bytes())
        (event,) = binlog.events
        values = mr.decode_values(binlog.descriptor["payload_data_type"], event.payload)
        fid = binlog.descriptor["field_id"]
        out[fid] = values if fid not in out else np.concatenate([out[fid], values])
    return out


def deletes(client: Client, collection: str | None = None) -> list[tuple[int, int, int]]:
    """Returns (segment id, pk, ts) of every delete record in the delta logs (of
    `collection`, or of every collection)."""
    out = []
    for path in files(client, "delta_log", collection):
        binlog = mr.read_binlog(path.read_bytes())
        for rec in mr.delete_records(binlog.events[0].payload):
            out.append((binlog.descriptor["segment_id"], rec["pk"], rec["ts"]))
    return sorted(out)


def referenced(client: Client) -> set[str]:
    """Returns every binlog path the coord log's BinlogPathsSaved events reference (what
    a reader of the log, like the data node, takes the segments' files to be)."""
    views = SegmentViews()
    for event in log_events(client, client.cluster.topics.coord):
        views.apply(event)
    return {str(storage(client) / path) for path in views.referenced()}


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in range(start, start + n)]


def test_flush_writes_every_row_once_and_deletes_and_upserts_as_delta_records(client: Client):
    client.create_collection("c", dimension=4, metric_type="L2", num_shards=2)
    client.insert("c", rows(300))
    gone = client.delete("c", ids=[3, 4])
    up = client.insert("c", [{"id": 7, "vector": [70.0, 1.0, 0.0, 0.0]}])
    ids = client.flush("c", timeout=30)
    infos = client.list_segments("c")
    assert sorted(i["segment_id"] for i in infos) == ids and len(ids) == 2  # one per shard
    assert {i["state"] for i in infos} == {"Flushed"} and client.get_flush_state(ids)
    pks: list[int] = []
    for info in infos:
        cols = segment_rows(client, info)
        assert len(cols[0]) == len(cols[1]) == len(cols[100]) == info["num_rows"]
        vectors = cols[101]
        for pk, vec in zip(cols[100].tolist(), vectors, strict=True):
            assert vec[0] == float(pk) or (pk == 7 and vec[0] == 70.0)
        pks += cols[100].tolist()
    assert sorted(pks) == sorted([*range(300), 7])  # the upsert's new row, and the old one
    owner = {pk: i["segment_id"] for i in infos for pk in segment_rows(client, i)[100].tolist()}
    assert deletes(client, "c") == sorted(
        [(owner[3], 3, gone["timestamp"]), (owner[4], 4, gone["timestamp"])]
        + [(owner[7], 7, up["timestamp"])]
    )


def test_stats_logs_let_a_delete_find_its_segment(client: Client):
    client.create_collection("c", dimension=4, metric_type="L2")
    client.insert("c", rows(50))
    (seg,) = client.flush("c", timeout=30)
    stats = [p for p in files(client, "stats_log", "c") if p.name != "1"]
    (one,) = stats
    doc = mr.read_stats_log(one.read_bytes())
    assert (doc["minPk"], doc["maxPk"], doc["fieldID"]) == (0, 49, 100)
    assert all(mr.bloom_contains(doc["bf"], mr.int64_key(pk)) for pk in range(50))
    assert str(seg) in str(one)


def test_flush_of_an_unknown_collection_is_refused(client: Client):
    with pytest.raises(CollectionNotFound, match="collection=nope\\]"):
        client.flush("nope")


def test_flush_without_wait_returns_the_sealed_ids_and_their_state_follows(client: Client):
    client.create_collection("c", dimension=4, metric_type="L2")
    assert client.flush("c") == []  # nothing to flush
    client.insert("c", rows(10))
    ids = client.flush("c", wait=False)
    assert len(ids) == 1
    assert client.get_segment_info(ids)[0]["state"] in ("Sealed", "Flushing", "Flushed")
    wait_until(lambda: client.get_flush_state(ids), 20, "the flush")
    info = client.get_segment_info(ids)[0]
    assert info["num_rows"] == 10 and info["state"] == "Flushed"
    client.insert("c", rows(5, start=10))
    (again,) = client.flush("c", timeout=30)
    assert again != ids[0]  # a sealed segment never takes rows again
    assert client.get_collection_stats("c") == {"row_count": 15}


def test_a_delete_after_the_flush_reaches_a_delta_log_of_the_flushed_segment(client: Client):
    client.create_collection("c", dimension=4, metric_type="L2")
    client.insert("c", rows(20))
    (seg,) = client.flush("c", timeout=30)
    res = client.delete("c", ids=[5])
    wait_until(lambda: deletes(client, "c") == [(seg, 5, res["timestamp"])], 20, "the delta log")


def test_a_whole_cluster_restart_between_seal_and_flush_loses_and_repeats_nothing(
    open_client: ClientFactory,
):
    first = open_client(datanode="off")  # sealed, but no data node writes it
    first.create_collection("c", dimension=4, metric_type="L2", num_shards=2)
    first.insert("c", rows(200))
    ids = first.flush("c", wait=False)
    assert {i["state"] for i in first.get_segment_info(ids)} == {"Sealed"}
    first.close()
    second = open_client()
    second.flush("c", timeout=30)
    assert second.get_flush_state(ids)
    pks = [pk for i in second.list_segments("c") for pk in segment_rows(second, i)[100].tolist()]
    assert sorted(pks) == list(range(200))


def test_a_segment_opened_by_an_insert_that_filled_another_is_flushed_after_a_restart(
    open_client: ClientFactory,
):
    """The data node reports the new segment's rows with the tick that passes the full one's
    seal; its own flush, later, changes nothing of its record, and must end all the same."""
    first = open_client(segment_max_size_mb=1)  # 128-dim rows: sealed for size at ~1,480
    first.create_collection("c", dimension=128, metric_type="L2")
    first.insert("c", [{"id": i, "vector": [float(i)] + [0.0] * 127} for i in range(2500)])
    full, opened = sorted(first.list_segments("c"), key=lambda i: i["segment_id"])
    wait_until(lambda: first.get_flush_state([full["segment_id"]]), 30, "the full one Flushed")
    first.close()
    second = open_client()
    ids = second.flush("c", timeout=30)
    assert ids == [opened["segment_id"]] and second.get_flush_state(ids)
    infos = second.list_segments("c")
    assert {i["state"] for i in infos} == {"Flushed"}
    pks = [pk for i in infos for pk in segment_rows(second, i)[100].tolist()]
    assert sorted(pks) == list(range(2500))


#: the Spark variant starts a JVM in the child and again in the parent (35-50 s a backend):
#: `make test-all` runs it; the writer and its crash point are the same as the local one's
@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.slow)])
def test_a_data_node_killed_after_writing_files_leaves_no_orphans_and_no_duplicates(
    engine: str, client_args: dict[str, Any], open_client: ClientFactory
):
    args = {**client_args, "rows": 120, "datanode": engine}
    env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: "datanode.write.after_files"}
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("flush_writer.py")), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert child.returncode == CRASH_EXIT, child.stderr
    assert json.loads(child.stdout.splitlines()[0]) == {"acked": 120}
    client = open_client(datanode=engine)
    client.flush("c", timeout=120)
    infos = client.list_segments("c")
    pks = [pk for i in infos for pk in segment_rows(client, i)[100].tolist()]
    assert sorted(pks) == list(range(120))  # the killed write's files were deleted, not kept
    assert [pk for _, pk, _ in deletes(client)] == [0]
    kinds = ("insert_log", "delta_log", "stats_log", "data_definition_log")
    on_disk = {str(p) for kind in kinds for p in files(client, kind)}
    assert on_disk == referenced(client)


def test_the_collections_ddl_is_written_to_ddl_binlogs_once(client: Client):
    client.create_collection("c", dimension=4, metric_type="L2", num_shards=2)
    client.create_partition("c", "p")
    client.insert("c", rows(10))
    client.flush("c", timeout=30)
    client.insert("c", rows(10, start=10))
    client.flush("c", timeout=30)  # no new DDL: no new DDL binlogs
    cid = client.describe_collection("c")["collection_id"]
    ddl_dir = storage(client) / "data_definition_log" / str(cid)
    (ts_file,) = (ddl_dir / "ts").iterdir()
    (ddl_file,) = (ddl_dir / "ddl").iterdir()
    ts_log, ddl_log = mr.read_binlog(ts_file.read_bytes()), mr.read_binlog(ddl_file.read_bytes())
    (ts_event,) = ts_log.events
    stamps = mr.decode_values(ts_log.descriptor["payload_data_type"], ts_event.payload)
    requests = [json.loads(mr.decode_values(20, e.payload)[0]) for e in ddl_log.events]
    assert [r["event_type"] for r in requests] == ["CollectionCreated", "PartitionCreated"]
    assert [e.header.type_code for e in ddl_log.events] == [3, 5]  # Milvus's DDL event types
    assert [e.start_ts for e in ddl_log.events] == stamps.tolist()
    assert ts_log.descriptor["collection_id"] == cid == requests[0]["collection_id"]


@pytest.mark.fresh_cluster  # it counts every binlog write of the cluster
def test_a_failed_binlog_write_is_retried_and_the_flush_completes(
    client: Client, caplog: pytest.LogCaptureFixture
):
    client.create_collection("c", dimension=4, metric_type="L2")
    client.insert("c", rows(30))
    with armed("storage.put.before_publish", skip=2) as reached:  # the third file fails
        (seg,) = client.flush("c", timeout=30)
    assert reached.count("storage.put.before_publish") == 3  # it did fail
    assert any("datanode step failed" in r.getMessage() for r in caplog.records)  # reported
    assert client.get_segment_info([seg])[0]["state"] == "Flushed"
    (info,) = client.list_segments("c")
    assert sorted(segment_rows(client, info)[100].tolist()) == list(range(30))
    written = {str(p) for p in files(client, "insert_log")}
    assert written <= referenced(client)  # the failed try left none


def test_upserts_and_deletes_across_a_restart_reach_the_delta_logs_exactly_once(
    open_client: ClientFactory,
):
    first = open_client()
    first.create_collection("c", dimension=4, metric_type="L2")
    first.insert("c", rows(20))
    (old,) = first.flush("c", timeout=30)
    up = first.insert("c", [{"id": 3, "vector": [30.0, 1.0, 0.0, 0.0]}])  # supersedes a row of old
    gone = first.delete("c", ids=[4])
    first.close()  # before the deletes aimed at the flushed segment were written
    second = open_client()
    (new,) = second.flush("c", timeout=30)
    expected = [(old, 3, up["timestamp"]), (old, 4, gone["timestamp"])]
    wait_until(lambda: deletes(second) == expected, 20, "the delta logs")
    second.close()
    third = open_client()  # and again: nothing is written twice
    third.flush("c", timeout=30)
    assert deletes(third) == expected
    (info,) = [i for i in third.list_segments("c") if i["segment_id"] == new]
    assert segment_rows(third, info)[100].tolist() == [3]


def test_a_full_buffer_is_written_before_the_segment_is_sealed_and_a_restart_repeats_nothing(
    open_client: ClientFactory,
):
    first = open_client(datanode_buffer_mb=0.001)  # ~1 KB: every insert below passes it
    first.create_collection("c", dimension=4, metric_type="L2")
    for lo in range(0, 90, 30):
        before = len(files(first, "insert_log"))
        first.insert("c", rows(30, start=lo))
        wait_until(lambda n=before: len(files(first, "insert_log")) > n, 20, "a write")  # type: ignore[misc]
    (info,) = first.list_segments("c")
    assert first.get_segment_info([info["segment_id"]])[0]["state"] == "Growing"
    first.close()
    second = open_client(datanode_buffer_mb=4)  # the last rows stay in memory until the flush
    second.insert("c", rows(30, start=90))
    # the growing segment's rows as datacoord has them: 90 in its binlogs, 30 buffered
    grown = lambda: [s["num_rows"] for s in second.list_segments("c")] == [120]  # noqa: E731
    wait_until(grown, 30, "the data node's report of the segment's 120 rows, before a flush")
    (seg,) = second.flush("c", timeout=30)
    (info,) = second.list_segments("c")
    cols = segment_rows(second, info)
    assert sorted(cols[100].tolist()) == list(range(120)) == sorted(set(cols[100].tolist()))
    assert info["num_rows"] == 120
    assert len(list((storage(second) / "insert_log").rglob("100/*"))) > 1  # several writes
    compound = next(p for p in files(second, "stats_log") if p.name == "1")
    parts = json.loads(compound.read_bytes())
    assert len(parts) > 1 and min(p["minPk"] for p in parts) == 0
    assert max(p["maxPk"] for p in parts) == 119


def test_the_data_node_publishes_its_checkpoint_after_a_write_and_at_close(
    open_client: ClientFactory,
):
    client = open_client()
    client.create_collection("c", dimension=4, metric_type="L2", num_shards=2)
    ts = int(client.insert("c", rows(40))["timestamp"])
    client.flush("c", timeout=30)

    def published() -> list[Any]:
        events = log_events(client, client.cluster.topics.coord)
        return [e.body["positions"] for e in events if e.type == "ChannelCheckpointed"]

    wait_until(lambda: any(min(p["tick"] for p in ps) >= ts for ps in published()), 20, "one")
    saved = log_events(client, client.cluster.topics.coord)
    first = next(
        i
        for i, e in enumerate(saved)
        if e.type == "ChannelCheckpointed" and min(p["tick"] for p in e.body["positions"]) >= ts
    )
    flushed = [i for i, e in enumerate(saved) if e.type == "BinlogPathsSaved"]
    assert flushed and max(flushed) < first  # the binlogs are referenced before it
    assert {p["pchannel"] for p in saved[first].body["positions"]} == set(
        range(client.cluster.topics.dml_partitions)
    )
    later = int(client.insert("c", rows(40, start=100))["timestamp"])  # buffered only
    held = set(probes.pchannels(client, "c"))
    coord = client.cluster.topics.coord
    client.close()  # publishes its final checkpoint: still before the rows not written
    reopened = open_client(datanode="off")
    events = log_events(reopened, coord)
    (last, *_) = [e.body["positions"] for e in reversed(events) if e.type == "ChannelCheckpointed"]
    assert all(ts <= p["tick"] < later for p in last if p["pchannel"] in held)
    assert all(p["tick"] >= ts for p in last)
