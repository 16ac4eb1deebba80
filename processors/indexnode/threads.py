"""How many cores an index build takes: the cores the machine leaves idle when it starts.

`VECTORLOG_INDEX_BUILD_THREADS=N` (N >= 1) fixes the faiss (OpenMP) threads of every build.
The default, 0, is automatic: before each build of a real index (a segment of at least
`MIN_ROWS_TO_INDEX` rows), the idle time of the cores this process may run on is sampled over
a short window (/proc/stat), and the build takes the cores found idle (at least one, at most
the cores the process may run on). So a build uses the whole machine while it is otherwise
quiet, and one core while ingest or searches (of this process or of any other) keep the others
busy. One core then is not slower: faiss splits an HNSW add between its OpenMP threads in
equal static shares, so a build on two cores that are not both free waits for the slower
share, and costs more CPU besides (100,000 GloVe-50d rows at load 9-25: 12.1-12.4 CPU s and
39-44 s with one thread, 13.6-15.1 CPU s and 47-78 s with two; benchmarks/results/
hnsw_build.md). Nor do more threads than idle cores buy a larger share of a busy machine: the
kernel's autogroup scheduling shares the CPU between sessions, not threads (1, 2 and 4 threads
run side by side at load 36-46: 116.6, 132.3 and 116.0 s). Where /proc/stat cannot be read,
the process's own CPU time is sampled instead and the build takes the cores it leaves idle.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from pathlib import Path

SAMPLE_S = 0.2
PROC_STAT = Path("/proc/stat")


def usable_cpus() -> set[int]:
    """Returns the ids of the CPUs this process may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def idle_seconds(cpus: Collection[int], stat: Path = PROC_STAT) -> float:
    """Returns the idle (and I/O wait) seconds so far of the CPUs `cpus`, summed, from the
    kernel's per-CPU counters. Raises OSError if `stat` cannot be read or has none of them."""
    tick = os.sysconf("SC_CLK_TCK")
    total, seen = 0, 0
    for line in stat.read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            total, seen = total + int(fields[3]) + int(fields[4]), seen + 1
    if not seen:
        raise OSError(f"{stat} has no counters of CPUs {sorted(cpus)}")
    return total / tick


def machine_idle_clock(cpus: Collection[int]) -> Callable[[], float] | None:
    """Returns a clock of the idle seconds of `cpus`, or None where there is none to read."""
    try:
        idle_seconds(cpus)
    except (OSError, ValueError, IndexError):
        return None
    return lambda: idle_seconds(cpus)


def process_idle_clock(
    cores: int, clock: Callable[[], float] = time.process_time
) -> Callable[[], float]:
    """Returns a clock of the core-seconds this process leaves idle of `cores` (`clock`: its
    CPU seconds), as if no other process ran."""
    return lambda: cores * time.monotonic() - clock()


class BuildThreads:
    """The thread count of the next build: `configured` if >= 1, else the cores found idle
    over `window_s` seconds by `idle` (a clock of idle core-seconds; default: the machine's
    usable cores' from /proc/stat, else what this process leaves idle)."""

    def __init__(
        self,
        configured: int,
        cores: int | None = None,
        idle: Callable[[], float] | None = None,
        window_s: float = SAMPLE_S,
    ) -> None:
        cpus = usable_cpus()
        self.configured, self.cores, self._window = configured, cores or len(cpus), window_s
        self._idle = idle or machine_idle_clock(cpus) or process_idle_clock(self.cores)

    def for_build(self) -> int:
        """Returns the threads the next build takes (samples the cores when automatic)."""
        if self.configured >= 1:
            return self.configured
        started, before = time.monotonic(), self._idle()
        time.sleep(self._window)
        elapsed = max(time.monotonic() - started, 1e-6)
        return max(1, min(self.cores, round((self._idle() - before) / elapsed)))
