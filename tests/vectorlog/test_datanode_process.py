"""`datanode_process` (runners.dnproc): `vectorlog serve`'s data node as a child OS process on
the embedded log, with real processes and real signals: a child killed with SIGKILL during
inserts is restarted and loses no acknowledged row; the child dies with its parent; a killed
child's late append is refused; Kafka refuses the setting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory
from tests.support import log_params, wait_until
from vectorlog import Client
from vectorlog.config import ConfigError
from vectorlog.core.errors import InvalidArgument
from vectorlog.runners.dnproc import LogWrites
from vectorlog.runners.relayed_log import StaleGeneration
from vectorlog.sdk import probes
from vectorlog.streams.log.base import Append
from vectorlog.streams.log.embedded import EmbeddedLog

DIM = 8
pytestmark = pytest.mark.fresh_cluster
embedded_only = pytest.mark.parametrize("backend", log_params("embedded"), indirect=True)


def _vectors(first: int, count: int) -> np.ndarray:
    """The vector of row i: distinct per row, the same in every call."""
    ids = np.arange(first, first + count, dtype=np.float32)[:, None]
    return np.hstack([np.cos(ids * (k + 1) * 0.013) for k in range(DIM)]).astype(np.float32)


def _insert(client: Client, first: int, count: int) -> None:
    vecs = _vectors(first, count)
    client.insert("c", [{"id": first + i, "vector": vecs[i].tolist()} for i in range(count)])


class _Inserter(threading.Thread):
    """Inserts 50-row batches until stopped; `acked` counts the rows acknowledged."""

    def __init__(self, client: Client) -> None:
        super().__init__(daemon=True)
        self.client, self.acked, self.stopping = client, 0, threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                _insert(self.client, self.acked, 50)
                self.acked += 50
                self.stopping.wait(0.005)
        except BaseException as exc:
            self.error = exc


def _gone(pid: int) -> bool:
    """Whether process `pid` exited (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def _check_rows(client: Client, rows: int) -> None:
    """Every acknowledged row is counted, and a row's own vector finds it first."""
    assert client.query("c", output_fields=["count(*)"]) == [{"count(*)": rows}]
    probe = [0, rows // 2, rows - 1]
    hits = client.search("c", _vectors(0, rows)[probe].tolist(), limit=1)
    assert [h[0]["id"] for h in hits] == probe


@embedded_only
def test_a_killed_child_is_restarted_and_loses_no_acknowledged_row(
    open_client: ClientFactory,
) -> None:
    client = open_client(datanode_process=True)
    client.create_collection("c", dimension=DIM, metric_type="L2")
    dn = client.cluster.datanode
    first = dn.pid
    inserter = _Inserter(client)
    inserter.start()
    wait_until(lambda: inserter.acked >= 1000 or inserter.error, 120, "1,000 rows acked")
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: dn.restarts == 1, 120, "the data node process restarted")
    restarted = inserter.acked
    wait_until(lambda: inserter.acked >= restarted + 500 or inserter.error, 120, "more rows")
    inserter.stopping.set()
    inserter.join()
    assert inserter.error is None
    assert dn.pid != first
    segments = client.flush("c", timeout=120)
    rows = inserter.acked
    assert sum(s["num_rows"] for s in client.get_segment_info(segments)) == rows
    _check_rows(client, rows)
    client.close()
    assert dn.proc.returncode == 0  # SIGTERM: a clean stop
    reopened = open_client()  # the thread data node takes over the same state
    _check_rows(reopened, rows)
    _insert(reopened, rows, 10)
    reopened.flush("c", timeout=120)
    assert sum(s["num_rows"] for s in reopened.list_segments("c")) == rows + 10


@embedded_only
def test_a_flush_outlives_a_child_killed_while_it_waits(open_client: ClientFactory) -> None:
    client = open_client(datanode_process=True)
    client.create_collection("c", dimension=DIM, metric_type="L2")
    for first in range(0, 3000, 500):
        _insert(client, first, 500)
    dn = client.cluster.datanode
    flushed: list[int] = []
    flushing = threading.Thread(target=lambda: flushed.extend(client.flush("c", timeout=120)))
    flushing.start()
    os.kill(dn.pid, signal.SIGKILL)
    flushing.join()
    wait_until(lambda: dn.restarts == 1, 120, "the data node process restarted")
    assert sum(s["num_rows"] for s in client.get_segment_info(flushed)) == 3000
    _check_rows(client, 3000)


CHILD = """
import sys, time
from vectorlog import Client
from vectorlog.sdk import probes
c = Client(sys.argv[1], tick_interval_ms=50, datanode_process=True)
c.create_collection("c", dimension=8, metric_type="L2")
c.insert("c", [{"id": i, "vector": [float(i)] * 8} for i in range(100)])
print(c.cluster.datanode.pid, flush=True)
time.sleep(3600)
"""


@embedded_only
def test_the_child_dies_with_its_parent(open_client: ClientFactory, tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    parent = subprocess.Popen(
        [sys.executable, "-c", CHILD, db], stdout=subprocess.PIPE, env=env, cwd=root
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    wait_until(lambda: _gone(child), 60, f"data node process {child} to exit")
    client = open_client(uri=db, datanode_process=True)
    client.flush("c", timeout=120)
    assert client.query("c", output_fields=["count(*)"]) == [{"count(*)": 100}]


@embedded_only
def test_the_probes_of_its_buffers_say_it_runs_elsewhere(open_client: ClientFactory) -> None:
    """A probe reading the data node's memory names itself instead of failing on an
    attribute; the retention floor, which the child reports, is answered."""
    client = open_client(datanode_process=True)
    client.create_collection("c", dimension=DIM, metric_type="L2")
    _insert(client, 0, 100)
    for probe in (probes.buffered_rows, probes.pending_deletes):
        with pytest.raises(InvalidArgument, match=f"{probe.__name__}: the data node does not"):
            probe(client)
    assert isinstance(probes.retention_floor(client), dict)


def test_an_append_of_a_former_generation_is_refused(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path / "log")
    try:
        log.create_topic("t", 1)
        writes = LogWrites(log)
        old = writes.next_generation()
        assert writes.append(old, "t", [[0, b"a", None, [["h", b"1"]]]]) == [0]
        new = writes.next_generation()
        with pytest.raises(StaleGeneration):
            writes.append(old, "t", [[0, b"b", None, []]])
        assert writes.append(new, "t", [[0, b"c", b"k", []]]) == [1]
        records = log.reader("t", {0: 0}).poll(10, timeout=1.0)
        assert [(r.value, r.key, r.headers) for r in records] == [
            (b"a", None, (("h", b"1"),)),
            (b"c", b"k", ()),
        ]
    finally:
        log.close()


def test_appends_keep_their_fields() -> None:
    from vectorlog.runners.relayed_log import appends_of

    rows: list[list[Any]] = [[2, b"v", b"k", [["x", b"y"]]], [0, b"w", None, []]]
    assert appends_of(rows) == [Append(2, b"v", b"k", (("x", b"y"),)), Append(0, b"w")]


@pytest.mark.parametrize("backend", log_params("kafka"), indirect=True)
def test_kafka_refuses_it(open_client: ClientFactory) -> None:
    with pytest.raises(ConfigError, match="vectorlog cluster up"):
        open_client(datanode_process=True)
