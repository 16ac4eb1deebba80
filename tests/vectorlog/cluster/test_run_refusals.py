"""`vectorlog run` refuses, with one line naming the problem and exit code 2, a log that is
not Kafka and a role started without the address of a peer it needs (a write that may have
come too late: tests/vectorlog/runners/test_remote.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vectorlog.cli", "run", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_log_that_is_not_kafka_is_refused(tmp_path: Path):
    done = _run("rootcoord", "--log", str(tmp_path / "db"), "--storage", str(tmp_path / "s"))
    assert done.returncode == 2  # argparse: --state-dir is required
    done = _run(
        "rootcoord",
        *("--log", str(tmp_path / "db"), "--storage", str(tmp_path / "s")),
        *("--state-dir", str(tmp_path / "state")),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("vectorlog run rootcoord: ")
    assert "needs --log kafka://HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.kafka
def test_a_role_without_the_address_of_a_peer_it_needs_is_refused(
    kafka_bootstrap: str, tmp_path: Path
):
    done = _run(
        "querynode",
        *("--log", f"kafka://{kafka_bootstrap}", "--cluster", "refused-peer"),
        *("--storage", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")),
    )
    assert done.returncode == 2, done.stderr
    assert "vectorlog run querynode needs --rootcoord HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr
