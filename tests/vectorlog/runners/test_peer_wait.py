"""A cluster process started before its rootcoord answers waits for it (runners/peerwait.py),
logging one line per retry with rootcoord's address, and starts once rootcoord answers; one
whose rootcoord never answers within VECTORLOG_RUN_PEER_WAIT_S refuses to start with one line
naming rootcoord's address (exit code 2), instead of failing at the first timeout. A start that
a peer's RPC interrupts later is made again until that total has passed (start_patiently);
bad configuration is refused at once: a rootcoord that serves another cluster than the
process's own (or does not say which: an older version) refuses the start at once, naming
both. With real OS processes: tests/vectorlog/cluster/test_start_waits.py and
test_run_refusals.py."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import unused_port, wait_until
from vectorlog.core.errors import ClusterInUse, ServiceUnavailable
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.rpc.server import RpcServer
from vectorlog.runners.peerwait import (
    OtherCluster,
    PeerUnavailable,
    start_patiently,
    wait_for_rootcoord,
)
from vectorlog.state.rocksdb import RocksDBStateStore

TOKEN = "cluster-secret"


class _TimestampsOnly:
    """A rootcoord serving AllocTimestamp from a real timestamp oracle."""

    def __init__(self, tso: TimestampOracle) -> None:
        self.tso = tso

    def allocate_timestamps(self, count: int = 1) -> int:
        return self.tso.allocate(count)


def _retries(caplog: pytest.LogCaptureFixture, address: str) -> int:
    return sum(f"waiting for rootcoord at {address}" in r.getMessage() for r in caplog.records)


def test_a_process_started_before_rootcoord_waits_and_starts_once_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="vectorlog.run")
    address = f"127.0.0.1:{unused_port()}"
    outcome: dict[str, object] = {}

    def start() -> None:
        try:
            wait_for_rootcoord("querynode", address, TOKEN, 300)
            outcome["started"] = True
        except Exception as exc:
            outcome["error"] = exc

    threading.Thread(target=start, daemon=True).start()
    wait_until(lambda: _retries(caplog, address) >= 2, 60, "two retries logged")
    assert outcome == {}  # nothing answers yet: still waiting
    store = RocksDBStateStore(tmp_path / "tso")
    server = RpcServer(address, rootcoord=_TimestampsOnly(TimestampOracle(store)), token=TOKEN)  # type: ignore[arg-type]
    server.start()
    try:
        wait_until(lambda: outcome, 60, "the wait to end")
        assert outcome == {"started": True}
    finally:
        server.stop()
        store.close()


def test_a_rootcoord_that_never_answers_refuses_the_start_naming_it(tmp_path: Path):
    address = f"127.0.0.1:{unused_port()}"
    done = _run_querynode(tmp_path, address)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"vectorlog run querynode: querynode: rootcoord at {address} did not answer in 2 s "
        "(VECTORLOG_RUN_PEER_WAIT_S): "
    ), done.stderr
    assert f"querynode: waiting for rootcoord at {address} (attempt 1" in done.stderr
    assert "Traceback" not in done.stderr


def _run_querynode(tmp_path: Path, address: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "vectorlog.cli", "run", "querynode", "--rootcoord", address]
    argv += ["--log", "kafka://127.0.0.1:1", "--storage", str(tmp_path / "s")]
    argv += ["--state-dir", str(tmp_path / "state")]
    env = {**os.environ, "VECTORLOG_RUN_PEER_WAIT_S": "2", "VECTORLOG_CLUSTER_TOKEN": TOKEN}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


class _Start:
    """A process's start whose peer (datacoord at `address`) times out `failures` times."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures, self.error = failures, error
        self.calls: list[float] = []

    def __call__(self, left: float) -> str:
        self.calls.append(left)
        if self.error is not None:
            raise self.error
        if len(self.calls) <= self.failures:
            raise ServiceUnavailable("datacoord", "10.0.0.7:7002", "deadline_exceeded: ")
        return "started"


def test_a_start_a_peer_interrupts_is_made_again_logging_each_wait(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.INFO, logger="vectorlog.run")
    start = _Start(failures=2)
    assert start_patiently("proxy", start, 300) == "started"
    assert len(start.calls) == 3
    assert all(0 < left <= 300 for left in start.calls)
    lines = [r.getMessage() for r in caplog.records]
    waits = [line for line in lines if "waiting for datacoord at 10.0.0.7:7002" in line]
    assert [w.split("(")[1].split(",")[0] for w in waits] == ["start attempt 1", "start attempt 2"]


def test_a_peer_that_never_answers_refuses_the_start_naming_it_after_the_total():
    start = _Start(failures=10**6)
    with pytest.raises(PeerUnavailable) as refused:
        start_patiently("proxy", start, 1.5)
    assert str(refused.value) == (
        "proxy: datacoord at 10.0.0.7:7002 did not answer in 1.5 s (VECTORLOG_RUN_PEER_WAIT_S): "
        "datacoord at 10.0.0.7:7002 is unavailable: deadline_exceeded:"
    )
    assert (refused.value.peer, refused.value.address) == ("datacoord", "10.0.0.7:7002")
    assert len(start.calls) >= 2


def test_bad_configuration_is_refused_at_once():
    start = _Start(failures=0, error=ClusterInUse("c1", "host:123", "datacoord"))
    with pytest.raises(ClusterInUse):
        start_patiently("datacoord", start, 300)
    assert len(start.calls) == 1


@pytest.mark.parametrize(
    ("serves", "expected"),
    [
        ("c-other", "rootcoord at {a} serves cluster 'c-other', not 'c-mine' (--cluster or "
         "VECTORLOG_CLUSTER): give every process of a cluster the same name"),
        (None, "rootcoord at {a} does not say which cluster it serves (a version before this "
         "one): upgrade it first, then start this process of 'c-mine'"),
        ("c-mine", None),
    ],
)  # fmt: skip
def test_a_rootcoord_of_another_cluster_refuses_the_start_at_once(
    tmp_path: Path, serves: str | None, expected: str | None
):
    """A rootcoord serving `serves` (None: one of a version before Member, which does not
    answer GetClusterName) against this process's cluster 'c-mine': refused at once with
    one line naming both, or started when they match."""
    address = f"127.0.0.1:{unused_port()}"
    store = RocksDBStateStore(tmp_path / "tso")
    rootcoord = _TimestampsOnly(TimestampOracle(store))
    server = RpcServer(address, rootcoord=rootcoord, token=TOKEN, cluster=serves)  # type: ignore[arg-type]
    server.start()
    try:
        if expected is None:
            wait_for_rootcoord("querynode", address, TOKEN, 300, cluster="c-mine")
            return
        with pytest.raises(OtherCluster) as refused:
            wait_for_rootcoord("querynode", address, TOKEN, 300, cluster="c-mine")
        assert str(refused.value) == expected.format(a=address)  # not retried for 300 s
    finally:
        server.stop()
        store.close()
