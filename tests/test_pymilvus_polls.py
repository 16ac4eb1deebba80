"""tests/pymilvus_polls.py is in force in the test processes: pymilvus's fixed status polls
pause POLL_S, its other sleeps (retry back-off, idle reconnect) keep their lengths."""

from __future__ import annotations

import time

import pytest

from tests.pymilvus_polls import POLL_S, POLLING_MODULES

pytest.importorskip("pymilvus")


@pytest.mark.parametrize("name", POLLING_MODULES)
def test_pymilvus_status_polls_pause_poll_s_and_other_sleeps_keep_their_length(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    module_time = importlib.import_module(name).time
    for seconds in (0.5, 5, 3, 0.2):
        module_time.sleep(seconds)
    assert slept == [POLL_S, POLL_S, 3, 0.2]
    assert module_time.monotonic is time.monotonic


def test_pymilvus_load_progress_polls_pause_poll_s() -> None:
    from pymilvus.settings import Config

    assert Config.WaitTimeDurationWhenLoad == POLL_S
