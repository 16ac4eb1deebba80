"""Group commit (`streams.log.groupcommit`): concurrent appends share one write, each caller
gets its own result only once that write completed, and a failed write fails its group only."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from tests.support import wait_until
from vectorlog.streams.log.groupcommit import GroupCommit


class GatedWrites:
    """A commit function whose first write waits for `release`, so later callers queue."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.release = threading.Event()
        self.writes: list[list[str]] = []
        self.fail_on = fail_on

    def __call__(self, requests: Sequence[str]) -> list[str]:
        if not self.writes:
            self.writes.append(list(requests))
            self.release.wait(10)
        else:
            self.writes.append(list(requests))
        if self.fail_on in requests:
            raise OSError(f"disk said no to {self.fail_on}")
        return [f"done:{r}" for r in requests]


def submit_all(
    group: GroupCommit[str, str], names: list[str]
) -> tuple[dict[str, object], list[threading.Thread]]:
    """Submits each name from its own thread; returns ({name: result or exception}, filled
    in as the calls return, and the threads)."""
    out: dict[str, object] = {}

    def call(name: str) -> None:
        try:
            out[name] = group.submit(name)
        except OSError as exc:
            out[name] = exc

    threads = [threading.Thread(target=call, args=(n,)) for n in names]
    for t in threads:
        t.start()
    return out, threads


def test_requests_queued_behind_a_write_share_the_next_one() -> None:
    writes = GatedWrites()
    group: GroupCommit[str, str] = GroupCommit(writes)
    first, t1 = submit_all(group, ["a"])
    wait_until(lambda: len(writes.writes) == 1, timeout=10, what="the first write to start")
    rest, t2 = submit_all(group, ["b", "c", "d"])
    wait_until(lambda: group.queued == 3, timeout=10, what="three requests queued")
    writes.release.set()
    for t in t1 + t2:
        t.join(10)
    assert first == {"a": "done:a"}
    assert rest == {"b": "done:b", "c": "done:c", "d": "done:d"}
    assert writes.writes[0] == ["a"] and sorted(writes.writes[1]) == ["b", "c", "d"]
    assert (group.stats.requests, group.stats.writes, group.stats.largest_group) == (4, 2, 3)


def test_a_failed_write_fails_every_request_it_carried_and_no_other() -> None:
    writes = GatedWrites(fail_on="c")
    group: GroupCommit[str, str] = GroupCommit(writes)
    first, t1 = submit_all(group, ["a"])
    wait_until(lambda: len(writes.writes) == 1, timeout=10, what="the first write to start")
    rest, t2 = submit_all(group, ["b", "c"])
    wait_until(lambda: group.queued == 2, timeout=10, what="two requests queued")
    writes.release.set()
    for t in t1 + t2:
        t.join(10)
    assert first == {"a": "done:a"}
    assert all(isinstance(rest[n], OSError) for n in ("b", "c")), rest
    assert group.submit("e") == "done:e"  # the next leader writes again


def test_a_lone_caller_writes_at_once() -> None:
    group: GroupCommit[str, str] = GroupCommit(lambda reqs: [r.upper() for r in reqs])
    assert [group.submit(x) for x in "xyz"] == ["X", "Y", "Z"]
    assert (group.stats.requests, group.stats.writes) == (3, 3)
    with pytest.raises(ZeroDivisionError):
        GroupCommit[str, str](lambda reqs: [str(1 / 0)]).submit("boom")


def test_a_lone_callers_failed_write_lets_the_next_caller_lead() -> None:
    writes = GatedWrites(fail_on="a")
    writes.release.set()
    group: GroupCommit[str, str] = GroupCommit(writes)
    with pytest.raises(OSError, match="no to a"):
        group.submit("a")
    assert group.submit("b") == "done:b" and writes.writes == [["a"], ["b"]]
    assert (group.stats.requests, group.stats.writes, group.stats.largest_group) == (2, 2, 1)
