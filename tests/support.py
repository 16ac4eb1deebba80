"""Test helpers shared by every test module: backend parametrization, unique topic names,
and waiting on a condition instead of sleeping."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from vectorlog.runners.ports import in_use
from vectorlog.storage.objectstore import is_temp

T = TypeVar("T")

LOG_BACKENDS = ["embedded", "kafka"]


def log_params(*backends: str, slow: tuple[str, ...] = ()) -> list[object]:
    """`pytest.param`s of the backends (all by default); the kafka one carries the kafka mark,
    those named in `slow` the slow mark (they run in make test-all only)."""
    marks = {"kafka": [pytest.mark.kafka]}
    return [
        pytest.param(b, id=b, marks=marks.get(b, []) + ([pytest.mark.slow] if b in slow else []))
        for b in backends or LOG_BACKENDS
    ]


def on_backends(*backends: str) -> pytest.MarkDecorator:
    """Decorator: runs a test taking the `log` fixture on the given backends (default: all)."""
    return pytest.mark.parametrize("log", log_params(*backends), indirect=True)


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other test uses (tests share one broker)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


#: ports handed out by `unused_port` in this test process (a port is bound only later)
_HANDED: set[int] = set()
#: `unused_port`'s ports: 12,000-19,999, below the kernel's ephemeral range (32,768-60,999)
#: and free_ports' (tests/vectorlog/cluster/processes.py), 2,000 for each xdist worker
UNUSED_PORTS, WORKER_SHARE = 12_000, 2_000


def unused_port() -> int:
    """Returns a TCP port free now on 127.0.0.1, for a server a test starts later (a child
    process, or one stopped and started again on it): in this xdist worker's share of
    UNUSED_PORTS, never handed out before in this session. bind(0) gave out a port closed
    again, in the ephemeral range: the same port twice in 0.7% of process clusters (~15
    ports each), and one an outgoing connection could take before the server bound it.
    Raises RuntimeError once the share is used up."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    low = UNUSED_PORTS + WORKER_SHARE * (int(worker) % 4 if worker.isdigit() else 0)
    left = [p for p in range(low, low + WORKER_SHARE) if p not in _HANDED]
    random.shuffle(left)
    for port in left:
        _HANDED.add(port)
        if not in_use("127.0.0.1", port):
            return port
    raise RuntimeError(f"every port of {low}..{low + WORKER_SHARE - 1} was handed out")


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
