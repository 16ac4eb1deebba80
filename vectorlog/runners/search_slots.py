"""`SearchSlots`: at most N of a query node's reads at once, each on N OpenMP threads at most
(VECTORLOG_QUERYNODE_SEARCH_THREADS).

OpenMP's thread count is a per-thread setting: `faiss.omp_set_num_threads(1)` made at the
process's start pinned its main thread only, and the RPC server's threads, which run the
reads, kept one OpenMP thread per core. A search of several queries (the proxy coalesces
them: runners.coalesce) then ran them in parallel over every core, however few search
threads the node was given. A read holding a slot now sets its own thread's count first.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

import faiss

#: faiss untyped (its stubs lack the OpenMP functions)
_FAISS: Any = faiss


class SearchSlots:
    """A context manager: entering takes one of `n` slots (waiting for one) and sets the
    calling thread's OpenMP threads to `n`; `n` 0: no limit on either (entering does
    nothing)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._slots = threading.BoundedSemaphore(n) if n else None

    def __enter__(self) -> None:
        if self._slots is None:
            return
        self._slots.acquire()
        _FAISS.omp_set_num_threads(self.n)  # this thread's (a few ns in OpenMP)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._slots is not None:
            self._slots.release()
