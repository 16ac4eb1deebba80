"""A cluster process started before its rootcoord answers waits for it (runners/peerwait.py),
logging one line per retry with rootcoord's address, and starts once rootcoord answers; one
whose rootcoord never answers within VECTORLOG_RUN_PEER_WAIT_S refuses to start with one line
naming rootcoord's address (exit code 2), instead of failing at the first timeout."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import unused_port, wait_until
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.rpc.server import RpcServer
from vectorlog.runners.peerwait import wait_for_rootcoord
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
