"""rpc.callers.Callers (the fan-out's concurrent calls): calls handed over run at once on
threads that stay, each waiter gets its own result or error, and close ends the threads."""

from __future__ import annotations

import functools
import threading

import pytest

from vectorlog.rpc.callers import Callers


def _threads(name: str) -> int:
    return sum(t.name == name for t in threading.enumerate())


def test_calls_run_at_once_and_each_waiter_gets_its_own_outcome():
    callers = Callers("test-callers-at-once")
    both = threading.Barrier(3, timeout=30)  # two calls and this thread: all at once

    def call(i: int) -> int:
        both.wait()
        return i

    waits = [callers.start(functools.partial(call, i)) for i in range(2)]
    both.wait()
    assert [w() for w in waits] == [0, 1]
    failed = callers.start(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed()
    callers.close()


def test_calls_one_after_another_reuse_one_thread_and_close_ends_it():
    name = "test-callers-reuse"
    callers = Callers(name)
    squares = [callers.start(functools.partial(pow, i, 2))() for i in range(20)]
    assert squares == [i * i for i in range(20)]
    assert _threads(name) == 1
    callers.close()
    for t in [t for t in threading.enumerate() if t.name == name]:
        t.join(30)
    assert _threads(name) == 0
    with pytest.raises(RuntimeError, match="closed"):
        callers.start(lambda: 1)
