"""`QueryNode` loading segment indexes from the coord topic (issue 8), on both log backends:
SegmentIndexed events are replayed from offset 0, wait for their rows, load once per
(segment, index); SegmentIndexesDropped goes back to exact search."""

from __future__ import annotations

import numpy as np
import pytest

from tests.processors.querynode.index_support import (
    CID,
    INDEX_ID,
    DictFiles,
    exact_top,
    inserted_body,
    segment_indexed,
)
from tests.processors.querynode.test_querynode import pack
from tests.processors.querynode.test_replica import P1, schema
from tests.support import wait_until
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.hybridts import compose
from vectorlog.demo.datasets import glove
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.topics import Serdes, Topics

DIM, SEG, T0 = 50, 1, compose(2_000_000)
SCHEMA = schema("L2", DIM)


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return glove(1200)[0]


def coord(log: Log, topics: Topics, kind: str, body: dict[str, object]) -> None:
    event = Event(kind, T0, body, CID)
    log.append(topics.coord, [Append(0, Serdes().for_topic(topics.coord).encode(event))])


def rows(node: QueryNode, x: np.ndarray, lo: int, hi: int, seg: int, ts: int) -> None:
    body = inserted_body(SCHEMA, list(range(lo, hi)), x[lo:hi], seg, 1000 + lo, P1)
    node.apply(pack(0, ts, Event("RowsInserted", ts, body, CID)))


def created(node: QueryNode) -> None:
    body = {"collection_id": CID, "schema": SCHEMA.to_avro()}
    node.apply(pack(0, T0, Event("CollectionCreated", T0 - 1, body, CID)))


def top_ids(node: QueryNode, q: np.ndarray, metric: str = "L2") -> list[list[int]]:
    hits = node.search(CID, q, 10, T0 + 1000, None, [], metric=metric)
    return [[h["id"] for h in per] for per in hits]


def test_an_index_on_the_coord_topic_is_loaded_once_and_dropped_back_to_exact(
    node: QueryNode, log: Log, topics: Topics, files: DictFiles, x: np.ndarray
):
    created(node)
    rows(node, x, 0, 1000, SEG, T0 + 1)
    rows(node, x, 1000, 1200, SEG + 1, T0 + 2)  # growing
    body = segment_indexed(files, "HNSW", x[:1000], 1000 + np.arange(1000), "L2", SEG, P1)
    coord(log, topics, "SegmentIndexed", body)
    coord(log, topics, "SegmentIndexed", body)  # repeated: loaded once
    loader = node.indexes
    assert loader is not None
    loader.start()
    replica = node.replicas[CID]
    wait_until(lambda: replica.serving(P1, SEG) == INDEX_ID, 30, "the index loaded")
    wait_until(lambda: loader.offset == 2 and not loader.pending, 30, "both read")
    assert files.reads == 3  # the index, row id and checksums files: the repeat was not read
    q = x[[3, 1100, 500]]
    truth = exact_top(x, q, 10, "L2")
    got = top_ids(node, q)
    assert [g[0] for g in got] == [3, 1100, 500]
    assert np.mean([len(set(g) & set(t)) / 10 for g, t in zip(got, truth, strict=True)]) >= 0.9
    with pytest.raises(InvalidArgument, match=r"'IP'.*'L2'"):
        top_ids(node, q, "IP")
    coord(log, topics, "SegmentIndexesDropped", {"collection_id": CID, "index_id": INDEX_ID})
    wait_until(lambda: replica.serving(P1, SEG) is None, 30, "the index unloaded")
    assert top_ids(node, q) == truth
    assert top_ids(node, q, "IP") == exact_top(x, q, 10, "IP")  # exact: any metric


def test_a_pending_load_completes_once_its_rows_are_applied(
    node: QueryNode, log: Log, topics: Topics, files: DictFiles, x: np.ndarray
):
    body = segment_indexed(files, "IVF_FLAT", x[:1000], 1000 + np.arange(1000), "L2", SEG, P1)
    coord(log, topics, "SegmentIndexed", body)
    loader = node.indexes
    assert loader is not None
    loader.start()
    wait_until(lambda: loader.offset == 1, 30, "the event read")
    created(node)
    rows(node, x, 0, 600, SEG, T0 + 1)
    replica = node.replicas[CID]
    assert replica.serving(P1, SEG) is None and loader.pending
    rows(node, x, 600, 1000, SEG, T0 + 2)
    # The loader serves the index, then forgets the pending load: wait for both.
    wait_until(
        lambda: replica.serving(P1, SEG) == INDEX_ID and not loader.pending, 30, "the index loaded"
    )
    assert [g[0] for g in top_ids(node, x[[10, 900]])] == [10, 900]


def test_a_new_node_replays_the_coord_topic_skipping_what_it_cannot_use(
    node: QueryNode, log: Log, topics: Topics, files: DictFiles, x: np.ndarray
):
    log.append(topics.coord, [Append(0, b"not an event")])
    missing = segment_indexed(files, "FLAT", x[:10], 5000 + np.arange(10), "L2", SEG + 5, P1)
    missing["index_file"] = "index_files/gone/index.faiss"
    coord(log, topics, "SegmentIndexed", missing)
    body = segment_indexed(files, "HNSW", x[:1000], 1000 + np.arange(1000), "L2", SEG, P1)
    coord(log, topics, "SegmentIndexed", body)
    created(node)
    rows(node, x, 0, 1000, SEG, T0 + 1)
    loader = node.indexes
    assert loader is not None
    loader.start()  # a node starting now: it reads coord from offset 0
    replica = node.replicas[CID]
    wait_until(lambda: replica.serving(P1, SEG) == INDEX_ID, 30, "the index loaded")
    assert loader.offset == 3 and replica.serving(P1, SEG + 5) is None
    assert [g[0] for g in top_ids(node, x[[10, 900]])] == [10, 900]
