"""Malformed events on the log go to the dead-letter topic; processors keep going."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.clients import ClientFactory, log_events, own_letters
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.model import DataType
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.sdk import probes
from vectorlog.streams.deadletter import DeadLetter, is_dead_letter, parse
from vectorlog.streams.log.base import Append, Record
from vectorlog.streams.scan import read_all


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py); the dead
    letters a test reads are those of records appended since it began."""
    return shared_client


def created_schema(client: Client, name: str) -> dict[str, Any]:
    """Returns the schema, as the log carries it, of the collection `name` was created as."""
    ddl = log_events(client, client.cluster.topics.ddl)
    (body,) = [
        e.body for e in ddl if e.type == "CollectionCreated" and e.body["collection_name"] == name
    ]
    return dict(body["schema"])


def letters(client: Client, processor: str = "querynode") -> list[DeadLetter]:
    """Returns the dead letters one processor wrote (each consumer of a bad record writes one)
    about records appended since the test began, every one on the dlq: reading it writes
    nothing to it."""
    return [d for d in own_letters(client, every_letter(client)) if d.processor == processor]


def every_letter(client: Client) -> list[DeadLetter]:
    """Returns every dead letter on the dlq, duplicates included."""
    records = read_all(client.cluster.log, client.cluster.topics.dlq)
    return [parse(r) for r in records if is_dead_letter(r)]


def test_undecodable_dml_record_is_dead_lettered_and_ingestion_goes_on(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    node = client.cluster
    partition = probes.pchannels(client, "c")[0]
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
    with probes.stamped(client, "test") as ts:
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
        probes.now(client),
        {
            "collection_id": 12345,
            "collection_name": "c",
            "schema": created_schema(client, "c"),
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
    info = client.describe_collection("c")
    cid = info["collection_id"]
    body = {
        "collection_id": cid,
        "partition_id": probes.partition_ids(client, "c").get(partition, -7),
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
    return Event("RowsInserted", ts, body, cid, info["virtual_channel_names"][0])


def append_event(client: Client, event: Event) -> None:
    node = client.cluster
    pch = probes.pchannels(client, "c")[0]
    node.log.append(
        node.topics.dml, [Append(pch, node.serdes.for_topic(node.topics.dml).encode(event))]
    )


def test_poison_event_leaves_the_replica_intact(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}  # the replica exists
    with probes.stamped(client, "test"):
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
    with probes.stamped(client, "test") as ts:
        stale.ts = ts
        append_event(client, stale)
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    assert client.get("c", [5]) == []


def test_rows_for_an_unknown_collection_are_dead_lettered(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    event = rows_event(client, 0, 1)
    event.body["collection_id"] = 424242
    with probes.stamped(client, "test") as ts:
        event.ts = ts
        append_event(client, event)
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    (letter,) = letters(client)
    assert "CollectionNotFound" in letter.reason and "424242" in letter.reason


def positions(found: list[DeadLetter]) -> list[tuple[str, str, int, int]]:
    return sorted((d.processor, d.topic, d.partition, d.offset) for d in found)


def test_each_bad_record_is_dead_lettered_once_however_often_the_cluster_restarts(
    open_client: ClientFactory,
):
    """The query node replays dml from 0 at every start, the data node from its checkpoint;
    neither writes a second dead letter for a record (issue 7, item 7)."""
    client = open_client()
    client.create_collection("c", dimension=2, metric_type="L2")
    node = client.cluster
    dml, pch = node.topics.dml, probes.pchannels(client, "c")[0]
    unknown = rows_event(client, 0, 9)
    unknown.body["collection_id"] = 424242
    with probes.stamped(client, "test") as ts:
        unknown.ts = ts
        bad = [Append(pch, b"\x00garbage"), Append(pch, node.serdes.for_topic(dml).encode(unknown))]
        offsets = node.log.append(dml, bad)
    (coord_offset,) = node.log.append(node.topics.coord, [Append(0, b"\x01\x02")])
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    want = [(p, dml, pch, o) for p in ("datanode", "querynode") for o in offsets]
    want = sorted(want + [("datacoord", node.topics.coord, 0, coord_offset)])
    wait_until(lambda: positions(every_letter(client)) == want, 15, "every dead letter")
    for i in range(3):
        client.close()
        client = open_client()
        client.insert("c", [{"id": 10 + i, "vector": [1.0, 0.0]}])
        assert client.get_collection_stats("c") == {"row_count": 2 + i}
    assert client.flush("c", timeout=30)  # the data node consumed past the bad records again
    found = every_letter(client)
    assert positions(found) == want
    # decode and apply failures name the same topic
    assert {d.topic for d in found if d.processor == "querynode"} == {dml}


def dlq_records(client_args: dict[str, Any]) -> int:
    """Counts the records on the dlq of a cluster that is not open (reading writes nothing)."""
    from vectorlog.config import Config, open_log
    from vectorlog.streams.topics import Topics

    cfg = Config.load(log=client_args["uri"], cluster=client_args.get("cluster", "vectorlog"))
    log = open_log(cfg)
    try:
        return len(list(read_all(log, Topics(cfg.cluster).dlq)))
    finally:
        log.close()


def test_the_cli_prints_each_dead_letter_once_and_writes_nothing(
    open_client: ClientFactory, client_args: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    """`vectorlog dead-letters` appended an end marker to the dlq, then crashed on it at its
    next run (KeyError: 'reason'); earlier versions also wrote a letter per restart."""
    from vectorlog import cli
    from vectorlog.streams.deadletter import encode

    client = open_client()
    client.create_collection("c", dimension=2, metric_type="L2")
    node = client.cluster
    pch = probes.pchannels(client, "c")[0]
    (offset,) = node.log.append(node.topics.dml, [Append(pch, b"\x00garbage")])
    client.insert("c", [{"id": 1, "vector": [0.0, 0.0]}])
    assert client.get_collection_stats("c") == {"row_count": 1}
    (letter,) = wait_until(lambda: letters(client, "datanode"), 15, "the data node's letter")
    marker = EventSerde().encode(Event("TimeTick", 0, {"source": "end-marker"}))
    again = encode(
        Record(node.topics.dml, pch, offset, b"\x00garbage"),
        letter.reason,
        "datanode",
        node.log.max_message_bytes,
    )
    node.log.append(node.topics.dlq, [Append(0, marker), again])  # as older versions left it
    client.close()
    before = dlq_records(client_args)
    argv = ["dead-letters", "--uri", client_args["uri"]]
    argv += ["--cluster", client_args["cluster"]] if "cluster" in client_args else []
    runs = []
    for _ in range(2):
        assert cli.main(argv) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] and dlq_records(client_args) == before
    printed = [json.loads(line) for line in runs[0].splitlines()]
    assert sorted((p["processor"], p["topic"], p["partition"], p["offset"]) for p in printed) == [
        (p, node.topics.dml, pch, offset) for p in ("datanode", "querynode")
    ]
    assert all(p["bytes"] == len(b"\x00garbage") and not p["truncated"] for p in printed)
