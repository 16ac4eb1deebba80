"""Deterministic crash points for fault-injection tests (bytewax's `TestingSource.ABORT()` idea).

Code marks the instants where a crash matters with `crash_point("rootcoord.ddl.after_append")`.
Unarmed (always, in production) it costs one dict lookup. A test arms a point in-process with
`armed("name")` (the point raises `CrashPointReached`, which nothing in vectorlog catches as a
recoverable error), or in a child process with the environment variable
`VECTORLOG_CRASH_AT=name[:N][,name[:N]...]`, which ends the process at once with
`os._exit(CRASH_EXIT)` (no flush, no atexit: what SIGKILL would leave) at the N-th pass
(default 1). `reached()` lists the points passed so far, so
a test can check that a point it arms is on the path it drives.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from vectorlog.core.errors import VectorlogError

ENV = "VECTORLOG_CRASH_AT"
CRASH_EXIT = 137  # what a shell reports for SIGKILL

_lock = threading.Lock()
_armed: dict[str, int] = {}  # point -> passes left before it fires
_reached: list[str] = []


def _parse_env(value: str) -> dict[str, int]:
    """Returns {point: passes before it fires} from `name[:N],...`."""
    points = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        name, _, nth = item.partition(":")
        points[name] = int(nth or 1) - 1
    return points


_env_points = _parse_env(os.environ.get(ENV, ""))


class CrashPointReached(VectorlogError):
    """Raised at an armed crash point: the test's stand-in for the process dying there."""

    def __init__(self, point: str) -> None:
        super().__init__(f"crash point {point!r} reached")
        self.point = point


def crash_point(name: str) -> None:
    """Marks a crash point. Raises CrashPointReached if armed in-process; exits if armed by env."""
    if name in _env_points:
        with _lock:
            _env_points[name] -= 1
            if _env_points[name] < 0:
                os._exit(CRASH_EXIT)
    if not _armed:
        return
    with _lock:
        _reached.append(name)
        left = _armed.get(name)
        if left is None:
            return
        if left > 0:
            _armed[name] = left - 1
            return
        del _armed[name]
    raise CrashPointReached(name)


def arm_exit(name: str, skip: int = 0) -> None:
    """Arms `name` as the environment variable does (the process ends at once with CRASH_EXIT
    after `skip` passes), for a child process that must get past its setup first."""
    with _lock:
        _env_points[name] = skip


def pending(name: str) -> bool:
    """Returns whether `name` is armed (in-process or by env): code that must prepare what a
    crash there leaves behind (e.g. flush what was sent so far) asks before `crash_point`."""
    return name in _env_points or name in _armed


@contextlib.contextmanager
def armed(name: str, skip: int = 0) -> Iterator[list[str]]:
    """Arms `name` to fire after `skip` passes, for the `with` block; yields the points reached.

    The point fires once; it is disarmed on exit whether or not it fired.
    """
    with _lock:
        _armed[name] = skip
        _reached.clear()
    try:
        yield _reached
    finally:
        with _lock:
            _armed.pop(name, None)


PAUSE_ENV = "VECTORLOG_PAUSE_AT"
PAUSE_GO = "go"
PAUSE_MAX_S = 300.0


PAUSE_ARM = "arm"


def pause_point(name: str) -> None:
    """Marks an instant a test may hold a process at (to kill it there with a real signal).
    Armed by `VECTORLOG_PAUSE_AT=name=DIR`: the process writes `DIR/name.PID` holding its
    working directory, then waits until `DIR/go` exists (at most PAUSE_MAX_S). With
    `name?=DIR` it holds only a pass that finds `DIR/arm` (and takes the file away): a test
    holds the one pass that follows its own call. Unarmed: one environment lookup."""
    import time
    from pathlib import Path

    point, _, folder = os.environ.get(PAUSE_ENV, "").partition("=")
    if point.removesuffix("?") != name or not folder:
        return
    if point.endswith("?"):
        try:
            Path(folder, PAUSE_ARM).unlink()
        except FileNotFoundError:
            return  # not armed now
    Path(folder, f"{name}.{os.getpid()}").write_text(os.getcwd())
    deadline = time.monotonic() + PAUSE_MAX_S
    while not Path(folder, PAUSE_GO).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
