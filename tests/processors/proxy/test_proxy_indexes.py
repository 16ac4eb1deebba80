"""Unit tests of the proxy's index requests (issue 8, Milvus's index semantics): the search
metric and parameters it resolves for the query node, and describe_index's progress from the
index node (an in-memory twin of IndexNodeService); rootcoord and the query node are twins."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.processors.proxy.test_proxy import Parts
from vectorlog.core.errors import IndexNotFound, InvalidArgument
from vectorlog.core.types import IndexSpec, SearchOptions
from vectorlog.processors.indexnode.service import FAILED, IN_PROGRESS, IndexProgress
from vectorlog.processors.proxy.proxy import Proxy
from vectorlog.streams.log.base import Log
from vectorlog.streams.topics import Serdes

pytestmark = pytest.mark.parametrize("log", ["embedded", "kafka"], indirect=True)
QUERY = [[0.0, 0.0, 0.0, 1.0]]


@dataclass
class FakeIndexNode:
    """IndexNodeService answering a set progress; records what it was asked."""

    answer: IndexProgress
    asked: list[tuple[int, int]] = field(default_factory=list)

    def progress(self, collection_id: int, index_id: int) -> IndexProgress:
        self.asked.append((collection_id, index_id))
        return self.answer


@pytest.fixture
def parts(log: Log) -> Parts:
    p = Parts(log)
    p.qn.known.add(100)
    p.qn.tsafe_ts = 10**18
    return p


def index(parts: Parts, spec: IndexSpec, index_id: int = 7) -> None:
    """Puts `spec` into the twin rootcoord's collection "books" as rootcoord would."""
    info = parts.rc.collections["books"]
    body = spec.event_body(info, index_id)
    info.indexes[body["index_name"]] = body | {"created_ts": 1}


def with_index_node(parts: Parts, node: FakeIndexNode) -> Proxy:
    return Proxy("p2", parts.rc, parts.dc, parts.qn, parts.log, parts.topics, Serdes(), 0.2, node)


def test_search_passes_the_index_metric_and_its_params_to_the_query_node(parts: Parts):
    parts.proxy.search("books", QUERY)
    assert parts.qn.search_args == {"params": {}, "metric": "L2"}  # no index: the field's
    index(parts, IndexSpec("vector", "HNSW", "ip", {"M": 8}))
    options = SearchOptions(search_params={"metric_type": "IP", "params": {"ef": "32"}})
    parts.proxy.search("books", QUERY, options=options)
    assert parts.qn.search_args == {"params": {"ef": 32}, "metric": "IP"}
    options = SearchOptions(search_params={"params": {"nprobe": 4, "radius": 0.5}})
    parts.proxy.search("books", QUERY, options=options)
    assert parts.qn.search_args == {"params": {"nprobe": 4, "radius": 0.5}, "metric": "IP"}
    reads = len(parts.qn.reads)
    bad: list[tuple[dict[str, Any], str]] = [
        ({"metric_type": "L2"}, r"'L2' does not match the index's 'IP' \(metric type not match\)"),
        ({"params": {"ef": "x"}}, r"search_params\['params'\]\['ef'\] must be a positive"),
        ({"params": {"nprobe": 0}}, r"\['nprobe'\] must be a positive integer, not 0"),
    ]
    for search_params, match in bad:
        with pytest.raises(InvalidArgument, match=match):
            parts.proxy.search("books", QUERY, options=SearchOptions(search_params=search_params))
    assert len(parts.qn.reads) == reads  # refused before reading


def test_describe_index_reports_the_index_node_progress(parts: Parts):
    index(parts, IndexSpec("vector", "IVF_FLAT", "IP", {"nlist": "16"}, "v"), index_id=7)
    index(parts, IndexSpec("id", "STL_SORT"), index_id=8)
    node = FakeIndexNode(IndexProgress(1000, 3000, 2000, IN_PROGRESS))
    proxy = with_index_node(parts, node)
    assert proxy.describe_index("books", "v") == {
        "index_type": "IVF_FLAT",
        "metric_type": "IP",
        "params": {"nlist": 16},
        "field_name": "vector",
        "index_name": "v",
        "total_rows": 3000,
        "indexed_rows": 1000,
        "pending_index_rows": 2000,
        "state": "InProgress",
    }
    assert node.asked == [(100, 7)]
    node.answer = IndexProgress(0, 3000, 3000, FAILED, "bad segment")
    assert proxy.describe_index("books", "v")["index_state_fail_reason"] == "bad segment"
    scalar = proxy.describe_index("books", "id")  # built like a vector index, no metric
    assert scalar["index_type"] == "STL_SORT" and "metric_type" not in scalar
    assert (scalar["total_rows"], scalar["state"]) == (3000, "Failed")
    idle = parts.proxy.describe_index("books", "v")  # no index node: nothing to build
    assert (idle["total_rows"], idle["pending_index_rows"], idle["state"]) == (0, 0, "Finished")
    with pytest.raises(IndexNotFound, match="'nope'"):
        proxy.describe_index("books", "nope")


def test_create_index_checks_and_skips_an_identical_index(parts: Parts):
    with pytest.raises(InvalidArgument, match="'nlist'"):
        parts.proxy.create_index("books", IndexSpec("vector", "IVF_FLAT", params={"nlist": -1}))
    spec = IndexSpec("vector", "HNSW", "IP", {"M": 8})
    index(parts, spec)
    parts.proxy.create_index("books", IndexSpec("vector", "hnsw", "ip", {"M": "8"}))  # the same
    parts.proxy.create_index("books", IndexSpec("vector", "HNSW", "L2"))  # rootcoord refuses
    assert [(kind, args[1]) for kind, args in parts.rc.ddl] == [
        ("create_index", IndexSpec("vector", "HNSW", "L2"))
    ]
