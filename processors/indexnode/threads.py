"""How many cores an index build takes: what the machine has idle when it starts.

`VECTORLOG_INDEX_BUILD_THREADS=N` (N >= 1) fixes the faiss (OpenMP) threads of every build.
The default, 0, is automatic: before each build of a real index (a segment of at least
`MIN_ROWS_TO_INDEX` rows), the machine's idle cores are sampled from `/proc/stat` over a
short window and the build takes that many (at least one, at most the cores this process may
run on). So a build uses the whole machine when it is idle and one core while ingest or
searches keep the others busy. The builder thread also runs at a lower scheduling priority
(nice +10, inherited by the OpenMP threads it starts), so the kernel prefers ingest and
search threads over a build already running. Where `/proc/stat` is missing, automatic means
one thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

PROC_STAT = Path("/proc/stat")
SAMPLE_S = 0.1
BUILDER_NICE = 10
CpuTimes = tuple[int, int]  # (idle jiffies, total jiffies) of all cores since boot


def cpu_times(stat: Path = PROC_STAT) -> CpuTimes | None:
    """Returns (idle, total) jiffies from the first line of /proc/stat, or None if absent."""
    try:
        first = stat.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu":
        return None
    ticks = [int(t) for t in first[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return idle, sum(ticks[:8])  # guest time is already counted in user and nice


def usable_cores() -> int:
    """Returns the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class BuildThreads:
    """The thread count of the next build: `configured` if >= 1, else the idle cores."""

    def __init__(
        self,
        configured: int,
        cores: int | None = None,
        sample: Callable[[], CpuTimes | None] = cpu_times,
        window_s: float = SAMPLE_S,
    ) -> None:
        self.configured, self.cores = configured, cores or usable_cores()
        self._sample, self._window = sample, window_s

    def for_build(self) -> int:
        """Returns the threads the next build takes (samples the machine when automatic)."""
        if self.configured >= 1:
            return self.configured
        before = self._sample()
        if before is None:
            return 1
        time.sleep(self._window)
        after = self._sample()
        if after is None or after[1] <= before[1]:
            return 1
        idle_share = (after[0] - before[0]) / (after[1] - before[1])
        return max(1, min(self.cores, round(idle_share * self.cores)))


def lower_builder_priority() -> None:
    """Lowers the calling thread's scheduling priority by BUILDER_NICE (Linux: per thread),
    so the OpenMP threads it starts inherit it. Logs and goes on where it cannot."""
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + BUILDER_NICE))
    except (AttributeError, OSError) as exc:
        log.info("index builds run at normal priority: %s", exc)
