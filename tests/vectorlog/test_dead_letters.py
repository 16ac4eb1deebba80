"""Malformed events on the log go to the dead-letter topic; processors keep going."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.clients import ClientFactory
from tests.support import wait_until
from vectorlog import Client
from vectorlog.model import DataType
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.deadletter import parse
from vectorlog.streams.log.base import Append
from vectorlog.streams.scan import read_to_end


def letters(client: Client, processor: str = "querynode") -> list[Any]:
    """Returns the dead letters one processor wrote (each consumer of a bad record writes one)."""
    records = read_to_end(client.cluster.log, client.cluster.topics.dlq)
    every = [parse(r) for r in records if not _end_marker(r.value)]
    return [letter for letter in every if letter.processor == processor]


def _end_marker(value: bytes) -> bool:
    """read_to_end appends an end marker (a TimeTick) to the topic it reads (issue 7, item 7)."""
    try:
        return EventSerde().decode(value).type == "TimeTick"
    except Exception:
        return False


def test_undecodable_dml_record_is_dead_lettered_and_ingestion_goes_on(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    node = client.cluster
    partition = node.proxy.describe_collection("c").pchannels[0]
    (offset,) = node.log.append(node.topics.dml, [Append(partition, b"\x00garbage")])
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert [h["id"] for h in client.search("c", [[0.0, 0.0]])[0]] == [1]
    (letter,) = letters(client)
    assert (letter.topic, letter.partition, letter.offset) == (node.topics.dml, partition, offset)
    assert letter.value == b"\x00garbage" and "schema registry" in letter.reason
    assert letter.processor == "querynode"
    # the data node consumes the same record: it dead-letters it too, and goes on
    (by_datanode,) = wait_until(lambda: letters(client, "datanode"), 10, "the data node's letter")
    assert (by_datanode.partition, by_datanode.offset) == (partition, offset)
    assert client.flush("c", timeout=20) and client.get_collection_stats("c") == {"row_count": 1}


def test_event_that_breaks_the_schema_is_dead_lettered(client: Client):
    """An external producer writes rows of the wrong dimension straight onto the log."""
    client.create_collection("c", dimension=2, metric_type="L2")
    with client.cluster.rootcoord.tick_source("test").stamp() as ts:
        append_event(client, rows_event(client, ts, 9, dim=3))
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    (letter,) = letters(client)
    assert "vector dim 3 != schema dim 2" in letter.reason
    assert (
        client.cluster.serdes.for_topic(client.cluster.topics.dml)
        .decode(letter.value)
        .body["num_rows"]
        == 1
    )


def test_bad_ddl_on_the_log_is_dead_lettered_at_replay(open_client: ClientFactory):
    client = open_client()
    client.create_collection("c", dimension=2)
    node = client.cluster
    dup = Event(
        "CollectionCreated",
        node.rootcoord.now(),
        {
            "collection_id": 12345,
            "collection_name": "c",
            "schema": node.proxy.describe_collection("c").schema.to_avro(),
            "shards_num": 1,
            "vchannels": ["x"],
            "pchannels": [0],
            "partitions": [{"partition_id": 12346, "partition_name": "_default"}],
            "properties": {},
        },
        12345,
    )
    ddl = node.topics.ddl
    node.log.append(
        ddl,
        [Append(0, b"not an event"), Append(0, node.serdes.for_topic(node.topics.dml).encode(dup))],
    )
    client.close()
    again = open_client()  # replays the two records: both refused, the rest goes on
    reasons = sorted(d.reason for d in letters(again, "rootcoord"))
    assert len(reasons) == 2
    assert "CollectionExists" in reasons[0] and "magic" in reasons[1]
    assert again.list_collections() == ["c"]
    again.create_collection("d", dimension=2)
    assert again.list_collections() == ["c", "d"]


def rows_event(
    client: Client, ts: int, pk: int, partition: str = "_default", dim: int = 2
) -> Event:
    """Returns a RowsInserted event of collection "c" with one row, built by hand."""
    info = client.cluster.proxy.describe_collection("c")
    body = {
        "collection_id": info.collection_id,
        "partition_id": info.partitions.get(partition, -7),
        "segment_id": 1,
        "num_rows": 1,
        "first_row_id": 1,
        "columns": [
            {
                "field_id": 100,
                "field_name": "id",
                "column": encode_column(DataType.INT64, np.array([pk])),
            },
            {
                "field_id": 101,
                "field_name": "vector",
                "column": encode_column(DataType.FLOAT_VECTOR, np.zeros((1, dim)), dim),
            },
        ],
    }
    return Event("RowsInserted", ts, body, info.collection_id, info.vchannels[0])


def append_event(client: Client, event: Event) -> None:
    node = client.cluster
    pch = node.proxy.describe_collection("c").pchannels[0]
    node.log.append(
        node.topics.dml, [Append(pch, node.serdes.for_topic(node.topics.dml).encode(event))]
    )


def test_poison_event_leaves_the_replica_intact(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}  # the replica exists
    with client.cluster.rootcoord.tick_source("test").stamp():
        append_event(client, rows_event(client, -1, 2))  # a negative ts
    client.insert("c", [{"id": 3, "vector": [1.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 2}
    assert [h["id"] for h in client.search("c", [[0.0, 0.0]])[0]] == [1, 3]
    (letter,) = letters(client)
    assert "ts -1" in letter.reason


def test_rows_for_a_dropped_partition_are_discarded(client: Client):
    """A proxy that resolved the partition before it was dropped inserts after the drop."""
    client.create_collection("c", dimension=2, metric_type="L2")
    client.create_partition("c", "p")
    stale = rows_event(client, 0, 5, "p")
    client.drop_partition("c", "p")
    with client.cluster.rootcoord.tick_source("test").stamp() as ts:
        stale.ts = ts
        append_event(client, stale)
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    assert client.get("c", [5]) == []


def test_rows_for_an_unknown_collection_are_dead_lettered(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    event = rows_event(client, 0, 1)
    event.body["collection_id"] = 424242
    with client.cluster.rootcoord.tick_source("test").stamp() as ts:
        event.ts = ts
        append_event(client, event)
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    (letter,) = letters(client)
    assert "CollectionNotFound" in letter.reason and "424242" in letter.reason
