"""Index build threads (`processors.indexnode.threads`): a fixed count when configured, else
the cores found idle (the machine's, from /proc/stat, or what this process leaves idle), at
least one."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vectorlog.processors.indexnode.threads import (
    BuildThreads,
    idle_seconds,
    machine_idle_clock,
    process_idle_clock,
    usable_cpus,
)


def readings(*values: float) -> Callable[[], float]:
    """Returns a clock handing out `values` in turn."""
    it: Iterator[float] = iter(values)
    return lambda: next(it)


def cores_idle(n: float) -> Callable[[], float]:
    """Returns an idle clock of a machine with `n` cores idle all along."""
    return lambda: n * time.monotonic()


def test_a_configured_count_is_used_without_sampling() -> None:
    threads = BuildThreads(3, cores=8, idle=readings())  # sampling would raise StopIteration
    assert threads.for_build() == 3


@pytest.mark.parametrize(("idle", "expected"), [(4.0, 4), (2.8, 3), (1.2, 1), (0.3, 1), (6, 4)])
def test_automatic_takes_the_cores_found_idle(idle: float, expected: int) -> None:
    threads = BuildThreads(0, cores=4, idle=cores_idle(idle), window_s=0.05)
    assert threads.for_build() == expected


@pytest.mark.parametrize(("busy", "expected"), [(0.0, 4), (1.0, 3), (2.1, 2), (3.5, 1)])
def test_without_proc_stat_the_cores_the_process_leaves_idle(busy: float, expected: int) -> None:
    process_cpu = cores_idle(busy)  # this process keeps `busy` cores busy
    idle = process_idle_clock(4, clock=process_cpu)
    assert BuildThreads(0, cores=4, idle=idle, window_s=0.05).for_build() == expected


def test_the_idle_time_of_the_usable_cpus_is_read_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    lines = ["cpu  9 9 9 900 90 0 0 0 0 0"]
    lines += [f"cpu{i} 1 1 1 {100 * (i + 1)} {10 * (i + 1)} 0 0 0 0 0" for i in range(4)]
    stat.write_text("\n".join([*lines, "intr 5 6", "ctxt 7"]) + "\n")
    tick = os.sysconf("SC_CLK_TCK")
    assert idle_seconds({1, 3}, stat) == pytest.approx((220 + 440) / tick)
    with pytest.raises(OSError, match="no counters of CPUs"):
        idle_seconds({7}, stat)


def test_this_machine_has_an_idle_clock_and_a_build_takes_one_to_all_cores() -> None:
    assert machine_idle_clock(usable_cpus()) is not None  # Linux: /proc/stat
    assert 1 <= BuildThreads(0).for_build() <= len(usable_cpus())
