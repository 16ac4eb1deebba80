"""Shortens pymilvus's fixed polling sleeps in the test processes (tests/conftest.py).

pymilvus waits on the server by sleeping fixed intervals between status calls: 0.5 s before
its first look at a new index's state (`wait_for_creating_index`, on every `create_index` and
every `create_collection` given index_params, even when the server built it at once), 0.5 s
between looks at a flush's or a compaction's state, 5 s between a `flush_all`'s, and
Config.WaitTimeDurationWhenLoad (0.2 s) between looks at a load's progress. `make test` made
693 such waits (all of them the index's first 0.5 s, on indexes the server had built at once:
347 s of its workers' time), tests/vectorlog/server/test_grpc_milvus_codes.py 62 of its 71 s.

The polls stay the same calls, in the same order, with the same answers awaited: only the
pause between two of them is POLL_S. pymilvus's other sleeps (its retry back-off, its 3 s idle
reconnect) keep their lengths. This changes the client only, in the test processes only, and
only the length of its pauses: every status RPC the tests exercise still runs (more often on
work in progress, which the server must answer correctly anyway).
"""

from __future__ import annotations

import time
import types
from typing import Any

#: the pause between two of pymilvus's status polls in the tests
POLL_S = 0.05
#: pymilvus's fixed polling sleeps (seconds) that become POLL_S: index, flush and compaction
#: state (0.5 s), flush_all state (5 s)
POLL_SLEEPS = frozenset({0.5, 5})
#: the pymilvus modules whose `time.sleep` polls (grpc_handler: index, flush, flush_all;
#: milvus_client: compaction)
POLLING_MODULES = ("pymilvus.client.grpc_handler", "pymilvus.milvus_client.milvus_client")


def _sleep(seconds: float) -> None:
    """time.sleep, with pymilvus's polling intervals shortened to POLL_S."""
    time.sleep(POLL_S if seconds in POLL_SLEEPS else seconds)


def quicken_pymilvus_polls() -> None:
    """Makes pymilvus's status polls pause POLL_S (a no-op where pymilvus is not installed)."""
    import importlib

    try:
        from pymilvus.settings import Config
    except ImportError:
        return
    Config.WaitTimeDurationWhenLoad = POLL_S
    shim: Any = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if k[0] != "_"})
    shim.sleep = _sleep
    for name in POLLING_MODULES:
        try:  # a pymilvus that moved a module polls at its own pace: test_pymilvus_polls says so
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "time", None) is time:
            module.time = shim
