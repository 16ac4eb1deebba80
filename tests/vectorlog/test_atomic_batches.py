"""A write spanning several pchannels is visible whole or not at all (issue 31, item 5; seed
001 s.1.1), also when its writer dies between the partitions of its append: on Kafka the parts
already sent are in the log and are dropped (dead-lettered) by every reader, on the embedded
log nothing of it was written. The restarted cluster serves and takes writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from vectorlog.core.faults import CRASH_EXIT
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.msgstream import TORN_REASON

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("torn_writer.py")


def crash_mid_write(args: dict[str, Any]) -> list[list[int]]:
    """Runs torn_writer.py until it dies mid-append; returns the id ranges it saw acknowledged."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=240,
    )
    assert done.returncode == CRASH_EXIT, done.stderr[-3000:]
    return [json.loads(line)["acked"] for line in done.stdout.splitlines()]


def ids_present(client: Any, hi: int) -> set[int]:
    return {r["id"] for r in client.get("torn", list(range(hi)), output_fields=["id"])}


@pytest.mark.parametrize(  # embedded, the torn insert never reached the log: nothing of it
    # reaches Spark either, and that variant (a JVM, a minute and more) runs in make test-all
    ("backend", "datanode"),
    [
        pytest.param("embedded", "local", id="embedded-local"),
        pytest.param("kafka", "local", id="kafka-local", marks=pytest.mark.kafka),
        pytest.param("embedded", "spark", id="embedded-spark", marks=pytest.mark.slow),
        pytest.param("kafka", "spark", id="kafka-spark", marks=pytest.mark.kafka),
    ],
    indirect=["backend"],
)
def test_a_write_cut_short_by_a_crash_between_partitions_is_all_or_nothing(
    backend: str,
    client_args: dict[str, Any],
    open_client: ClientFactory,
    datanode: str,
    request: pytest.FixtureRequest,
) -> None:
    """With the Spark data node too: its feed carries the batch headers, and the binlogs it
    writes (what the last restart loads) hold no row of the torn insert. Its Client joins the
    worker's running SparkSession (tests/conftest.py) instead of starting and stopping a JVM."""
    if datanode == "spark":
        request.getfixturevalue("spark")
    assert crash_mid_write(dict(client_args)) == [[0, 100]]  # the second insert was never acked
    client = open_client(datanode=datanode)
    present = ids_present(client, 400)
    assert present == set(range(100))  # the torn insert shows no row: none of its parts
    if backend == "kafka":  # its first partition's records were in the log: dropped as torn
        letters = read_dead_letters(client.cluster.log, client.cluster.topics.dlq)
        torn = [d for d in letters if d.reason.startswith(TORN_REASON)]
        assert torn and all(d.topic == client.cluster.topics.dml for d in torn), letters
    client.insert("torn", [{"id": i, "vector": [1.0] * 8} for i in range(300, 310)])
    client.flush("torn", timeout=90)  # the Spark data node is slow on a busy machine
    assert ids_present(client, 400) == set(range(100)) | set(range(300, 310))
    client.close()
    again = open_client()  # recovered from the binlogs the data node wrote after the crash
    assert ids_present(again, 400) == set(range(100)) | set(range(300, 310))
    hits = again.search("torn", np.ones((1, 8), dtype=np.float32), limit=200)[0]
    assert len(hits) == 110
