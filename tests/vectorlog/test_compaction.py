"""Compaction (issue 10): small Flushed segments are merged, rows deleted before the retention
horizon dropped; every read (now and as of earlier stamps within retention) gives the same
answer before and after, across restarts; deletes after it reach the merged segment; a killed
compaction leaves the old segments serving; both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.support import stored_files, wait_until
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client, DataType
from vectorlog.core.faults import CRASH_EXIT, ENV
from vectorlog.sdk import probes
from vectorlog.streams.scan import settled_end

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"compaction_interval_s": None, "log_retention_ms": None}


def create(client: Client) -> None:
    schema = client.create_schema(enable_dynamic_field=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("tag", DataType.VARCHAR, max_length=16)
    params = client.prepare_index_params()
    params.add_index("vector", index_type="FLAT", metric_type="L2")
    client.create_collection("c", schema=schema, index_params=params, num_shards=2)


def rows(ids: range, tag: str) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0], "tag": tag, "n": i} for i in ids]


def build(client: Client) -> list[int]:
    """Writes four flushed batches (with deletes and upserts); returns a stamp after each."""
    create(client)
    stamps = []
    for step in range(4):
        client.insert("c", rows(range(50 * step, 50 * step + 50), f"t{step}"))
        if step == 2:
            client.delete("c", ids=list(range(10)))
            client.upsert("c", rows(range(20, 30), "up"))
        client.flush("c")
        caught_up(client)
        stamps.append(probes.now(client))
    return stamps


def deltas_written(client: Client, timeout: float = 20.0) -> None:
    """Returns once the data node wrote the deletes aimed at flushed segments (about a second
    after them) into delta logs, which a merge reads (the others it carries over), and
    datacoord, which plans merges, applied the coord records naming them."""
    wait_until(lambda: probes.pending_deletes(client) == 0, timeout, "the deletes in delta logs")
    coord = client.cluster.topics.coord
    log = client.cluster.log
    end = settled_end(log, coord, 0, log.end_offsets(coord)[0])  # Tansu's watermark is short
    applied = lambda: probes.next_offsets(client, "datacoord")[(coord, 0)] >= end  # noqa: E731
    wait_until(applied, timeout, "datacoord applying the delta logs")


def segment_files(client: Client, segment_ids: list[int]) -> list[str]:
    """Returns the binlogs (insert, stats, delta) of these segments in the storage root."""
    root = Path(client.cfg.storage_uri().removeprefix("file://"))
    ids = {str(s) for s in segment_ids}
    found = (p for k in ("insert_log", "stats_log", "delta_log") for p in stored_files(root / k))
    return [str(p) for p in found if ids & set(p.parts)]


def served(client: Client) -> dict[int, bool]:
    """Returns the segments of "c" holding rows on the query node, and whether each is
    searched with its index."""
    cid = client.describe_collection("c")["collection_id"]
    return {s.segment_id: s.indexed for s in probes.served_segments(client, cid) if s.rows}


def handed_off(client: Client, timeout: float = 30.0) -> None:
    """Returns once the query node serves every Flushed segment of "c" with its index (a
    merged one once its index is built and loaded: the compacted-from ones serve until
    then, with theirs, and their cache entries are kept)."""
    flushed = {s["segment_id"] for s in client.list_segments("c") if s["state"] == "Flushed"}
    done = lambda: all(served(client).get(s) for s in flushed)  # noqa: E731
    wait_until(done, timeout, "the merged segments served with their indexes")


def cached(client: Client) -> set[int]:
    """Returns the ids of the segments the query node's cache holds an entry of."""
    folder = Path(client.cfg.state_dir()) / "querynode"
    return {int(p.name.split("_")[0]) for p in folder.rglob("*.flat")}


def answers(client: Client, as_of: int | None = None) -> dict[str, Any]:
    """What a user reads: every row, a count, a filtered query, a search and a get."""
    every = client.query("c", "id >= 0", output_fields=["id", "tag", "n"], as_of=as_of)
    (hits,) = client.search("c", [[25.0, 1.0, 0.0, 0.0]], limit=7, as_of=as_of)
    return {
        "rows": sorted((r["id"], r["tag"], r["n"]) for r in every),
        "count": client.query("c", "", output_fields=["count(*)"], as_of=as_of),
        "filtered": sorted(r["id"] for r in client.query("c", 'tag == "up"', as_of=as_of)),
        "search": sorted((round(h["distance"], 2), h["id"]) for h in hits),  # ties: any order
        "get": client.get("c", [5, 25, 75], output_fields=["tag"], as_of=as_of),
    }


def all_answers(client: Client, stamps: list[int]) -> dict[Any, Any]:
    return {None: answers(client)} | {ts: answers(client, ts) for ts in stamps}


def test_merged_segments_answer_every_read_as_before_also_after_a_restart(
    open_client: ClientFactory,
):
    client = open_client(**SETTINGS)
    stamps = build(client)
    before: dict[int | None, dict[str, Any]] = {ts: answers(client, ts) for ts in stamps}
    assert len(client.list_segments("c")) >= 6  # four flushes over two shards
    client.delete("c", ids=[40, 41])  # still buffered on the data node as the merge reads
    caught_up(client)
    before[None] = answers(client)
    job = client.compact("c", wait=True)
    assert client.get_compaction_state(job) == "Completed"
    olds = [s for group in client.get_compaction_plans(job)["merged"].values() for s in group]
    assert olds  # their files go once the data node's checkpoint passes (checked below)
    merged = client.list_segments("c")
    assert len(merged) == 2 and {s["state"] for s in merged} == {"Flushed"}
    assert sum(s["num_rows"] for s in merged) == 210  # nothing dropped: no retention horizon
    caught_up(client)
    assert all_answers(client, stamps) == before
    client.delete("c", ids=[30, 31])  # keys of the merged segments: deletes reach them
    client.insert("c", rows(range(200, 205), "late"))
    caught_up(client)
    now = answers(client)
    assert (30, "t0", 30) not in now["rows"] and (200, "late", 200) in now["rows"]
    client.flush("c")
    deltas_written(client)  # the restart loads them from delta logs, not from the log
    client.close()
    reopened = open_client(**SETTINGS)
    caught_up(reopened)
    assert answers(reopened) == now
    assert {ts: answers(reopened, ts) for ts in stamps} == {ts: before[ts] for ts in stamps}
    gone = lambda: not segment_files(reopened, olds)  # noqa: E731
    wait_until(gone, 20, "the merged segments' files deleted")


def test_rows_deleted_before_the_horizon_are_dropped_and_reads_do_not_change(
    open_client: ClientFactory,
):
    settings = {**SETTINGS, "log_retention_ms": 0}  # the horizon is now
    client = open_client(**settings)
    build(client)
    before = answers(client)
    deltas_written(client)
    job = client.get_compaction_plans(client.compact("c", wait=True))
    assert job["state"] == "Completed" and job["dropped_rows"] == 20  # 10 deleted, 10 upserted
    assert sum(s["num_rows"] for s in client.list_segments("c")) == 190
    caught_up(client)
    assert answers(client) == before
    client.close()
    reopened = open_client(**settings)
    caught_up(reopened)
    assert answers(reopened) == before
    assert reopened.compact("c", wait=True) and len(reopened.list_segments("c")) == 2


def test_the_old_segments_serve_with_their_indexes_until_the_merged_index_is_built(
    open_client: ClientFactory,
):
    """Milvus 2.3's handoff: with the index node held back, the merged segments have no
    index; the compacted-from segments go on serving every read with theirs (reads as
    before), their cache entries kept. A restart then loads the merged segments, which serve
    with their indexes once built."""
    client = open_client(**SETTINGS)
    stamps = build(client)
    handed_off(client)
    olds = set(served(client))
    wait_until(lambda: olds <= cached(client), 30, "the segments' cache entries written")
    before = all_answers(client, stamps)
    indexnode = client.cluster.indexnode
    assert indexnode is not None
    indexnode.stop()  # no index of the merged segments is built
    job = client.compact("c", wait=True)
    merged = {s["segment_id"] for s in client.list_segments("c")}
    assert client.get_compaction_state(job) == "Completed" and not merged & olds
    caught_up(client)
    assert served(client) == dict.fromkeys(olds, True)
    assert all_answers(client, stamps) == before
    client.close()  # (its cache writes and deletions queued are done)
    assert olds <= cached(client)
    reopened = open_client(**SETTINGS)
    handed_off(reopened)
    assert served(reopened) == dict.fromkeys(merged, True)
    assert all_answers(reopened, stamps) == before


def test_the_background_policy_merges_small_segments_while_reads_go_on(
    open_client: ClientFactory,
):
    client = open_client(**{**SETTINGS, "compaction_interval_s": 0.2})
    stamps = build(client)  # merges may already run between its flushes
    before = all_answers(client, stamps)
    deadline = time.monotonic() + 30
    while len(client.list_segments("c")) > 2:
        assert time.monotonic() < deadline, client.list_segments("c")
        assert answers(client) == before[None]
    caught_up(client)
    assert all_answers(client, stamps) == before


@pytest.mark.parametrize("point", ["compaction.after_files", "proxy.compaction.before_append"])
def test_a_killed_compaction_leaves_the_old_segments_serving(
    point: str, client_args: dict[str, Any], open_client: ClientFactory
):
    args = {**client_args, **SETTINGS}
    env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: point}
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("compaction_writer.py")), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert child.returncode == CRASH_EXIT, child.stderr
    before = json.loads(child.stdout.splitlines()[0])
    client = open_client(**SETTINGS)
    caught_up(client)
    segments = client.list_segments("c")
    assert len(segments) >= 6
    assert _jsonable(answers(client)) == before
    assert client.get_compaction_state(client.compact("c", wait=True)) == "Completed"
    assert len(client.list_segments("c")) == 2
    caught_up(client)
    assert _jsonable(answers(client)) == before


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.mark.usefixtures("spark")
def test_the_spark_engine_merges_as_the_local_one(tmp_path: Path):
    """On the embedded log only: the merge is the same function on both logs."""
    settings = {"tick_interval_ms": 50, "read_timeout_s": 20.0, **SETTINGS}
    client = Client(str(tmp_path / "db"), compaction_engine="spark", **settings)
    try:
        stamps = build(client)
        before = all_answers(client, stamps)
        assert client.get_compaction_state(client.compact("c", wait=True)) == "Completed"
        assert len(client.list_segments("c")) == 2
        caught_up(client)
        assert all_answers(client, stamps) == before
    finally:
        client.close()


def test_a_restart_past_a_compaction_serves_the_merged_segments_and_loads_without_the_old_indexes(
    open_client: ClientFactory,
):
    """A restart whose binlog checkpoint is past a compaction whose merged segments have no
    index yet loads the merged segments (searched exactly until their indexes load; the
    compacted-from ones' files may be gone), and a load returns once those are served: the
    indexes of the compacted-from segments, on coord, have nothing to serve (they stayed
    pending, and a load waited for them until its timeout)."""
    client = open_client(**SETTINGS)
    stamps = build(client)
    handed_off(client)
    olds = set(served(client))
    indexnode = client.cluster.indexnode
    assert indexnode is not None
    indexnode.stop()  # no index of the merged segments is built
    client.compact("c", wait=True)
    caught_up(client)
    ends = client.cluster.log.end_offsets(client.cluster.topics.dml)
    past = {p: ends.get(p, 0) for p in probes.pchannels(client, "c")}  # SegmentsCompacted below
    client.insert("c", rows(range(200, 205), "late"))  # a flush after the compaction: the
    client.flush("c")  # data node's published checkpoint passes it
    caught_up(client)

    def passed() -> bool:
        floor = probes.retention_floor(client)
        return all(floor.get(p, 0) >= offset for p, offset in past.items())

    wait_until(passed, 30, "the data node's checkpoint past the compaction")
    before = all_answers(client, stamps)
    client.close()
    reopened = open_client(**SETTINGS)
    held = reopened.cluster.indexnode
    assert held is not None
    held.stop()  # (it may have built a merged segment's index already)
    caught_up(reopened)
    assert probes.loaded_rows(reopened) and not olds & set(served(reopened))
    assert all_answers(reopened, stamps) == before
    cid = reopened.describe_collection("c")["collection_id"]
    assert reopened.cluster.wait_indexes_served(cid, 30)  # as load_collection waits
    assert reopened.get_load_state("c") == {"state": "Loaded"}
    assert all_answers(reopened, stamps) == before
