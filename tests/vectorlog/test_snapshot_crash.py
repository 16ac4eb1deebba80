"""A crash partway through applying a coord or ddl snapshot loses nothing: a consumer's stored
position moves past the snapshot only with its last record, so the restart applies the whole
snapshot again (what it already holds idempotently, nothing dead-lettered). On the embedded
log the snapshot stands in for records retention deleted; on Kafka a process with fresh state
starts from the newest snapshot."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.clients import ClientFactory
from tests.support import stored_files, wait_until
from tests.vectorlog.test_compaction import build
from tests.vectorlog.test_coord_snapshots import SETTINGS, shapes, starts
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.core.faults import CRASH_EXIT, ENV
from vectorlog.streams.scan import END_MARKER_SOURCE, read_to_end
from vectorlog.streams.snapshots import AFTER_RECORD, PREFIX

ROOT = Path(__file__).resolve().parents[2]
OPENER = Path(__file__).with_name("snapshot_opener.py")
#: the nodes whose state is lost, so that each reads coord / ddl from offset 0
NODES = ("rootcoord", "datacoord", "datanode", "indexnode")


def open_and_crash(args: dict[str, Any], passes: int) -> None:
    """Opens a Client in a child process that dies after `passes` snapshot records applied."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: f"{AFTER_RECORD}:{passes}"}
    proc = subprocess.run(
        [sys.executable, str(OPENER), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == CRASH_EXIT, proc.stderr[-3000:]


def snapshot_sizes(storage: Path, client: Client) -> tuple[int, int]:
    """The record counts of the newest ddl and coord snapshots (where a crash falls)."""
    sizes = []
    for topic in (client.cluster.topics.ddl, client.cluster.topics.coord):
        data, n, at = max(stored_files(storage / PREFIX / topic)).read_bytes(), 0, 0
        while at < len(data):
            at, n = at + 4 + struct.unpack_from(">I", data, at)[0], n + 1
        sizes.append(n)
    return sizes[0], sizes[1]


def big_enough(storage: Path, client: Client) -> bool:
    """Whether the newest ddl and coord snapshots hold more than 4 and 2 records (a crash
    halfway through each then falls inside it)."""
    n_ddl, n_coord = snapshot_sizes(storage, client)
    return n_ddl > 4 and n_coord > 2


def catalog(client: Client) -> list[Any]:
    """Every collection with its description and partitions."""
    names = sorted(client.list_collections())
    return [(n, client.describe_collection(n), client.list_partitions(n)) for n in names]


def dead_letters(client: Client) -> list[bytes]:
    """The dead-lettered records (not the end markers reading to the end appends)."""
    records = read_to_end(client.cluster.log, client.cluster.topics.dlq)
    return [r.value for r in records if END_MARKER_SOURCE.encode() not in r.value]


def snapshotted(client: Client, storage: Path, kafka: bool) -> bool:
    """Whether coord and ddl have snapshots covering all but their newest records: deleted
    below them (embedded) or written at them (Kafka)."""
    topics = (client.cluster.topics.ddl, client.cluster.topics.coord)
    if kafka:
        return all(stored_files(storage / PREFIX / t) for t in topics)
    return 0 not in starts(client)


def test_a_crash_partway_through_a_snapshot_loses_no_collection_or_segment(
    client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path
):
    args = {**client_args, **SETTINGS, "storage": str(tmp_path / "shared")}
    storage, kafka = tmp_path / "shared", args["uri"].startswith("kafka")
    client = open_client(**args)
    build(client)
    for i in range(8):  # collections and partitions applied from the ddl snapshot
        client.create_collection(f"k{i}", dimension=4)
        client.create_partition(f"k{i}", "p")
    # the newest snapshots hold the collections above (on Kafka an earlier, smaller one may
    # be the newest for a moment: snapshots are written in the background)
    wait_until(
        lambda: snapshotted(client, storage, kafka) and big_enough(storage, client),
        30,
        "snapshots of coord and ddl with more than 4 and 2 records",
        0.1,
    )
    caught_up(client)
    before, segments, letters = catalog(client), shapes(client), dead_letters(client)
    n_ddl, n_coord = snapshot_sizes(storage, client)
    client.close()
    state = Path(args.get("data_dir", args["uri"]))
    # rootcoord dies after half the ddl snapshot; then datacoord after half the coord one
    for passes in (n_ddl // 2, n_ddl + n_coord // 2):
        for node in NODES:
            shutil.rmtree(state / node, ignore_errors=True)
        open_and_crash(args, passes)
        with open_client(**args) as restarted:
            caught_up(restarted)
            assert shapes(restarted) == segments
            assert catalog(restarted) == before
            assert dead_letters(restarted) == letters
