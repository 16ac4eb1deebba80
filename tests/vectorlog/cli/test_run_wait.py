"""A running process (vectorlog run ROLE) looks whether it was fenced every FENCED_POLL_S,
not 5 times a second, and still ends once it is."""

from __future__ import annotations

import threading

import pytest

from vectorlog.cli import run


class Runner:
    """A runner whose `fenced` counts the looks, and says fenced after `until` of them."""

    def __init__(self, until: int | None = None) -> None:
        self.looks, self.until = 0, until

    @property
    def fenced(self) -> str | None:
        self.looks += 1
        return "fenced" if self.until is not None and self.looks >= self.until else None


def test_the_wait_looks_only_at_its_poll_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "FENCED_POLL_S", 3600.0)
    done, runner = threading.Event(), Runner()
    timer = threading.Timer(1.0, done.set)
    timer.start()
    assert run._wait(done, runner) is False  # noqa: SLF001
    assert runner.looks == 0  # 0.2 s polls looked about 5 times in that second


def test_a_fenced_runner_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "FENCED_POLL_S", 0.01)
    assert run._wait(threading.Event(), Runner(until=3)) is True  # noqa: SLF001
