"""`vectorlog run` refuses, with one line naming the problem and exit code 2, a log that is
not Kafka, a role started without the address of a peer it needs and an ingest worker
outside its count; and a proxy's write
held in flight past half the tick liveness window fails as WriteOutcomeUnknown instead of
being acknowledged (consumers may have passed its ts)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vectorlog.core.errors import WriteOutcomeUnknown
from vectorlog.runners.remote import BoundedTickSource, WriteTooSlow


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


@pytest.mark.parametrize("worker", ["2/2", "x/2", "1"])
def test_an_ingest_worker_outside_its_count_is_refused(tmp_path: Path, worker: str):
    done = _run(
        "ingest",
        *("--log", "kafka://127.0.0.1:1", "--storage", str(tmp_path / "s")),
        *("--state-dir", str(tmp_path / "state"), "--worker", worker),
    )
    assert done.returncode == 2, done.stderr
    assert f"--worker {worker!r}: must be I/N with 0 <= I < N" in done.stderr
    assert "Traceback" not in done.stderr


class _Clock:
    def __init__(self) -> None:
        self.ts = 1000

    def now(self) -> int:
        self.ts += 1
        return self.ts


def _source(heard: list[float | None]) -> BoundedTickSource:
    """A stamper bounded at 0.2 s whose process's last tick was computed at heard[0]."""
    return BoundedTickSource("proxy-a", _Clock(), 0.2, 0.05, lambda: heard[0])


def test_a_quick_write_soon_after_a_tick_is_acknowledged():
    source = _source([time.monotonic()])
    with source.stamp() as ts:
        pass
    assert ts == 1001 and not source.busy()


def test_a_write_in_flight_past_the_bound_has_an_unknown_outcome():
    source, appended = _source([time.monotonic()]), []
    too_slow = pytest.raises(WriteTooSlow, match="more than 0.2 s")
    with too_slow as caught, source.stamp() as ts:
        time.sleep(0.3)
        appended.append(ts)
    assert isinstance(caught.value, WriteOutcomeUnknown)
    assert appended == [caught.value.ts]  # the block ran: its effects may be on the log
    assert not source.busy()  # and it holds the tick back no longer


@pytest.mark.parametrize("heard", [None, -0.3], ids=["never ticked", "ticks stalled"])
def test_a_write_of_a_process_whose_ticks_were_not_heard_lately_fails(heard: float | None):
    source = _source([None if heard is None else time.monotonic() + heard])
    with pytest.raises(WriteTooSlow), source.stamp():
        pass
