"""Coalesced searches of the proxy's fan-out (runners.coalesce) with fake query nodes: two
searches of a kind go at once, the searches queued while two of the same kind are in flight
go as one search (nq the sum of theirs, at the greatest ts), and each gets what it would
have got alone; a failing batch
does not give one search's error to the others; the nq limit splits batches; searches of
other kinds (time travel, grouping, range, other filters) are not mixed."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from tests.support import wait_until
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.results import SearchResult
from vectorlog.processors.querycoord.assignment import Assignment, Owner
from vectorlog.processors.querycoord.errors import NoQueryNode
from vectorlog.runners import coalesce
from vectorlog.runners.fanout import FanOutQueryNodes

P = 4
#: rows per pchannel: ids p, p + 4, ... (200 in all); query q's distance to id i: |i - q[0]|
ROWS = {p: np.arange(p, 200, P) for p in range(P)}


class Follower:
    def __init__(self, a: Assignment) -> None:
        self.assignment = a

    def wait_change(self, version: int, timeout: float) -> Assignment:
        return self.assignment


class Node:
    """A fake query node: a search's hits are each query's nearest ids of its pchannels
    (several queries in one answer, as a query node answers them); it records each
    search's nq and ts; `gate` (if set) holds a search until it is set; a query whose
    first value is negative fails its search (InvalidArgument)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.searches: list[tuple[int, int]] = []
        self.gate: threading.Event | None = None
        self.fail: Exception | None = None

    def read(self, op: str, ps: list[int], ts: int, timeout: float, args: dict[str, Any]) -> Any:
        if op == "search":
            self.searches.append((len(args["queries"]), ts))
            if self.gate is not None:
                self.gate.wait()
            if self.fail is not None:
                raise self.fail
            if (np.asarray(args["queries"])[:, 0] < 0).any():
                raise InvalidArgument("a negative query")
        results = [[p, True, self._search(p, args) if op == "search" else 0] for p in ps]
        return {"node": self.name, "epoch": 1, "results": results, "tsafes": []}

    def start_read(
        self, op: str, ps: list[int], ts: int, timeout: float, args: dict[str, Any]
    ) -> Any:
        return lambda: self.read(op, ps, ts, timeout, args)

    @staticmethod
    def _search(p: int, args: dict[str, Any]) -> SearchResult:
        ids, dists, offsets = [], [], [0]
        keep = ROWS[p] % 3 != 0 if args["expr"] is not None else np.ones(len(ROWS[p]), bool)
        rows = ROWS[p][keep]
        for q in np.asarray(args["queries"]):
            d = np.abs(rows - q[0]).astype(np.float32)
            order = np.argsort(d, kind="stable")[: args["limit"]]
            ids.append(rows[order])
            dists.append(d[order])
            offsets.append(offsets[-1] + len(order))
        return SearchResult(
            np.concatenate(ids), np.concatenate(dists), np.asarray(offsets, np.int64), {}
        )


def fanout(*names: str) -> tuple[FanOutQueryNodes, dict[str, Node]]:
    nodes = {n: Node(n) for n in names}
    own = {(p, 0): Owner(names[p % len(names)], 1, names[p % len(names)]) for p in range(P)}
    f = FanOutQueryNodes(Follower(Assignment(1, owners=own)), P, 30, lambda a: nodes[a])  # type: ignore[arg-type]
    return f, nodes


def search(f: FanOutQueryNodes, q: float, ts: int = 10, **kw: Any) -> Any:
    """Returns the hits (ids, distances) of one search of the query (q, 0)."""
    args: dict[str, Any] = {"metric": "L2", "read_later": True} | kw
    limit = args.pop("limit", 5)
    queries = np.asarray([[q, 0.0]], np.float32)
    found = f.search(7, queries, limit, ts, None, [], **args)
    return [[(h["id"], h["distance"]) for h in hits] for hits in found]


class Searches:
    """Searches started on threads while `node` holds those sent at its gate; `run`
    releases them once the others are queued behind them, and returns every answer (or
    error) in the order started."""

    def __init__(self, f: FanOutQueryNodes, node: Node) -> None:
        self.f, self.node, self.threads = f, node, []  # type: ignore[var-annotated]
        self.answers: dict[int, Any] = {}
        self.sent = 0
        node.gate = threading.Event()

    def start(self, q: float, sent: bool = False, **kw: Any) -> None:
        """Starts a search of (q, 0); `sent`: it is to reach the node at once (this waits
        until it did), else it is to queue."""
        i = len(self.threads)

        def one() -> None:
            try:
                self.answers[i] = search(self.f, q, **kw)
            except Exception as exc:
                self.answers[i] = exc

        t = threading.Thread(target=one, daemon=True)
        self.threads.append(t)
        t.start()
        if sent:
            self.sent += 1
            wait_until(lambda: len(self.node.searches) == self.sent, 60, f"search {i} sent")

    def run(self, queued: int) -> list[Any]:
        wait_until(lambda: self.f.coalescer.queued() == queued, 60, f"{queued} searches queued")
        assert self.node.gate is not None
        self.node.gate.set()
        for t in self.threads:
            t.join()
        return [self.answers[i] for i in range(len(self.threads))]


def test_searches_queued_behind_two_in_flight_go_as_one_and_each_gets_its_own_hits():
    f, nodes = fanout("a", "b")
    alone = {q: search(fanout("a", "b")[0], q) for q in (3, 50, 101, 150.5, 7)}
    s = Searches(f, nodes["a"])
    s.start(3, sent=True, ts=10)
    s.start(50, sent=True, ts=12)  # the second of its kind goes at once too
    s.start(101, ts=17)
    s.start(150.5, ts=11)
    s.start(7, ts=13)
    assert s.run(queued=3) == [alone[3], alone[50], alone[101], alone[150.5], alone[7]]
    # the first two alone, then the three queued as one search of nq 3 at the greatest ts
    assert nodes["a"].searches == nodes["b"].searches == [(1, 10), (1, 12), (3, 17)]


def test_searches_of_other_kinds_are_not_mixed():
    f, nodes = fanout("a")
    s = Searches(f, nodes["a"])
    s.start(3, sent=True)
    s.start(50, sent=True, limit=7)  # another limit
    s.start(60, sent=True, expr=object())  # a filter
    s.start(70, sent=True, read_later=False)  # time travel: its own ts
    s.start(80, sent=True, group_by="g")  # grouping
    s.start(90, sent=True, params={"radius": 5.0})  # a range search
    s.start(100, sent=True)  # the second of s.start(3)'s kind
    s.start(110)
    s.start(120)
    answers = s.run(queued=2)  # the two more of s.start(3)'s kind
    assert not any(isinstance(a, Exception) for a in answers[:3])
    assert sorted(nq for nq, _ in nodes["a"].searches) == [1, 1, 1, 1, 1, 1, 1, 2]


def test_a_failing_batch_gives_no_member_another_ones_error():
    f, nodes = fanout("a")
    alone = search(fanout("a")[0], 50)
    s = Searches(f, nodes["a"])
    s.start(3, sent=True)
    s.start(4, sent=True)
    s.start(-1)  # fails its search, and the batch it is in
    s.start(50)
    *_, bad, good = s.run(queued=2)
    assert isinstance(bad, InvalidArgument)
    assert good == alone
    # the batch, then each alone
    assert [nq for nq, _ in nodes["a"].searches] == [1, 1, 2, 1, 1]


def test_an_error_of_the_pchannels_owners_is_each_members_own():
    f, nodes = fanout("a")
    s = Searches(f, nodes["a"])
    nodes["a"].fail = NoQueryNode([1], 30)
    s.start(3, sent=True)
    s.start(4, sent=True)
    s.start(5)
    s.start(6)
    assert all(isinstance(a, NoQueryNode) for a in s.run(queued=2))
    assert [nq for nq, _ in nodes["a"].searches] == [1, 1, 2]  # not asked again alone


def test_a_batch_holds_at_most_max_nq_queries(monkeypatch):
    monkeypatch.setattr(coalesce, "MAX_NQ", 2)
    f, nodes = fanout("a")
    s = Searches(f, nodes["a"])
    for q in (3, 4, 5, 6, 7, 8, 9):
        s.start(q, sent=q < 5)
    answers = s.run(queued=5)
    assert answers == [search(fanout("a")[0], q) for q in (3, 4, 5, 6, 7, 8, 9)]
    # two alone, then the five queued in batches of at most 2 (two batches in flight at once)
    assert sorted(nq for nq, _ in nodes["a"].searches) == [1, 1, 1, 2, 2]


@pytest.mark.parametrize("nq", [1, 3])
def test_a_search_alone_is_sent_at_once_with_its_own_ts(nq):
    f, nodes = fanout("a", "b")
    queries = np.asarray([[q, 0.0] for q in range(nq)], np.float32)
    f.search(7, queries, 5, 33, None, [], metric="L2", read_later=True)
    assert nodes["a"].searches == [(nq, 33)]
    assert f.coalescer.queued() == 0
