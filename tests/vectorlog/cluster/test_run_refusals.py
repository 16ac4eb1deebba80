"""`vectorlog run` refuses, with one line naming the problem and exit code 2, a log that is
not Kafka and a role started without the address of a peer it needs; and a proxy's write
held in flight past half the tick liveness window fails as WriteOutcomeUnknown instead of
being acknowledged (consumers may have passed its ts)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vectorlog.core.errors import WriteOutcomeUnknown
from vectorlog.core.hybridts import compose, wall_ms
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


class _Clock:
    """The oracle: the wall clock as hybrid timestamps, each fresh."""

    def __init__(self) -> None:
        self.ts = 0

    def now(self) -> int:
        self.ts = max(self.ts + 1, compose(wall_ms()))
        return self.ts


def _source(heard: list[float | None], tick_age_s: float = 0.0) -> BoundedTickSource:
    """A stamper bounded at 0.2 s whose process's last tick was computed at heard[0], with
    a ts `tick_age_s` older than the wall clock now."""
    tick = compose(wall_ms() - int(tick_age_s * 1000))
    return BoundedTickSource(
        "proxy-a", _Clock(), 0.2, 0.05, lambda: None if heard[0] is None else (heard[0], tick)
    )


def test_a_quick_write_soon_after_a_tick_is_acknowledged():
    source = _source([time.monotonic()])
    with source.stamp() as ts:
        pass
    assert ts > 0 and not source.busy()


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


def test_a_write_whose_last_tick_was_appended_just_now_but_stamped_long_ago_fails():
    # the ticker stalled while a stamp was in flight: its next tick, appended just now,
    # carries the in-flight stamp's old ts, so consumers may drop this writer soon
    source = _source([time.monotonic()], tick_age_s=0.5)
    with pytest.raises(WriteTooSlow), source.stamp():
        pass
