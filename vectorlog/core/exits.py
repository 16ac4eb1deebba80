"""Clean interpreter exits: every cluster a program opened and forgot to close is closed at
exit, before the interpreter tears down.

A cluster's threads run native code (librdkafka, RocksDB, faiss with OpenMP, py4j to the JVM);
left running while the interpreter finalizes, one of them may still be inside a native call
when C++ static destructors run, which aborts the process ("terminate called without an active
exception", exit status 134) after the program's own work succeeded. `Standalone` registers
itself here when it starts and leaves when it is closed; the `atexit` hook closes what is left,
in reverse order of opening. atexit runs hooks last registered first, so the hook is
registered again (`run_first`) whenever something registers its own later: PySpark's kill of
its JVM, registered when the JVM starts, must run after the Spark data node was stopped.
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Protocol

log = logging.getLogger(__name__)


class Closable(Protocol):
    def close(self) -> None: ...


_lock = threading.Lock()
_open: dict[int, Closable] = {}  # id -> cluster, in order of opening


def opened(cluster: Closable) -> None:
    """Records an open cluster (closed at exit unless `closed` is called first)."""
    with _lock:
        _open[id(cluster)] = cluster
    run_first()


def closed(cluster: Closable) -> None:
    """Forgets a cluster that was closed."""
    with _lock:
        _open.pop(id(cluster), None)


def run_first() -> None:
    """(Re)registers the exit hook so it runs before every atexit hook registered so far."""
    atexit.unregister(close_all)
    atexit.register(close_all)


def close_all() -> int:
    """Closes every cluster still open, newest first; returns how many. A failing close is
    logged and the others are still closed."""
    with _lock:
        left = list(_open.values())[::-1]
        _open.clear()
    for cluster in left:
        try:
            cluster.close()
        except Exception as exc:  # exiting anyway: say why, close the rest
            log.warning("closing a cluster at exit failed: %s", exc)
    return len(left)
