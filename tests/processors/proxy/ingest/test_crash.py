"""A crash of the proxy while it consumes ingest loses no row and writes none twice: the
batch whose writes were on dml but whose positions were not stored is found there at restart
and not applied again (exactly once); a batch whose write was still in flight on the thread
that runs it behind the consumer has no position stored (however long it is held), so a
kill then applies it once after the restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory, data_events
from tests.processors.proxy.ingest.crash_ingest import expected
from tests.processors.proxy.ingest.producer import wait_consumed
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.faults import CRASH_EXIT, ENV, PAUSE_ARM, PAUSE_ENV
from vectorlog.processors.proxy.ingest.applied import SOURCE_HEADER, parse_sources
from vectorlog.processors.proxy.ingest.consumer import COMMIT_EVERY_S
from vectorlog.streams.log.base import PART_HEADER
from vectorlog.streams.scan import read_all

ROOT = Path(__file__).resolve().parents[4]


def start_child(args: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.processors.proxy.ingest.crash_ingest", json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
    )


def reopened_rows(
    open_client: ClientFactory, **settings: Any
) -> tuple[Client, dict[int, list[float]]]:
    """Reopens the cluster, waits until the consumer passed every ingest record; returns the
    client and the visible rows of `c`, checking each is visible once."""
    client = open_client(**settings)
    topic = client.cluster.topics.ingest
    wait_consumed(client, topic, [r.offset for r in read_all(client.cluster.log, topic)])
    found = client.query(
        "c", filter="id >= 0", output_fields=["id", "vector"], consistency_level="Strong"
    )  # (rows written after the restart too)
    assert client.query("c", output_fields=["count(*)"])[0]["count(*)"] == len(found)
    return client, {r["id"]: [float(x) for x in r["vector"]] for r in found}


def inserted_rows(client: Client) -> int:
    """Returns how many rows the dml's RowsInserted events carry."""
    return sum(e.body["num_rows"] for e in data_events(client) if e.type == "RowsInserted")


def writes_per_source(client: Client) -> tuple[Counter[int], int]:
    """Returns (for each ingest offset, how many whole writes on dml applied it; the number
    of writes found only in part)."""
    parts: dict[str, set[bytes]] = {}
    sources: dict[str, list[tuple[int, int]]] = {}
    for rec in read_all(client.cluster.log, client.cluster.topics.dml):
        raw, part = rec.header(SOURCE_HEADER), rec.header(PART_HEADER)
        if raw is not None and part is not None:
            attempt, by_tp = parse_sources(raw)
            sources[attempt] = by_tp[(client.cluster.topics.ingest, 0)]
            parts.setdefault(attempt, set()).add(part)
    whole = [a for a, seen in parts.items() if len(seen) == int(next(iter(seen)).split(b"/")[1])]
    counts = Counter(o for a in whole for lo, hi in sources[a] for o in range(lo, hi + 1))
    return counts, len(parts) - len(whole)


def test_a_crash_between_the_dml_append_and_the_stored_position_applies_nothing_twice(
    client_args: dict[str, Any], open_client: ClientFactory
):
    child = start_child(
        {**client_args, "batches": 3, "wait": True}, {ENV: "ingest.before_positions:2"}
    )
    out, err = child.communicate(timeout=120)
    assert child.returncode == CRASH_EXIT, err
    assert [json.loads(line)["produced"] for line in out.splitlines()] == [0, 1]
    client, rows = reopened_rows(open_client)
    assert rows == expected(2)
    # batch 1's 20 upserts were on dml before the crash: found there, not written again
    assert inserted_rows(client) == 40
    assert writes_per_source(client) == (Counter(range(40)), 0)


def test_after_a_crash_smaller_batches_still_apply_nothing_twice(
    client_args: dict[str, Any], open_client: ClientFactory
):
    child = start_child(
        {**client_args, "batches": 3, "wait": True}, {ENV: "ingest.before_positions:2"}
    )
    _, err = child.communicate(timeout=120)
    assert child.returncode == CRASH_EXIT, err
    ingest = f"{client_args.get('cluster', 'vectorlog')}.ingest"
    # the default topic mapped to `c` in batches of 5: batch 1's 20 records, written whole
    # before the crash, are now read back 5 at a time
    client, rows = reopened_rows(open_client, ingest_topics=f"{ingest}=c;batch_size=5")
    assert rows == expected(2)
    assert inserted_rows(client) == 40
    assert writes_per_source(client) == (Counter(range(40)), 0)


@pytest.mark.slow
def test_sigkill_while_consuming_loses_nothing_and_duplicates_nothing(
    client_args: dict[str, Any], open_client: ClientFactory
):
    child = start_child({**client_args, "batches": 400, "wait": False}, {})
    assert child.stdout is not None
    produced = 0
    for line in child.stdout:
        produced = json.loads(line)["produced"] + 1
        if produced >= 40:
            break
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=30)
    produced += len(rest.splitlines())  # printed before the kill landed
    client, rows = reopened_rows(open_client)
    assert rows == expected(produced)
    counts, partial = writes_per_source(client)
    assert counts == Counter(range(20 * produced))  # each record applied by one whole write
    if not client.cfg.is_kafka:  # one append is atomic; on Kafka a kill between partitions
        assert partial == 0  # leaves part of one, and that write is made again whole


def test_a_kill_while_a_write_is_in_flight_applies_its_batch_once_after_the_restart(
    client_args: dict[str, Any], open_client: ClientFactory, tmp_path: Path
):
    held = tmp_path / "held"
    held.mkdir()
    (held / PAUSE_ARM).write_text("")  # batch 0's write is held before its dml append
    env = {PAUSE_ENV: f"ingest.write_behind?={held}"}
    child = start_child({**client_args, "batches": 2, "wait": True}, env)
    wait_until(lambda: any(held.glob("ingest.write_behind.*")), 60, "batch 0's write held")
    time.sleep(3 * COMMIT_EVERY_S)  # (room for a commit that must not come while it is held)
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate(timeout=30)
    assert [json.loads(line)["produced"] for line in out.splitlines()] == [0]
    client, rows = reopened_rows(open_client)
    assert rows == expected(1)
    assert inserted_rows(client) == 20  # batch 0 written once, after the restart
    assert writes_per_source(client) == (Counter(range(20)), 0)
