"""Poison records on dml, appended straight to the log by a producer outside vectorlog (issue
7, items 4, 5 and 13): impossible timestamps are dead-lettered, never trusted; a dead letter
always fits; one bad event never affects the others of its batch. Both backends."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from tests.clients import ClientFactory, own_letters
from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.model import DataType
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event
from vectorlog.sdk import probes
from vectorlog.streams.deadletter import DeadLetter, read_dead_letters
from vectorlog.streams.log.base import Append

DAY_MS = 86_400_000


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py); the dead
    letters a test reads are those of records appended since it began. A test that replaces
    a part of a processor has a cluster of its own."""
    return shared_client


def letters(client: Client, processor: str = "querynode") -> list[DeadLetter]:
    """Returns one processor's dead letters of records appended since the test began."""
    node = client.cluster
    found = own_letters(client, read_dead_letters(node.log, node.topics.dlq))
    return [d for d in found if d.processor == processor]


def ids(client: Client, keys: list[int]) -> list[int]:
    """The keys a Strong read finds."""
    return sorted(r["id"] for r in client.get("c", keys, output_fields=["id"]))


def append_dml(client: Client, *values: bytes) -> list[int]:
    """Appends raw records, in one call, to the pchannel of collection "c"."""
    node = client.cluster
    pch = probes.pchannels(client, "c")[0]
    return node.log.append(node.topics.dml, [Append(pch, v) for v in values])


def encoded(client: Client, event: Event) -> bytes:
    return client.cluster.serdes.for_topic(client.cluster.topics.dml).encode(event)


def rows_event(client: Client, ts: int, first_pk: int, n: int = 1) -> Event:
    """A RowsInserted event of collection "c" (dimension 2) with `n` rows, built by hand."""
    info = client.describe_collection("c")
    pk, vec = info["fields"][:2]  # quick setup: id, vector (and $meta, left out)
    columns = [
        {
            "field_id": pk["field_id"],
            "field_name": pk["name"],
            "column": encode_column(DataType.INT64, np.arange(first_pk, first_pk + n)),
        },
        {
            "field_id": vec["field_id"],
            "field_name": vec["name"],
            "column": encode_column(DataType.FLOAT_VECTOR, np.ones((n, 2)), 2),
        },
    ]
    body = {
        "collection_id": info["collection_id"],
        "partition_id": probes.partition_ids(client, "c")["_default"],
        "segment_id": 1,
        "num_rows": n,
        "first_row_id": first_pk,
        "columns": columns,
    }
    cid, vchannels = info["collection_id"], info["virtual_channel_names"]
    return Event("RowsInserted", ts, body, cid, vchannels[0])


def near_limit(client: Client, ts: int, first_pk: int) -> Event:
    """The largest RowsInserted event that is at most 64 bytes under the log's limit."""
    limit = client.cluster.log.max_message_bytes
    lo, hi = 1, limit // 8
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(encoded(client, rows_event(client, ts, first_pk, mid))) <= limit - 64:
            lo = mid
        else:
            hi = mid - 1
    return rows_event(client, ts, first_pk, lo)


def insert(client: Client, *keys: int) -> None:
    client.insert("c", [{"id": k, "vector": [float(k), 0.0]} for k in keys])


def test_a_tick_from_the_future_hides_no_later_write(open_client: ClientFactory):
    client = open_client()
    client.create_collection("c", dimension=2, metric_type="L2")
    node = client.cluster
    future = encoded(client, Event("TimeTick", compose(wall_ms() + DAY_MS), {"source": "x"}))
    n = node.log.partitions(node.topics.dml)
    node.log.append(node.topics.dml, [Append(p, future) for p in range(n)])
    insert(client, 1)
    assert ids(client, [1]) == [1]
    client.close()
    for _ in range(2):  # a restart replays the tick: still refused
        client = open_client()
        insert(client, 2)
        assert ids(client, [1, 2]) == [1, 2]
        client.close()
    client = open_client()
    got = letters(client)
    assert len(got) == n and all("timestamp from the future" in d.reason for d in got)
    assert client.flush("c", timeout=30) and client.get_collection_stats("c")["row_count"] == 2


def test_a_row_from_the_future_is_dead_lettered(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    (offset,) = append_dml(
        client, encoded(client, rows_event(client, compose(wall_ms() + DAY_MS), 7))
    )
    insert(client, 1)
    assert ids(client, [1, 7]) == [1]
    (letter,) = letters(client)
    assert letter.offset == offset and "timestamp from the future" in letter.reason
    assert client.flush("c", timeout=30) and client.get_collection_stats("c")["row_count"] == 1


def test_a_row_behind_a_tick_already_read_is_dead_lettered(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    with probes.stamped(client, "test") as old:
        pass
    insert(client, 1)
    assert ids(client, [1]) == [1]  # a Strong read: a tick past `old` is on the log now
    (offset,) = append_dml(client, encoded(client, rows_event(client, old, 5)))
    insert(client, 2)
    assert ids(client, [1, 2, 5]) == [1, 2]
    (letter,) = letters(client)
    assert letter.offset == offset and "breaks that tick's promise" in letter.reason


def test_an_undecodable_record_at_the_size_limit_is_dead_lettered(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    limit = client.cluster.log.max_message_bytes
    garbage = b"\xc3\x01" + b"x" * (limit - 2)
    (offset,) = append_dml(client, garbage)
    insert(client, 1)
    assert ids(client, [1]) == [1]
    (letter,) = letters(client)
    assert (letter.offset, letter.size, letter.truncated) == (offset, limit, True)
    assert garbage.startswith(letter.value)
    (by_datanode,) = wait_until(lambda: letters(client, "datanode"), 15, "the data node's letter")
    assert by_datanode.truncated and by_datanode.offset == offset


def test_a_bad_event_near_the_limit_never_takes_a_valid_one_in_its_batch_with_it(
    client: Client,
):
    """Its dead letter (the event and the key) did not fit: the query node dropped the rest
    of the pack and of the consume, and a later tick passed them."""
    client.create_collection("c", dimension=2, metric_type="L2")
    with probes.stamped(client, "test") as ts:
        bad = near_limit(client, ts, 1000)
        bad = dataclasses.replace(bad, collection_id=424242)
        bad.body["collection_id"] = 424242
        good = rows_event(client, ts, 1)
        offsets = append_dml(client, encoded(client, bad), encoded(client, good))
    insert(client, 2)
    assert ids(client, [1, 2, 1000]) == [1, 2]
    (letter,) = letters(client)
    assert letter.offset == offsets[0] and "CollectionNotFound" in letter.reason
    assert letter.truncated and letter.size == len(encoded(client, bad))
    assert client.flush("c", timeout=30) and client.get_collection_stats("c")["row_count"] == 2


@pytest.mark.fresh_cluster  # it replaces the data node's dlq
def test_the_data_node_keeps_a_pack_whose_dead_letter_cannot_be_written(client: Client):
    """Its dead letter failed: the data node dropped the rest of the pack (and the consume)
    while its position went on past them, so their rows never reached a binlog."""
    from tests.clients import data_events
    from tests.streams.flaky import FlakyLog

    client.create_collection("c", dimension=2, metric_type="L2")
    insert(client, 1)
    assert ids(client, [1]) == [1]
    (real,) = data_events(client)
    node = client.cluster
    flaky = FlakyLog(node.log, node.topics.dlq)
    node.datanode._dead_letter._log = flaky  # the data node's dlq cannot be written
    flaky.down.set()
    with probes.stamped(client, "test") as ts:
        bad = rows_event(client, ts, 1000)
        bad.body["collection_id"] = 424242
        good = rows_event(client, ts, 2)
        good.body["segment_id"], good.vchannel = real.body["segment_id"], real.vchannel
        vchannels = client.describe_collection("c")["virtual_channel_names"]
        pch = probes.pchannels(client, "c")[vchannels.index(real.vchannel)]
        values = [encoded(client, bad), encoded(client, good)]
        node.log.append(node.topics.dml, [Append(pch, v) for v in values])
    insert(client, 3)
    assert ids(client, [1, 2, 3]) == [1, 2, 3]  # the query node's dlq works
    wait_until(lambda: flaky.failures >= 2, 15, "the data node's failed dead letters")
    flaky.down.clear()
    segments = client.flush("c", timeout=30)
    assert sum(s["num_rows"] for s in client.get_segment_info(segments)) == 3
    (letter,) = letters(client, "datanode")
    assert "424242" in letter.reason


@pytest.mark.fresh_cluster  # it replaces datacoord's dlq
def test_datacoord_reads_a_record_again_until_its_dead_letter_is_written(client: Client):
    """Its consumer went on past a record whose dead letter failed (and the rest of the
    batch): the record was neither applied nor dead-lettered."""
    from tests.streams.flaky import FlakyLog

    node = client.cluster
    flaky = FlakyLog(node.log, node.topics.dlq)
    node.datacoord._dead_letter._log = flaky  # datacoord's dlq cannot be written
    flaky.down.set()
    (offset,) = node.log.append(node.topics.coord, [Append(0, b"\x01\x02")])
    wait_until(lambda: flaky.failures >= 2, 15, "datacoord's attempts")
    assert letters(client, "datacoord") == []
    flaky.down.clear()
    (letter,) = wait_until(lambda: letters(client, "datacoord"), 15, "datacoord's letter")
    assert (letter.topic, letter.offset) == (node.topics.coord, offset)
    client.create_collection("c", dimension=2, metric_type="L2")
    insert(client, 1)
    assert client.flush("c", timeout=30)


@pytest.mark.fresh_cluster  # it replaces the data node's state store
def test_the_data_node_retries_an_event_while_its_state_store_fails(client: Client):
    """A failing state store is not the event's fault: the data node dead-lettered the
    CollectionCreated it could not record, and never wrote that collection's binlogs."""
    from vectorlog.state.errors import StateError

    node = client.cluster
    store, down, attempts = node.datanode.state, threading.Event(), []
    real_transaction = store.transaction

    def transaction(*args: object, **kwargs: object) -> object:
        if down.is_set():
            attempts.append(1)
            raise StateError("the state store cannot be written (test)")
        return real_transaction(*args, **kwargs)

    down.set()
    store.transaction = transaction
    client.create_collection("c", dimension=2, metric_type="L2")
    insert(client, 1, 2)
    wait_until(lambda: len(attempts) >= 2, 15, "the data node's retries")
    down.clear()
    segments = client.flush("c", timeout=30)
    assert sum(s["num_rows"] for s in client.get_segment_info(segments)) == 2
    assert letters(client, "datanode") == []
