"""The proxy's fan-out over query nodes (runners.fanout) with fake nodes: a read merges the
owners' shares; it waits while a pchannel has no owner and answers completely once one
serves it; an answer from a dead epoch or a node that stopped serving is dropped and asked
again of the new owner; a pchannel no node could load fails the read naming its segment."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from vectorlog.core.errors import CollectionNotFound, ServiceUnavailable
from vectorlog.core.results import SearchResult
from vectorlog.processors.querycoord.assignment import Assignment, Owner
from vectorlog.processors.querycoord.errors import NoQueryNode, NotServing, SegmentsNotLoadable
from vectorlog.rpc import wire
from vectorlog.rpc.methods import QUERYSHARD
from vectorlog.runners import fanout as fanout_module
from vectorlog.runners.fanout import FanOutQueryNodes

P = 4
#: rows per pchannel: ids p, p + 4, p + 8, ... (100 rows in all), at distance = id
ROWS = {p: list(range(p, 100, P)) for p in range(P)}


class Follower:
    """The assignment a test sets; `waiting` is set once a read waits for a change."""

    def __init__(self, a: Assignment) -> None:
        self.assignment, self.cond, self.waiting = a, threading.Condition(), threading.Event()

    def set(self, a: Assignment) -> None:
        with self.cond:
            self.assignment = replace(a, version=self.assignment.version + 1)
            self.cond.notify_all()

    def wait_change(self, version: int, timeout: float) -> Assignment:
        self.waiting.set()
        with self.cond:
            self.cond.wait_for(lambda: self.assignment.version > version, timeout)
            return self.assignment


class Node:
    """A fake query node answering from ROWS as `epoch` (or failing with `fail`)."""

    def __init__(self, name: str, epoch: int) -> None:
        self.name, self.epoch = name, epoch
        self.fail: Exception | None = None
        self.tsafe, self.ops = 42, Counter[str]()

    def read(self, op: str, ps: list[int], ts: int, timeout: float, args: dict[str, Any]) -> Any:
        self.ops[op] += 1
        if self.fail is not None:
            raise self.fail
        results = [[p, True, self._one(op, p, args)] for p in ps]
        tsafes = [[p, self.tsafe] for p in ps]
        return {"node": self.name, "epoch": self.epoch, "results": results, "tsafes": tsafes}

    def start_read(
        self, op: str, ps: list[int], ts: int, timeout: float, args: dict[str, Any]
    ) -> Any:
        """As QueryShardClient's: the answer (or the failure) comes when waited for."""
        return lambda: self.read(op, ps, ts, timeout, args)

    def _one(self, op: str, p: int, args: dict[str, Any]) -> Any:
        if op == "tsafe":
            return self.tsafe
        if op == "count":
            return len(ROWS[p])
        if op == "search":  # as a query node answers: arrays
            ids = np.asarray(ROWS[p][: args["limit"]], np.int64)
            offsets = np.asarray([0, len(ids)], np.int64)
            return SearchResult(ids, ids.astype(np.float32), offsets, {})
        return 0


def owners(*names: str, epoch: int = 1) -> dict[tuple[int, int], Owner]:
    """(pchannel p, replica 0) -> names[p % len(names)]."""
    return {(p, 0): Owner(names[p % len(names)], epoch, names[p % len(names)]) for p in range(P)}


def fanout(a: Assignment, nodes: dict[str, Node], timeout: float = 30) -> FanOutQueryNodes:
    return FanOutQueryNodes(Follower(a), P, timeout, connect=lambda address: nodes[address])  # type: ignore[arg-type]


def test_a_read_merges_the_shares_of_every_owner():
    nodes = {"a": Node("a", 1), "b": Node("b", 1)}
    f = fanout(Assignment(1, owners=owners("a", "b")), nodes)
    assert f.count(5, ts=10) == 100
    (hits,) = f.search(5, np.zeros((1, 2)), 5, 10, None, [], offset=3, metric="L2")
    assert [h["id"] for h in hits] == [3, 4, 5, 6, 7]


def test_a_pchannel_without_owner_makes_the_read_wait_then_answer_completely():
    nodes = {"a": Node("a", 1), "b": Node("b", 1)}
    half = {slot: o for slot, o in owners("a", "b").items() if o.node == "a"}
    f = fanout(Assignment(1, owners=half), nodes)
    out: list[int] = []
    reader = threading.Thread(target=lambda: out.append(f.count(5, ts=10)))
    reader.start()
    assert f.follower.waiting.wait(30)  # type: ignore[attr-defined]
    assert out == []  # not answered with half the rows
    f.follower.set(Assignment(owners=owners("a", "b")))  # type: ignore[attr-defined]
    reader.join(30)
    assert out == [100]


def test_an_answer_of_a_dead_epoch_is_dropped_and_asked_again_of_the_new_owner():
    stale = Node("b", 1)  # came back after being declared dead; b registered again as 2
    nodes = {"a": Node("a", 1), "b": stale}
    again = {(1, 0): Owner("b", 2, "b"), (3, 0): Owner("b", 2, "b")}
    a = Assignment(1, owners={**owners("a", "b"), **again})
    f = fanout(replace(a, dead=frozenset({("b", 1)})), nodes)
    out: list[int] = []
    reader = threading.Thread(target=lambda: out.append(f.count(5, ts=10)))
    reader.start()
    assert f.follower.waiting.wait(30)  # type: ignore[attr-defined]
    assert out == [] and f.dropped >= 1
    f.follower.set(replace(a, owners=owners("a")))  # type: ignore[attr-defined]
    reader.join(30)
    assert out == [100]


def test_an_owner_that_stopped_serving_or_cannot_be_reached_is_waited_for_until_the_timeout():
    nodes = {"a": Node("a", 1), "b": Node("b", 1)}
    nodes["b"].fail = NotServing("b", 1, [1, 3])
    with pytest.raises(NoQueryNode, match=r"pchannels \[1, 3\] within 0.5 s"):
        fanout(Assignment(1, owners=owners("a", "b")), nodes, timeout=0.5).count(5, ts=10)
    nodes["b"].fail = ServiceUnavailable("QueryShard", "b", "gone")
    with pytest.raises(NoQueryNode):
        fanout(Assignment(1, owners=owners("a", "b")), nodes, timeout=0.5).count(5, ts=10)


def test_a_pchannel_no_node_could_load_fails_the_read_naming_its_segment():
    nodes = {"a": Node("a", 1)}
    half = {slot: o for slot, o in owners("a", "b").items() if o.node == "a"}
    failed = {1: "a: RecoveryFailed: segment 4711: bad binlog", 3: "a: the same"}
    f = fanout(Assignment(1, owners=half, failed=failed), nodes)
    with pytest.raises(SegmentsNotLoadable, match="pchannel 1: a: RecoveryFailed: segment 4711"):
        f.count(5, ts=10)


def test_a_collection_on_no_pchannel_is_not_found():
    class Absent(Node):
        def read(self, op: str, ps: list[int], ts: int, timeout: float, args: Any) -> Any:
            return {"node": self.name, "epoch": 1, "results": [[p, False, None] for p in ps]}

    f = fanout(Assignment(1, owners=owners("a")), {"a": Absent("a", 1)})
    with pytest.raises(CollectionNotFound):
        f.count(5, ts=10)


def test_with_two_copies_a_failing_node_is_replaced_by_the_other_copy_at_once():
    nodes = {"a": Node("a", 1), "b": Node("b", 1)}
    nodes["b"].fail = ServiceUnavailable("QueryShard", "b", "killed")
    copies = {(p, r): Owner(n, 1, n) for p in range(P) for r, n in enumerate("ab")}
    f = fanout(Assignment(1, owners=copies, replicas=2), nodes, timeout=0.5)
    for _ in range(4):  # whichever copy comes first in turn, no read waits or fails
        assert f.count(5, ts=10) == 100
    assert not f.follower.waiting.is_set()  # type: ignore[attr-defined]


def test_the_tsafe_a_read_needs_comes_with_the_last_answers_while_they_are_fresh(monkeypatch):
    nodes = {"a": Node("a", 1), "b": Node("b", 1)}
    f = fanout(Assignment(1, owners=owners("a", "b")), nodes)
    monkeypatch.setattr(fanout_module, "TSAFE_FRESH_S", 3600.0)
    assert f.count(5, ts=10) == 100
    nodes["a"].tsafe = nodes["b"].tsafe = 50  # applied further since: a lower bound is kept
    assert f.tsafe(range(P)) == 42  # from the count's answers: no node asked again
    assert nodes["a"].ops["tsafe"] == nodes["b"].ops["tsafe"] == 0
    monkeypatch.setattr(fanout_module, "TSAFE_FRESH_S", -1.0)  # too old: asked of the owners
    assert f.tsafe(range(P)) == 50
    assert nodes["a"].ops["tsafe"] == nodes["b"].ops["tsafe"] == 1


class WireNode(Node):
    """A fake node reading its request as it crossed the network (QueryShard ShardRead)."""

    def read(self, op: str, ps: list[int], ts: int, timeout: float, args: dict[str, Any]) -> Any:
        method = QUERYSHARD.methods["ShardRead"]
        sent = {"op": op, "pchannels": ps, "ts": ts, "timeout": timeout, "args": args}
        request = wire.encode_request(QUERYSHARD.name, method, sent)
        got = wire.decode_request(QUERYSHARD.name, method, request)
        return super().read(op, got["pchannels"], got["ts"], got["timeout"], got["args"])


def test_a_search_over_two_nodes_answers_as_one_node_with_its_arguments_sent_once_encoded():
    """The search's arguments, encoded once for both nodes, reach each as sent: the merged
    answer over two nodes equals one node's over every pchannel."""
    one = fanout(Assignment(1, owners=owners("a")), {"a": WireNode("a", 1)})
    two = fanout(
        Assignment(1, owners=owners("a", "b")), {"a": WireNode("a", 1), "b": WireNode("b", 1)}
    )
    queries = np.zeros((1, 4), np.float32)
    for limit, offset in ((5, 0), (7, 3), (40, 10)):
        expected = one.search(5, queries, limit, 10, None, [], offset=offset, metric="L2")
        found = two.search(5, queries, limit, 10, None, [], offset=offset, metric="L2")
        assert [[h["id"] for h in q] for q in found] == [[h["id"] for h in q] for q in expected]
        assert [h["id"] for h in found[0]] == list(range(offset, offset + limit))
    assert two.count(5, ts=10) == one.count(5, ts=10) == 100
