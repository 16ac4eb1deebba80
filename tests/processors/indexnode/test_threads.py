"""Index build threads (`processors.indexnode.threads`): a fixed count when configured, the
machine's idle cores otherwise, and a builder thread that yields to ingest and search."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from vectorlog.processors.indexnode.threads import BuildThreads, cpu_times, lower_builder_priority


def samples(*times: tuple[int, int] | None) -> Callable[[], tuple[int, int] | None]:
    """Returns a sampler handing out `times` in turn."""
    it = iter(times)
    return lambda: next(it)


def test_a_configured_count_is_used_without_sampling() -> None:
    threads = BuildThreads(3, cores=8, sample=samples())  # sampling would raise StopIteration
    assert threads.for_build() == 3


@pytest.mark.parametrize(
    ("idle", "expected"),
    [(1000, 4), (500, 2), (260, 1), (0, 1)],  # of 1000 jiffies over the window, on 4 cores
)
def test_automatic_takes_the_idle_cores_and_at_least_one(idle: int, expected: int) -> None:
    threads = BuildThreads(0, cores=4, sample=samples((100, 1000), (100 + idle, 2000)), window_s=0)
    assert threads.for_build() == expected


def test_automatic_without_proc_stat_builds_with_one_thread(tmp_path: Path) -> None:
    assert cpu_times(tmp_path / "missing") is None
    assert BuildThreads(0, cores=4, sample=lambda: None, window_s=0).for_build() == 1


def test_proc_stat_is_read_as_idle_plus_iowait_over_all_ticks(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 1 5 70 4 0 2 0 3 0\ncpu0 5 0 2 35 2 0 1 0 0 0\n")
    assert cpu_times(stat) == (74, 92)


def test_the_machine_sample_is_a_count_between_one_and_the_cores() -> None:
    threads = BuildThreads(0, window_s=0.05)
    assert 1 <= threads.for_build() <= threads.cores


def test_the_builder_thread_runs_at_a_lower_priority_than_the_rest() -> None:
    seen: dict[str, int] = {}

    def builder() -> None:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        lower_builder_priority()
        seen["before"], seen["after"] = before, os.getpriority(os.PRIO_PROCESS, tid)

    t = threading.Thread(target=builder)
    t.start()
    t.join(10)
    assert seen["after"] > seen["before"] or seen["before"] == 19
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert main == seen["before"]  # only the builder thread was lowered
