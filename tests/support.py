"""Test helpers shared by every test module: backend parametrization, unique topic names,
and waiting on a condition instead of sleeping."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from vectorlog.storage.objectstore import is_temp

T = TypeVar("T")

LOG_BACKENDS = ["embedded", "kafka"]


def log_params(*backends: str) -> list[object]:
    """`pytest.param`s of the backends (all by default); the kafka one carries the kafka mark."""
    marks = {"kafka": [pytest.mark.kafka]}
    return [pytest.param(b, id=b, marks=marks.get(b, [])) for b in backends or LOG_BACKENDS]


def on_backends(*backends: str) -> pytest.MarkDecorator:
    """Decorator: runs a test taking the `log` fixture on the given backends (default: all)."""
    return pytest.mark.parametrize("log", log_params(*backends), indirect=True)


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other test uses (tests share one broker)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def stored_files(root: Path) -> list[Path]:
    """Returns the files under a local store's `root`, sorted, without the temporary files a
    write in progress keeps beside its final name (a reader polling storage sees those)."""
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and not is_temp(p.name))


def wait_until(
    predicate: Callable[[], T | None], timeout: float, what: str, interval: float = 0.01
) -> T:
    """Polls `predicate` until it returns something truthy and returns that value.

    Fails the test after `timeout` seconds, naming `what` is awaited and the last value the
    predicate returned. An exception raised by the predicate propagates at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)
