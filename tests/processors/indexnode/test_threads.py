"""Index build threads (`processors.indexnode.threads`): a fixed count when configured, else
the cores the process leaves idle, at least one."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from vectorlog.processors.indexnode.threads import BuildThreads


def clock(*readings: float) -> Callable[[], float]:
    """Returns a CPU clock handing out `readings` in turn."""
    it: Iterator[float] = iter(readings)
    return lambda: next(it)


def test_a_configured_count_is_used_without_sampling() -> None:
    threads = BuildThreads(3, cores=8, clock=clock())  # sampling would raise StopIteration
    assert threads.for_build() == 3


@pytest.mark.parametrize(
    ("busy_cpu_s", "expected"),
    [(0.0, 4), (0.1, 3), (0.2, 2), (0.4, 1), (0.9, 1)],  # CPU seconds over a 0.1 s window
)
def test_automatic_takes_the_cores_the_process_leaves_idle(
    busy_cpu_s: float, expected: int
) -> None:
    threads = BuildThreads(0, cores=4, clock=clock(5.0, 5.0 + busy_cpu_s), window_s=0.1)
    assert threads.for_build() == expected
