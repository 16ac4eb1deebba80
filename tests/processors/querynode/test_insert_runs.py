"""A time tick's pack of inserts is applied in runs (querynode/insertruns.py, issue 28): what
a query node serves after it is what applying each insert in a pack of its own serves, at
every ts, upserts and other partitions among them included; a bad insert among them is
dead-lettered alone, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.processors.querynode.test_querynode_dead_letters import append, created
from tests.processors.querynode.test_querynode_dead_letters import inserted as one_row
from tests.processors.querynode.test_replica import DIM, P1, P2, rows_inserted, schema
from tests.support import on_backends, unique_topic
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.processors.querynode.querynode import QueryNode
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.log.base import Log
from vectorlog.streams.msgstream import MsgPack
from vectorlog.streams.topics import Serdes, Topics

CID = 7
T0 = compose(1_000_000)
FIELDS = ["id", "vec", "tag", "n", "doc"]
FLOAT_VECTOR = DataType.FLOAT_VECTOR


def node_on(log: Log) -> QueryNode:
    topics = Topics(unique_topic("runs"), 1)
    topics.ensure(log)
    return QueryNode(log, topics, Serdes())


@pytest.fixture
def nodes(log: Log) -> Iterator[tuple[QueryNode, QueryNode]]:
    together, alone = node_on(log), node_on(log)
    yield together, alone
    together.close()
    alone.close()


def inserted(ts: int, ids: list[int], partition: int = P1, **values: Any) -> Event:
    body = rows_inserted(schema(), ids, partition=partition, **values)
    body |= {"segment_id": 100 + partition, "first_row_id": ids[0] * 10}
    return Event("RowsInserted", ts, body, CID)


def created_event() -> Event:
    return Event("CollectionCreated", T0 - 1, {"collection_id": CID, "schema": schema().to_avro()})


def served(node: QueryNode, ts: int, fields: list[str] = FIELDS) -> tuple[Any, ...]:
    """What a reader sees at `ts`: the count, every key's row, a search's ids and distances."""
    rows = node.get(CID, list(range(12)), ts, fields)
    rows = sorted(({**r, "vec": list(np.asarray(r["vec"]))} for r in rows), key=str)
    (hits,) = node.search(CID, np.full((1, DIM), 2.5), 20, ts, None, [])
    return node.count(CID, ts), rows, [(h["id"], round(h["distance"], 4)) for h in hits]


def test_a_ticks_inserts_serve_what_they_serve_applied_one_by_one(
    nodes: tuple[QueryNode, QueryNode],
):
    events = [
        inserted(T0 + 1, [1]),
        inserted(T0 + 2, [2], tag=["two"]),
        inserted(T0 + 3, [3], doc=[{"nested": [1, 2]}]),
        inserted(T0 + 4, [2], vectors=[[9.0] * DIM], tag=["upserted"]),  # the same key again
        inserted(T0 + 5, [4]),
        inserted(T0 + 6, [5], partition=P2),  # another partition between runs
        inserted(T0 + 7, [6, 7]),
        inserted(T0 + 8, [1], n=[-1]),  # an upsert of the first key
        inserted(T0 + 9, [8]),
    ]
    together, alone = nodes
    together.apply(MsgPack(0, 0, T0, [created_event()], 0, -1))
    alone.apply(MsgPack(0, 0, T0, [created_event()], 0, -1))
    together.apply(MsgPack(0, T0, T0 + 10, events, 0, -1))
    for e in events:
        alone.apply(MsgPack(0, e.ts - 1, e.ts, [e], 0, -1))
    for ts in range(T0, T0 + 11):
        assert served(together, ts) == served(alone, ts), f"at T0 + {ts - T0}"
    assert served(together, T0 + 10)[0] == 8


@on_backends()
def test_a_bad_insert_among_a_ticks_inserts_is_dead_lettered_alone(log: Log):
    topics = Topics(unique_topic("runs"), 1)
    topics.ensure(log)
    node = QueryNode(log, topics, Serdes())
    try:
        t0 = compose(wall_ms())
        bad = one_row(t0 + 3, 2)
        bad.body["columns"][1]["column"] = encode_column(FLOAT_VECTOR, np.zeros((1, 3)), 3)
        tick = Event("TimeTick", t0 + 10, {"source": "test"})
        inserts = [one_row(t0 + 2, 1), bad, one_row(t0 + 4, 3), one_row(t0 + 5, 4)]
        offsets = append(log, topics, created(t0 + 1), *inserts, tick)
        node.start()
        node.wait_tsafe([0], t0 + 10, 15)
        found = node.get(9, [1, 2, 3, 4], t0 + 10, ["id"])
        assert sorted(r["id"] for r in found) == [1, 3, 4]
        (letter,) = read_dead_letters(log, topics.dlq)
        assert letter.offset == offsets[2] and letter.processor == "querynode"
    finally:
        node.close()


NUMERIC = ["id", "vec", "n", "x", "flag"]


def numeric_schema() -> CollectionSchema:
    """Fields whose columns a run decodes a field at a time (schemas.columns.joined_columns)."""
    return CollectionSchema(
        (
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("vec", FLOAT_VECTOR, dim=DIM, metric_type="L2"),
            FieldSchema("n", DataType.INT64),
            FieldSchema("x", DataType.DOUBLE),
            FieldSchema("flag", DataType.BOOL),
        )
    ).validated()


def numeric(ts: int, ids: list[int], partition: int = P1, vectors: Any = None) -> Event:
    s = numeric_schema()
    vecs = np.asarray(vectors if vectors is not None else [[float(i)] * DIM for i in ids])
    cols = {
        "id": ids,
        "vec": vecs,
        "n": [i * 10 + ts % 7 for i in ids],
        "x": [i / 4 for i in ids],
        "flag": [i % 2 == 0 for i in ids],
    }
    columns = [
        {
            "field_id": f.field_id,
            "field_name": f.name,
            "column": encode_column(f.dtype, cols[f.name], f.dim),
        }
        for f in s.fields
    ]
    body: dict[str, Any] = {"collection_id": CID, "partition_id": partition, "num_rows": len(ids)}
    body |= {"segment_id": 100 + partition, "first_row_id": ids[0] * 10, "columns": columns}
    return Event("RowsInserted", ts, body, CID)


def test_a_ticks_numeric_inserts_decoded_a_field_at_a_time_serve_what_they_serve_one_by_one(
    nodes: tuple[QueryNode, QueryNode],
):
    events = [
        numeric(T0 + 1, [1]),
        numeric(T0 + 2, [2]),
        numeric(T0 + 3, [3, 4]),
        numeric(T0 + 4, [2], vectors=[[9.0] * DIM]),  # the same key again: runs split here
        numeric(T0 + 5, [5]),
        numeric(T0 + 6, [6], partition=P2),
        numeric(T0 + 7, [7]),
        numeric(T0 + 8, [8]),
    ]
    together, alone = nodes
    created = {"collection_id": CID, "schema": numeric_schema().to_avro()}
    for node in nodes:
        node.apply(MsgPack(0, 0, T0, [Event("CollectionCreated", T0 - 1, created)], 0, -1))
    replica = together.replicas[CID]
    assert replica.prepared_run([(e.ts, e.body) for e in events[:3]]) is not None
    assert replica.prepared_run([(e.ts, e.body) for e in events[:4]]) is None  # key 2 twice
    together.apply(MsgPack(0, T0, T0 + 10, events, 0, -1))
    for e in events:
        alone.apply(MsgPack(0, e.ts - 1, e.ts, [e], 0, -1))
    for ts in range(T0, T0 + 11):
        assert served(together, ts, NUMERIC) == served(alone, ts, NUMERIC), f"at T0 + {ts - T0}"
    assert served(together, T0 + 10, NUMERIC)[0] == 8
