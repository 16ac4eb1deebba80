"""`QueryNode` across drops (issue 7, item 14): packs applied by hand, as its consumer would.

Each pchannel brings its own copy of a drop, and pchannels are applied independently, so a
pchannel behind may still bring events stamped before a drop that another one applied. A
dropped collection is kept for reads as of before its drop until the applied ticks pass it
by the retention window; then it is freed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.processors.querynode.test_replica import P1, rows_inserted, schema
from tests.support import unique_topic
from vectorlog.core.errors import CollectionNotFound
from vectorlog.core.hybridts import compose
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Log
from vectorlog.streams.msgstream import MsgPack
from vectorlog.streams.topics import Serdes, Topics

CID = 7
MS = 1 << 18  # one physical millisecond in hybrid ts


@pytest.fixture
def node(log: Log) -> Iterator[QueryNode]:
    topics = Topics(unique_topic("qn"), 2)
    topics.ensure(log)
    qn = QueryNode(log, topics, Serdes(), retention_ms=1000)
    yield qn
    qn.close()


def pack(partition: int, end_ts: int, *events: Event) -> MsgPack:
    return MsgPack(partition, 0, end_ts, list(events), 0, -1)


def event(kind: str, ts: int, **body: Any) -> Event:
    return Event(kind, ts, {"collection_id": CID, **body}, CID)


def created(ts: int) -> Event:
    return event("CollectionCreated", ts, schema=schema().to_avro())


def inserted(ts: int, ids: list[int]) -> Event:
    return Event("RowsInserted", ts, rows_inserted(schema(), ids), CID)


T0 = compose(1_000_000)


def test_a_pchannel_behind_a_drop_still_brings_rows_stamped_before_it(node: QueryNode):
    node.apply(pack(0, T0, created(T0 - 2)))
    node.apply(pack(1, T0, created(T0 - 2)))
    node.apply(pack(0, T0 + 20, event("PartitionDropped", T0 + 10, partition_id=P1)))
    node.apply(pack(1, T0 + 20, inserted(T0 + 5, [1, 2])))
    assert node.count(CID, T0 + 9) == 2 and node.count(CID, T0 + 10) == 0
    node.apply(pack(0, T0 + 40, event("CollectionDropped", T0 + 30)))
    node.apply(pack(1, T0 + 40, inserted(T0 + 25, [3]), event("CollectionDropped", T0 + 30)))
    assert node.count(CID, T0 + 29) == 0  # in P1, dropped at T0 + 10
    assert [r["id"] for r in node.get(CID, [1, 3], T0 + 9, ["id"])] == [1]
    with pytest.raises(CollectionNotFound):
        node.count(CID, T0 + 30)


def test_a_dropped_replica_is_kept_for_the_retention_window_then_freed(node: QueryNode):
    node.apply(pack(0, T0, created(T0 - 2), inserted(T0 - 1, [1])))
    node.apply(pack(0, T0 + MS, event("CollectionDropped", T0 + 1)))
    node.apply(pack(0, T0 + 1000 * MS))  # the window (1000 ms) has not passed the drop yet
    assert node.count(CID, T0) == 1
    node.apply(pack(0, T0 + 1002 * MS))
    assert CID not in node.replicas
    with pytest.raises(CollectionNotFound):
        node.count(CID, T0)
    node.apply(pack(1, T0 + 1002 * MS, inserted(T0 - 1, [2])))  # a late copy: ignored
    assert CID not in node.replicas
