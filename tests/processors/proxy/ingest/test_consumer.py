"""The ingest consumer on both backends: an external producer's rows, envelopes, base64
vectors and a Debezium stream leave the collection equal to the source; bad records are
dead-lettered with their source position; a restart resumes without re-applying."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from tests.clients import ClientFactory, data_events
from tests.processors.proxy.ingest.producer import Raw, produce, wait_consumed
from tests.support import unique_topic
from vectorlog import Client
from vectorlog.processors.proxy.ingest.consumer import PROCESSOR
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.scan import read_all


def j(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def b64(vector: list[float]) -> str:
    return base64.b64encode(np.array(vector, dtype="<f4").tobytes()).decode()


def rows(client: Client) -> dict[int, list[float]]:
    """Returns the visible rows of `c` (Strong read) as {id: vector}."""
    found = client.query("c", filter="id >= 0", output_fields=["id", "vector"])
    return {r["id"]: [float(x) for x in r["vector"]] for r in found}


def debezium(op: str, before: Any, after: Any) -> bytes:
    return j(
        {"schema": {"type": "struct"}, "payload": {"before": before, "after": after, "op": op}}
    )


def test_each_format_and_a_debezium_stream_leave_the_collection_equal_to_the_source(
    open_client: ClientFactory,
):
    cdc = unique_topic("cdc")
    client = open_client(ingest_topics=f"{cdc}=c:debezium")
    client.create_collection("c", dimension=2, metric_type="L2")
    client.cluster.log.create_topic(cdc, 1)
    ingest = client.cluster.topics.ingest
    row1 = j({"id": 1, "vector": [0.5, 1.0]})
    default: list[Raw] = [
        (b"c", row1),
        (b"c", row1),  # a producer retry: idempotent
        (b"c", j([{"id": 2, "vector": b64([2.0, -1.0])}, {"id": 3, "vector": "[3.0, 0.25]"}])),
        (b"c", j({"schema": {"type": "struct"}, "payload": {"id": 4, "vector": [4.0, 4.0]}})),
        (b"c", j({"id": 3, "vector": [3.0, 3.0]})),  # an update of 3
    ]
    stream: list[Raw] = [
        (j({"id": 10}), debezium("c", None, {"id": 10, "vector": [1.0, 0.0]})),
        (j({"id": 11}), debezium("c", None, {"id": 11, "vector": [1.0, 1.0]})),
        (j({"id": 10}), debezium("u", {"id": 10}, {"id": 10, "vector": [9.0, 9.0]})),
        (j({"id": 11}), debezium("d", {"id": 11, "vector": [1.0, 1.0]}, None)),
        (j({"id": 11}), None),  # Debezium's tombstone after a delete
        (j({"id": 12}), debezium("r", None, {"id": 12, "vector": [0.0, 2.0]})),
        (j({"schema": {}, "payload": {"id": 12}}), None),  # a tombstone with a key struct
    ]
    wait_consumed(client, ingest, produce(client, ingest, default))
    wait_consumed(client, cdc, produce(client, cdc, stream))
    assert rows(client) == {
        1: [0.5, 1.0],
        2: [2.0, -1.0],
        3: [3.0, 3.0],
        4: [4.0, 4.0],
        10: [9.0, 9.0],
    }
    assert read_dead_letters(client.cluster.log, client.cluster.topics.dlq) == []


def test_a_bad_record_of_each_kind_is_dead_lettered_and_the_others_apply(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    ingest = client.cluster.topics.ingest
    bad: list[Raw] = [
        (b"c", b"{not json"),
        (b"c", b"\x00\x00\x00\x00\x07avro"),
        (b"c", j(42)),
        (None, j({"id": 5, "vector": [1.0, 1.0]})),
        (b"nope", j({"id": 5, "vector": [1.0, 1.0]})),
        (b"c", j({"id": 5, "vector": [1.0, 1.0, 1.0]})),
        (b"c", j({"id": 5, "vector": "%%%"})),
        (b"c", j({"op": "t", "before": None, "after": None})),
        (b"c", None),
    ]
    good: list[Raw] = [(b"c", j({"id": i, "vector": [float(i), 0.0]})) for i in (1, 2)]
    records = [good[0], *bad, good[1]]
    offsets = produce(client, ingest, records)
    wait_consumed(client, ingest, offsets)
    assert rows(client) == {1: [1.0, 0.0], 2: [2.0, 0.0]}
    letters = read_dead_letters(client.cluster.log, client.cluster.topics.dlq)
    letters.sort(key=lambda d: d.offset)  # decoding and applying fail at different steps
    assert [(d.topic, d.partition, d.offset) for d in letters] == [
        (ingest, 0, off) for off in offsets[1:-1]
    ]
    assert [d.value for d in letters] == [value or b"" for _, value in bad]
    assert all(d.processor == PROCESSOR for d in letters)
    expected = ["not JSON", "Confluent", "JSON object", "as its key", "CollectionNotFound"]
    expected += ["dim 3", "base64", "op 't'", "collection header"]
    for letter, why in zip(letters, expected, strict=True):
        assert why in letter.reason


def test_the_collection_header_names_the_collection_so_the_key_is_the_primary_key(
    client: Client,
):
    client.create_collection("c", dimension=2, metric_type="L2")
    ingest = client.cluster.topics.ingest
    header = (("collection", b"c"),)
    records: list[Raw] = [
        (j(1), j({"id": 1, "vector": [1.0, 0.0]})),
        (j(2), j({"id": 2, "vector": [2.0, 0.0]})),
        (j(1), None),  # a tombstone deletes key 1
    ]
    wait_consumed(client, ingest, produce(client, ingest, records, headers=header))
    assert rows(client) == {2: [2.0, 0.0]}
    assert read_dead_letters(client.cluster.log, client.cluster.topics.dlq) == []


def test_dml_events_of_another_collection_replay_into_this_one(client: Client):
    for name in ("src", "dst"):
        client.create_collection(name, dimension=2, metric_type="L2")  # dynamic field on
    client.insert("src", [{"id": i, "vector": [float(i), 1.0], "tag": f"t{i}"} for i in range(5)])
    client.upsert("src", [{"id": 1, "vector": [9.0, 9.0], "tag": "new"}])
    client.delete("src", ids=[3])
    src_id = client.describe_collection("src")["collection_id"]
    events = [
        r.value
        for r in read_all(client.cluster.log, client.cluster.topics.dml)
        if r.value[:2] == b"\xc3\x01"
        and (e := EventSerde().decode(r.value)).collection_id == src_id
        and e.type in ("RowsInserted", "RowsDeleted")
    ]
    ingest = client.cluster.topics.ingest
    records: list[Raw] = [(None, value) for value in events]
    wait_consumed(
        client, ingest, produce(client, ingest, records, headers=(("collection", b"dst"),))
    )

    def visible(name: str) -> list[str]:
        found = client.query(name, filter="id >= 0", output_fields=["id", "vector", "tag"])
        return sorted(map(str, found))

    assert visible("dst") == visible("src")
    assert read_dead_letters(client.cluster.log, client.cluster.topics.dlq) == []


def test_unknown_fields_follow_the_topic_policy(open_client: ClientFactory):
    drop, strict = unique_topic("drop"), unique_topic("strict")
    client = open_client(ingest_topics=f"{drop}=c;unknown=drop,{strict}=c;unknown=dead-letter")
    client.create_collection("c", dimension=2, metric_type="L2")  # has a dynamic field
    extra = {"id": 1, "vector": [1.0, 0.0], "colour": "red"}
    for topic in (drop, strict):
        client.cluster.log.create_topic(topic, 1)
        wait_consumed(client, topic, produce(client, topic, [(None, j(extra))]))
    assert client.query("c", filter="id >= 0", output_fields=["*"]) == [
        {"id": 1, "vector": [1.0, 0.0]}
    ]
    (letter,) = read_dead_letters(client.cluster.log, client.cluster.topics.dlq)
    assert (letter.topic, "colour") == (strict, "colour") and "colour" in letter.reason


def test_batch_size_bounds_the_records_applied_as_one_write(open_client: ClientFactory):
    topic = unique_topic("small")
    client = open_client(ingest_topics=f"{topic}=c;batch_size=2;linger_ms=200")
    client.create_collection("c", dimension=2, metric_type="L2")
    client.cluster.log.create_topic(topic, 1)
    written = len(data_events(client))
    records = [(None, j({"id": i, "vector": [float(i), 0.0]})) for i in range(6)]
    wait_consumed(client, topic, produce(client, topic, records))
    assert sorted(rows(client)) == list(range(6))
    assert len(data_events(client)) - written == 3  # 6 records, 2 per write


def test_a_restart_resumes_from_the_stored_position_without_reapplying(
    open_client: ClientFactory,
):
    client = open_client()
    client.create_collection("c", dimension=2, metric_type="L2")
    ingest = client.cluster.topics.ingest
    first = [(b"c", j({"id": i, "vector": [float(i), 1.0]})) for i in range(3)]
    wait_consumed(client, ingest, produce(client, ingest, first))
    written = len(data_events(client))
    client.close()
    client = open_client()
    later = produce(client, ingest, [(b"c", j({"id": 7, "vector": [7.0, 1.0]}))])
    wait_consumed(client, ingest, later)
    assert len(data_events(client)) == written + 1
    assert sorted(rows(client)) == [0, 1, 2, 7]


def test_a_collection_recreated_between_batches_gets_rows_fitted_to_its_new_schema(
    client: Client,
):
    client.create_collection("c", dimension=2, metric_type="L2")
    ingest = client.cluster.topics.ingest
    wait_consumed(
        client, ingest, produce(client, ingest, [(b"c", j({"id": 1, "vector": [1.0, 0.0]}))])
    )
    client.drop_collection("c")
    client.create_collection("c", dimension=3, metric_type="L2")
    second: list[Raw] = [
        (b"c", j({"id": 2, "vector": [2.0, 0.0, 1.0]})),
        (b"c", j({"id": 3, "vector": [3.0, 0.0]})),  # fits the dropped collection only
        (b"c", j({"id": 4, "vector": [4.0, 0.0, 1.0]})),
    ]
    offsets = produce(client, ingest, second)
    wait_consumed(client, ingest, offsets)
    assert rows(client) == {2: [2.0, 0.0, 1.0], 4: [4.0, 0.0, 1.0]}
    letters = read_dead_letters(client.cluster.log, client.cluster.topics.dlq)
    assert [(d.offset, "expected 3" in d.reason) for d in letters] == [(offsets[1], True)]
