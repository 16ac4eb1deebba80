"""The query node's dead letters (issue 7, items 5, 7 and 13), on both backends: an event it
cannot apply never takes the rest of its pack with it; while its dead letter cannot be
written, tsafe stays behind it; the letter names the real dml topic, once per record."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.streams.flaky import FlakyLog
from tests.support import on_backends, unique_topic, wait_until
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.model import DataType, quick_schema
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event
from vectorlog.streams.deadletter import parse, read_dead_letters
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.scan import read_all
from vectorlog.streams.topics import Serdes, Topics

CID = 9
SCHEMA = quick_schema(2, "L2").validated()


def created(ts: int) -> Event:
    body = {
        "collection_id": CID,
        "collection_name": "c",
        "schema": SCHEMA.to_avro(),
        "shards_num": 1,
        "vchannels": ["v0"],
        "pchannels": [0],
        "partitions": [{"partition_id": 1, "partition_name": "_default"}],
        "properties": {},
    }
    return Event("CollectionCreated", ts, body, CID, "v0")


def inserted(ts: int, pk: int, cid: int = CID) -> Event:
    pk_field, vec_field = SCHEMA.fields
    columns = [
        {
            "field_id": pk_field.field_id,
            "field_name": pk_field.name,
            "column": encode_column(DataType.INT64, np.array([pk])),
        },
        {
            "field_id": vec_field.field_id,
            "field_name": vec_field.name,
            "column": encode_column(DataType.FLOAT_VECTOR, np.zeros((1, 2)), 2),
        },
    ]
    body = {
        "collection_id": cid,
        "partition_id": 1,
        "segment_id": 1,
        "num_rows": 1,
        "first_row_id": pk,
        "columns": columns,
    }
    return Event("RowsInserted", ts, body, cid, "v0")


@pytest.fixture
def topics(log: Log) -> Topics:
    t = Topics(unique_topic("qn"), 1)
    t.ensure(log)
    return t


@pytest.fixture
def flaky(log: Log, topics: Topics) -> FlakyLog:
    return FlakyLog(log, topics.dlq)


@pytest.fixture
def node(flaky: FlakyLog, topics: Topics) -> Iterator[QueryNode]:
    qn = QueryNode(flaky, topics, Serdes())
    yield qn
    qn.close()


def append(log: Log, topics: Topics, *events: Event) -> list[int]:
    serde = Serdes().for_topic(topics.dml)
    return log.append(topics.dml, [Append(0, serde.encode(e)) for e in events])


@on_backends()
def test_tsafe_stays_behind_an_event_whose_dead_letter_cannot_be_written(
    log: Log, topics: Topics, flaky: FlakyLog, node: QueryNode
):
    t0 = compose(wall_ms())
    flaky.down.set()
    tick = Event("TimeTick", t0 + 10, {"source": "test"})
    unknown, good = inserted(t0 + 2, 1, cid=424242), inserted(t0 + 3, 2)
    offsets = append(log, topics, created(t0 + 1), unknown, good, tick)
    node.start()
    wait_until(lambda: flaky.failures >= 2, 15, "dead-letter appends that failed")
    append(log, topics, Event("TimeTick", t0 + 20, {"source": "test"}))
    seen = flaky.failures
    wait_until(lambda: flaky.failures > seen + 1, 15, "more failed appends")
    assert node.tsafe([0]) < t0 + 10, "tsafe passed an event neither applied nor dead-lettered"
    flaky.down.clear()
    node.wait_tsafe([0], t0 + 20, 15)
    assert [r["id"] for r in node.get(CID, [1, 2], t0 + 20, ["id"])] == [2]
    (letter,) = read_dead_letters(log, topics.dlq)
    assert (letter.topic, letter.partition, letter.offset) == (topics.dml, 0, offsets[1])
    assert "CollectionNotFound" in letter.reason and letter.processor == "querynode"


@on_backends()
def test_a_restarted_node_writes_no_second_dead_letter(log: Log, topics: Topics):
    """It replays dml from offset 0 at every start: each bad record comes back each time."""
    t0 = compose(wall_ms())
    future = Event("TimeTick", compose(wall_ms() + 86_400_000), {"source": "x"})
    bad = append(log, topics, created(t0 + 1), inserted(t0 + 2, 1, cid=424242), future)[1:]
    append(log, topics, inserted(t0 + 3, 2), Event("TimeTick", t0 + 10, {"source": "test"}))
    for _ in range(4):
        qn = QueryNode(log, topics, Serdes())
        qn.start()
        qn.wait_tsafe([0], t0 + 10, 15)  # past both bad records
        assert qn.tsafe([0]) == t0 + 10 and qn.count(CID, t0 + 10) == 1
        qn.close()
    letters = [parse(r) for r in read_all(log, topics.dlq)]
    assert sorted(d.offset for d in letters) == bad
    reasons = {d.offset: d.reason for d in letters}
    assert "CollectionNotFound" in reasons[bad[0]]
    assert "timestamp from the future" in reasons[bad[1]]
