"""Fault injection: poison records of every kind, appended by a producer outside vectorlog to
its topics, then restarts. The cluster keeps opening, every acknowledged write stays visible,
and each poison record is dead-lettered once per processor that reads it, however often the
cluster restarts. Slow: run by `make test-all`."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.clients import ClientFactory, log_events
from vectorlog import Client
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.deadletter import parse
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.scan import read_to_end

pytestmark = pytest.mark.slow
DAY_MS = 86_400_000
RESTARTS = 3


@contextmanager
def external_producer(client: Client, client_args: dict[str, Any]) -> Iterator[Log]:
    """A producer that is not the cluster's own: a second KafkaLog on Kafka; on the embedded
    log (one process owns it) the cluster's log object, bypassing every vectorlog check."""
    if not client_args["uri"].startswith("kafka://"):
        yield client.cluster.log
        return
    from vectorlog.streams.log.kafka import KafkaLog

    raw = KafkaLog(client_args["uri"].removeprefix("kafka://"), client_id="poisoner")
    try:
        yield raw
    finally:
        raw.close()


def poison(client: Client) -> dict[str, list[tuple[int, bytes]]]:
    """Returns, per topic, the (partition, value) of each poison record to append."""
    topics, serde = client.cluster.topics, EventSerde()
    valid = next(e for e in log_events(client) if e.type == "RowsInserted")
    future = compose(wall_ms() + DAY_MS, 0)
    part = valid.source[0] if valid.source else 0
    encoded = serde.encode(valid)
    limit = client.cluster.log.max_message_bytes
    as_events = [
        dataclasses.replace(
            valid, collection_id=987_654_321, body={**valid.body, "collection_id": 987_654_321}
        ),
        dataclasses.replace(valid, ts=future),  # an insert from the future
        dataclasses.replace(valid, ts=valid.ts - 1),  # behind the ticks already on the log
        Event("TimeTick", future, {"source": "rootcoord"}),  # a tick from the future
    ]
    dml = [
        (part, b"\x00garbage"),
        (part, encoded[: len(encoded) // 2]),
        (part, b"\xc3\x01" + b"x" * (limit - 64)),
    ]
    dml += [(part, serde.encode(e)) for e in as_events]
    ddl = [(0, b"not avro"), (0, encoded)]  # garbage, and a dml event on the ddl topic
    return {topics.dml: dml, topics.coord: [(0, b"\x01\x02")], topics.ddl: ddl}


def dead_letters(client: Client) -> Counter[tuple[str, str, int, int]]:
    """Counts the dead letters per (processor, topic, partition, offset)."""
    out: Counter[tuple[str, str, int, int]] = Counter()
    for rec in read_to_end(client.cluster.log, client.cluster.topics.dlq):
        if rec.key:
            d = parse(rec)
            out[(d.processor, d.topic, d.partition, d.offset)] += 1
    return out


def insert(client: Client, start: int) -> list[int]:
    ids = list(range(start, start + 50))
    client.insert("p", [{"id": i, "vector": [float(i), 1.0, 0.0, 0.0]} for i in ids])
    return ids


def test_poison_records_are_dead_lettered_once_and_hurt_nothing(
    client_args: dict[str, Any], open_client: ClientFactory, backend: str
):
    client = open_client()
    client.create_collection("p", dimension=4, num_shards=2)
    acked = insert(client, 0)
    client.flush("p", timeout=60)
    records = poison(client)
    positions = []
    with external_producer(client, client_args) as raw:
        for topic, items in records.items():
            offsets = raw.append(topic, [Append(p, v) for p, v in items])
            positions += [(topic, p, o) for (p, _), o in zip(items, offsets, strict=True)]
    acked += insert(client, 1000)
    assert len(client.get("p", acked)) == len(acked)
    for _ in range(RESTARTS):
        client.close()
        client = open_client()
        acked += insert(client, 10_000 * (len(acked) // 50))
        assert sorted(r["id"] for r in client.get("p", acked, output_fields=["id"])) == sorted(
            acked
        )
    client.flush("p", timeout=60)
    letters = dead_letters(client)
    lettered = {(t, p, o) for (_, t, p, o) in letters}
    caught = sum(pos in lettered for pos in positions)
    print(
        f"\n{backend}: {caught} of {len(positions)} poison records dead-lettered; {dict(letters)}"
    )
    assert caught == len(positions)
    assert max(letters.values()) == 1, "a record was dead-lettered twice by one processor"
