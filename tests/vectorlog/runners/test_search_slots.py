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
