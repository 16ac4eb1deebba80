"""FetchedAfter (runners/fetched_after.py): concurrent callers share fetches, and each gets the
value of a fetch begun after it called, never an older one (what a Strong read's timestamp
and the end of the ddl topic need)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support import wait_until
from vectorlog.runners.fetched_after import FetchedAfter


class Gate:
    """A fetch that returns how many fetches began, held until released."""

    def __init__(self) -> None:
        self.begun = 0
        self.entered = threading.Semaphore(0)
        self.release = threading.Semaphore(0)

    def fetch(self) -> int:
        self.begun += 1
        began = self.begun
        self.entered.release()
        self.release.acquire()
        return began


def test_a_caller_alone_fetches_once_per_call():
    n = iter(range(1, 100))
    shared = FetchedAfter(lambda: next(n))
    assert [shared.get() for _ in range(3)] == [1, 2, 3]
    assert shared.fetches == 3


def test_callers_during_a_fetch_wait_for_the_next_one_and_share_it():
    gate = Gate()
    shared = FetchedAfter(gate.fetch)
    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(shared.get)
        gate.entered.acquire()  # fetch 1 is in flight: begun before the others called
        later = [pool.submit(shared.get) for _ in range(5)]
        wait_until(lambda: shared.waiting == 5, 10, "five calls waiting")
        gate.release.release()
        gate.entered.acquire()  # fetch 2, begun after the five called
        gate.release.release()
        assert first.result() == 1
        assert [f.result() for f in later] == [2] * 5
    assert shared.fetches == 2


def test_a_failed_fetch_fails_its_callers_and_the_next_call_fetches_again():
    calls: list[Exception | int] = [RuntimeError("broker down"), 7]

    def fetch() -> int:
        got = calls.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    shared = FetchedAfter(fetch)
    with pytest.raises(RuntimeError, match="broker down"):
        shared.get()
    assert shared.get() == 7
