"""How many cores an index build takes: the cores this process leaves idle when it starts.

`VECTORLOG_INDEX_BUILD_THREADS=N` (N >= 1) fixes the faiss (OpenMP) threads of every build.
The default, 0, is automatic: before each build of a real index (a segment of at least
`MIN_ROWS_TO_INDEX` rows), this process's CPU time is sampled over a short window, and the
build takes the cores that time leaves free (at least one, at most the cores the process may
run on). So a build uses the whole machine while the process is otherwise quiet, as Milvus's
index node does, and one core while ingest or searches of the same process keep the others
busy; in cluster mode the index node is a process of its own and builds on every core. Other
processes are left to the kernel's scheduler, as they are for Milvus.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

SAMPLE_S = 0.1


def usable_cores() -> int:
    """Returns the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class BuildThreads:
    """The thread count of the next build: `configured` if >= 1, else the cores the process
    left idle over the last `window_s` seconds (`clock`: the process's CPU seconds)."""

    def __init__(
        self,
        configured: int,
        cores: int | None = None,
        clock: Callable[[], float] = time.process_time,
        window_s: float = SAMPLE_S,
    ) -> None:
        self.configured, self.cores = configured, cores or usable_cores()
        self._clock, self._window = clock, window_s

    def for_build(self) -> int:
        """Returns the threads the next build takes (samples the process when automatic)."""
        if self.configured >= 1:
            return self.configured
        started, cpu = time.monotonic(), self._clock()
        time.sleep(self._window)
        elapsed = max(time.monotonic() - started, 1e-6)
        busy = (self._clock() - cpu) / elapsed  # cores this process kept busy meanwhile
        return max(1, min(self.cores, round(self.cores - busy)))
