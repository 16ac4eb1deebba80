"""The meta snapshot is a derived view: rebuilt from the ddl topic, and exact after a SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.clients import ClientFactory, ddl_changes
from vectorlog import Client
from vectorlog.core.faults import CRASH_EXIT, ENV
from vectorlog.sdk import probes
from vectorlog.streams.scan import read_to_end

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("ddl_writer.py")


def state_dir(args: dict[str, Any]) -> Path:
    return Path(args["data_dir"] if "data_dir" in args else args["uri"]) / "rootcoord"


def run_writer(args: dict[str, Any], mode: str, acks: int | None, crash_at: str = "") -> list[str]:
    """Runs the DDL writer; SIGKILLs it after `acks` acks, or lets it die at `crash_at`.
    Returns every ack it printed (on a loaded machine, more than `acks` before the kill)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: crash_at}
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), json.dumps(args), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    acked: list[str] = []
    for line in proc.stdout:  # to its end: acks printed before the kill landed count too
        msg = json.loads(line)
        if "acked" in msg:
            acked.append(msg["acked"])
        if acks is not None and len(acked) == acks:
            proc.send_signal(signal.SIGKILL)
    code = proc.wait(timeout=60)
    expected = -signal.SIGKILL if acks is not None else CRASH_EXIT
    assert code == expected, proc.stderr.read() if proc.stderr else ""
    return acked


def dead_letters(client: Client) -> list[Any]:
    return list(read_to_end(client.cluster.log, client.cluster.topics.dlq))


def snapshot(client: Client, timestamps: list[int]) -> list[Any]:
    out = []
    for ts in timestamps:
        names = client.list_collections(as_of=ts)
        out.append((names, [client.describe_collection(n, as_of=ts) for n in names]))
    return out


def test_rebuilt_meta_answers_like_the_live_one_at_past_timestamps(
    client_args: dict[str, Any], open_client: ClientFactory
):
    live = open_client()
    stamps = [probes.now(live)]
    for i in range(4):
        live.create_collection(f"c{i}", dimension=4, num_shards=1 + i % 2)
        live.create_partition(f"c{i}", "p")
        stamps.append(probes.now(live))
    live.create_alias("c1", "al")
    live.rename_collection("c2", "renamed")
    live.drop_collection("c3")
    live.create_collection("c3", dimension=8)
    live.insert("c0", [{"id": 1, "vector": [1.0, 0, 0, 0]}])
    stamps.append(probes.now(live))
    expected = snapshot(live, stamps)
    ids = {live.describe_collection(n)["collection_id"] for n in live.list_collections()}
    last = probes.now(live)
    live.close()

    shutil.rmtree(state_dir(client_args))
    rebuilt = open_client()
    assert snapshot(rebuilt, stamps) == expected
    assert rebuilt.get("c0", [1], output_fields=["id"]) == [{"id": 1}]
    rebuilt.create_collection("fresh", dimension=4)
    assert rebuilt.describe_collection("fresh")["collection_id"] not in ids
    assert rebuilt.describe_collection("fresh")["created_timestamp"] > last
    assert dead_letters(rebuilt) == []


def test_sigkill_between_append_and_apply_loses_nothing(
    client_args: dict[str, Any], open_client: ClientFactory
):
    # passes of the point: c0, its AUTOINDEX index, its partition, the same for c1, then c2's
    # create
    run_writer(dict(client_args), "loop", acks=None, crash_at="rootcoord.ddl.before_apply:7")
    client = open_client()
    # c2 was appended and broadcast, never applied: recovery applied it, once
    assert client.list_collections() == ["c0", "c1", "c2"]
    assert client.describe_collection("c2")["num_partitions"] == 1
    created = [
        e.body["collection_name"] for e in ddl_changes(client) if e.type == "CollectionCreated"
    ]
    assert created == ["c0", "c1", "c2"]
    assert dead_letters(client) == []
    client.insert("c2", [{"id": 1, "vector": [1.0, 0, 0, 0]}])
    assert client.get_collection_stats("c2") == {"row_count": 1}


def test_sigkill_at_any_moment_applies_each_ddl_exactly_once(
    client_args: dict[str, Any], open_client: ClientFactory
):
    acked = run_writer(dict(client_args), "loop", acks=15)
    client = open_client()
    names = client.list_collections()
    assert set(acked) <= set(names) and len(names) - len(acked) <= 1
    events = ddl_changes(client)
    assert len(events) == len(
        {(e.type, e.body.get("collection_name", e.collection_id)) for e in events}
    )
    for name in acked:
        assert client.list_partitions(name) == ["_default", "p"]
    assert dead_letters(client) == []
    position = probes.next_offsets(client, "rootcoord")[(client.cluster.topics.ddl, 0)]
    assert (
        position > max(e.source[1] for e in events if e.source)
        if any(e.source for e in events)
        else position > 0
    )


def test_ddl_failing_after_its_append_is_applied_before_the_next_ddl(
    client_args: dict[str, Any], open_client: ClientFactory
):
    import pytest

    from vectorlog.core.errors import DdlOutcomeUnknown
    from vectorlog.core.faults import armed

    client = open_client()
    with (
        armed("rootcoord.ddl.after_append"),
        pytest.raises(DdlOutcomeUnknown, match="CollectionCreated failed half-way"),
    ):
        client.create_collection("c", dimension=4)
    client.create_collection("d", dimension=4)  # replays the log first: c is applied
    assert client.list_collections() == ["c", "d"]
    client.insert("c", [{"id": 1, "vector": [1.0, 0, 0, 0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    client.close()
    shutil.rmtree(state_dir(client_args))
    rebuilt = open_client()
    assert rebuilt.list_collections() == ["c", "d"]
    assert rebuilt.get_collection_stats("c") == {"row_count": 1}
    assert dead_letters(rebuilt) == []
