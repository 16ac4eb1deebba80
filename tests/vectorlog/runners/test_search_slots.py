"""A query node's search threads (VECTORLOG_QUERYNODE_SEARCH_THREADS) in the scale-out: its
reads (ShardNode.read, RPC QueryShard.ShardRead) run on the RPC server's threads, and a node
given N search threads runs faiss on N OpenMP threads there, not on one per core (the
setting made at the process's start pinned its main thread only)."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import faiss
import pytest

from tests.support import unique_topic
from vectorlog.runners.shards import ShardNode
from vectorlog.streams.log.base import Log
from vectorlog.streams.topics import Serdes, Topics

#: faiss untyped (its stubs lack the OpenMP functions)
FAISS: Any = faiss


class FakeQueryNode:
    """A pchannel's QueryNode that records the OpenMP threads each search would run on."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def tsafe(self, pchannels: list[int]) -> int:
        return 100

    def wait_tsafe(self, pchannels: list[int], ts: int, timeout: float) -> None:
        return None

    def search(self, **args: Any) -> str:
        self.threads.append(FAISS.omp_get_max_threads())
        return "hits"

    def close(self) -> None:
        return None


def read_on_a_new_thread(node: ShardNode) -> dict[str, Any]:
    """Returns the node's answer to a search of pchannel 0, read on a thread of its own (as
    the RPC server's are: no OpenMP setting of their own)."""
    answer: dict[str, Any] = {}
    t = threading.Thread(target=lambda: answer.update(node.read("search", [0], 1, 5.0, {})))
    t.start()
    t.join()
    return answer


@pytest.mark.parametrize("search_threads", [1, 3])
def test_a_nodes_reads_search_on_its_search_threads(log: Log, search_threads: int) -> None:
    topics = Topics(cluster=unique_topic("slots"))
    ts = itertools.count(1)
    node = ShardNode(
        "querynode1", log, topics, Serdes(), lambda p: None, lambda: next(ts),  # type: ignore[arg-type,return-value]
        search_threads=search_threads,
    )  # fmt: skip
    qn = FakeQueryNode()
    node.instances[0] = qn  # type: ignore[assignment]
    answer = read_on_a_new_thread(node)
    assert answer["results"] == [[0, True, "hits"]]
    assert qn.threads == [search_threads]


class OrderedQueryNode(FakeQueryNode):
    """A pchannel's QueryNode that records the order of the searches of two reads, "A" (ts
    1) and "B" (ts 2): A's first search lasts until B has arrived, and A's wait for tsafe
    on its second pchannel until B searched (or a second passed)."""

    def __init__(self, p: int, order: list[str], arrived: threading.Event) -> None:
        super().__init__()
        self.p, self.order, self.arrived = p, order, arrived
        self.b_searched = threading.Event()

    def wait_tsafe(self, pchannels: list[int], ts: int, timeout: float) -> None:
        if ts == 2:
            self.arrived.set()
        elif self.p == 1:
            self.b_searched.wait(1.0)

    def search(self, **args: Any) -> str:
        if args["who"] == "A" and self.p == 0:
            self.arrived.wait(5.0)
        self.order.append(f"{args['who']}{self.p}")
        if args["who"] == "B":
            self.b_searched.set()
        return "hits"

    def query(self, **args: Any) -> str:
        return self.search(**args)


def test_a_node_with_one_search_thread_answers_each_read_whole_in_turn(log: Log) -> None:
    """Two reads (queries: a search's answers are merged, the fake's are not results) of two
    pchannels each on a node with one search thread: each read's pchannels run together,
    never one of the other read's in between (which left both to finish at about twice one
    read's time)."""
    ts = itertools.count(1)
    node = ShardNode(
        "querynode1", log, Topics(cluster=unique_topic("slots")), Serdes(), lambda p: None,  # type: ignore[arg-type,return-value]
        lambda: next(ts), search_threads=1,
    )  # fmt: skip
    order: list[str] = []
    arrived = threading.Event()
    qns = [OrderedQueryNode(p, order, arrived) for p in (0, 1)]
    qns[1].b_searched = qns[0].b_searched = threading.Event()
    node.instances.update({0: qns[0], 1: qns[1]})  # type: ignore[dict-item]
    reads = [
        threading.Thread(target=node.read, args=("query", [0, 1], t, 5.0, {"who": who}))
        for t, who in ((1, "A"), (2, "B"))
    ]
    for r in reads:
        r.start()
    for r in reads:
        r.join()
    assert order in (["A0", "A1", "B0", "B1"], ["B0", "B1", "A0", "A1"])
