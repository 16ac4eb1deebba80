"""Coord snapshots on the embedded log (issue 10): the coord topic's old records are folded into
a snapshot in the storage root and deleted; a restart, and nodes that lost their state, rebuild
from snapshot + tail and answer as before. Kafka keeps its topics whole, but the snapshots are
written all the same and a process with fresh state starts from them (issue 23)."""

from __future__ import annotations

import functools
import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.support import stored_files, wait_until
from tests.vectorlog.test_compaction import answers, build
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.config import Config
from vectorlog.jobs.rebuild import rebuild
from vectorlog.streams.log.base import start_offsets
from vectorlog.streams.snapshots import PREFIX

SETTINGS: dict[str, Any] = {
    "tick_interval_ms": 50,
    "read_timeout_s": 20.0,
    "compaction_interval_s": None,
    "log_retention_ms": None,
    "snapshot_records": 20,
    "log_retention_check_s": 0.2,
}


def starts(client: Client) -> tuple[int, int]:
    """The first kept offsets of the coord and ddl topics."""
    log, topics = client.cluster.log, client.cluster.topics
    return start_offsets(log, topics.coord)[0], start_offsets(log, topics.ddl)[0]


def indexed(client: Client) -> dict[str, Any]:
    """Returns the index's description once every row is indexed."""

    def finished() -> dict[str, Any] | None:
        index = client.describe_index("c", "vector")
        return index if index["state"] == "Finished" else None

    return wait_until(finished, 30, "the index finished", interval=0.1)


def shapes(client: Client) -> list[tuple[int, str, int, str]]:
    """Each segment's id, channel, rows and state."""
    segments = client.list_segments("c")
    return [(s["segment_id"], s["insert_channel"], s["num_rows"], s["state"]) for s in segments]


@pytest.mark.usefixtures("spark")
def test_restarts_and_fresh_nodes_rebuild_from_snapshot_and_tail(tmp_path: Path):
    uri = str(tmp_path / "db")
    with Client(uri, **SETTINGS) as client:
        stamps = build(client)
        client.compact("c", wait=True)
        for i in range(12):  # ddl records
            client.create_partition("c", f"p{i}")
            if i % 2:
                client.drop_partition("c", f"p{i}")
        wait_until(lambda: 0 not in starts(client), 20, "snapshots of coord and ddl", 0.1)
        caught_up(client)
        before = {ts: answers(client, ts) for ts in [*stamps, None]}
        segments = shapes(client)
        index = indexed(client)
        meta = (client.describe_collection("c"), client.list_partitions("c"))
        assert list((tmp_path / "db" / "storage" / PREFIX).rglob("*"))
    with Client(uri, **SETTINGS) as reopened:
        assert 0 not in starts(reopened)
        caught_up(reopened)
        assert {ts: answers(reopened, ts) for ts in before} == before
        assert shapes(reopened) == segments
    for state in ("rootcoord", "datacoord", "datanode", "indexnode"):  # nodes that lost it
        shutil.rmtree(tmp_path / "db" / state)
    with Client(uri, **SETTINGS) as fresh:
        caught_up(fresh)
        assert {ts: answers(fresh, ts) for ts in before} == before
        assert shapes(fresh) == segments
        assert indexed(fresh) == index
        assert (fresh.describe_collection("c"), fresh.list_partitions("c")) == meta
        fresh.insert("c", [{"id": 999, "vector": [9.0, 1.0, 0.0, 0.0], "tag": "new", "n": 1}])
        fresh.flush("c")
        assert fresh.get("c", [999], output_fields=["tag"]) == [{"id": 999, "tag": "new"}]
    at = stamps[-1]  # a rebuild reads the coord snapshot too
    rebuild(Config.load(log=uri), str(tmp_path / "rebuilt"), at)
    with Client(str(tmp_path / "rebuilt"), **SETTINGS) as rebuilt:
        caught_up(rebuilt)
        assert answers(rebuilt) == before[at]


@pytest.mark.kafka
@pytest.mark.parametrize("backend", ["kafka"], indirect=True)
def test_on_kafka_snapshots_are_written_and_a_fresh_process_starts_from_them(
    open_client: ClientFactory, tmp_path: Path
):
    """Kafka keeps its topics whole, yet the coord and ddl snapshots are written to the storage
    root, and a process with fresh state (every node) answers as before from them."""
    shared = {**SETTINGS, "storage": str(tmp_path / "shared")}
    client = open_client(**shared)
    stamps = build(client)  # four flushes: coord records
    for i in range(12):  # ddl records
        client.create_partition("c", f"p{i}")
    snapshots = tmp_path / "shared" / PREFIX
    topics = client.cluster.topics

    def written() -> bool:
        return all(stored_files(snapshots / t) for t in (topics.coord, topics.ddl))

    wait_until(written, 30, "snapshots of coord and ddl", 0.1)
    assert starts(client) == (0, 0)  # nothing deleted on Kafka
    caught_up(client)
    before = {ts: answers(client, ts) for ts in [*stamps, None]}
    segments = shapes(client)
    partitions = client.list_partitions("c")
    client.close()
    with open_client(data_dir=str(tmp_path / "fresh"), **shared) as fresh:
        caught_up(fresh)
        assert {ts: answers(fresh, ts) for ts in before} == before
        assert shapes(fresh) == segments
        assert fresh.list_partitions("c") == partitions


def test_ddl_goes_on_after_the_ddl_topic_was_folded_into_a_snapshot(tmp_path: Path):
    """A DDL replays the `ddl` records it has not consumed from where its previous one read
    (the random operation sequences found a drop_collection failing half-way, and every DDL
    after it, once a snapshot had deleted those records): it starts from the snapshot then."""
    with Client(str(tmp_path / "db"), **SETTINGS) as client:
        client.create_collection("c", dimension=2, metric_type="L2")
        made: list[str] = []
        rows = itertools.count()

        def ddl_until_folded(first: int) -> bool:
            """Writes a row (reservations) and a partition; returns whether ddl was folded."""
            n = next(rows)
            client.insert("c", [{"id": n, "vector": [1.0, 0.0]}])
            made.append(f"p{n}")
            client.create_partition("c", made[-1])
            return starts(client)[1] > first

        for _ in range(3):
            first = starts(client)[1]
            wait_until(functools.partial(ddl_until_folded, first), 60, "a ddl snapshot", 0.05)
            client.drop_partition("c", made.pop(0))
        assert sorted(client.list_partitions("c")) == sorted(["_default", *made])
        assert client.query("c", "", ["count(*)"]) == [{"count(*)": next(rows)}]
