"""Fencing of ingest workers (processors/proxy/ingest/positions.py) in one process, on both
backends: a second worker started with the same share claims its partitions; the first is
fenced at its next write or commit and writes nothing more, and every source record lands on
dml exactly once (read back). A write the first worker had in hand when the second took over
(held at the pause point before its dml append) lands after the second's takeover marker and
is hidden from every reader: its stale values never show and it is never counted twice, also
when it lands before the second worker's first write (after its recovery read dml), and also
when it was held on the thread that runs a batch's write behind the consumer (after the
fencing check, its consumer thread already at the next batch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processors.proxy.ingest.dml_sources import whole_writes_per_source
from tests.processors.proxy.ingest.producer import Raw, produce
from tests.support import unique_topic, wait_until
from vectorlog import Client
from vectorlog.core.faults import PAUSE_ARM, PAUSE_ENV, PAUSE_GO
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.consumer import PROCESSOR, IngestConsumer
from vectorlog.processors.proxy.ingest.positions import LogPositions
from vectorlog.streams.deadletter import DeadLetterWriter

ROUND = 50


Started = list[tuple[IngestConsumer, LogPositions]]


@pytest.fixture
def workers() -> Iterator[Started]:
    started: Started = []
    yield started
    for worker, positions in started:
        worker.stop()
        positions.close()


def start_worker(client: Client, topic: str, started: Started) -> IngestConsumer:
    """Starts an ingest worker 0/1 of `topic` (into collection c) with positions on a topic."""
    cluster = client.cluster
    positions = LogPositions(cluster.log, f"{topic}.positions")
    worker = IngestConsumer(
        cluster.proxy,
        cluster.log,
        positions,
        [IngestRoute(topic, "c", "json")],
        DeadLetterWriter(cluster.log, cluster.topics.dlq, PROCESSOR),
        cluster.topics.dml,
    )
    worker.start()
    started.append((worker, positions))
    return worker


def rows(first: int, second: float = 1.0) -> list[Raw]:
    """Returns ROUND JSON rows from id `first`, vectors [id, `second`]."""
    return [
        (None, json.dumps({"id": i, "vector": [float(i), second]}).encode())
        for i in range(first, first + ROUND)
    ]


def seconds(client: Client) -> dict[int, float]:
    """Returns {id: the vector's second value} of every row of c (a Strong read)."""
    found = client.query(
        "c",
        filter="id >= 0",
        output_fields=["id", "vector"],
        limit=1000,
        consistency_level="Strong",
    )
    return {int(r["id"]): float(r["vector"][1]) for r in found}


def ids(client: Client) -> list[int]:
    found = client.query("c", filter="id >= 0", output_fields=["id"], limit=1000)
    return sorted(int(r["id"]) for r in found)


def consumed_round_1(
    client: Client, workers: Started, name: str
) -> tuple[str, IngestConsumer, int]:
    """Makes a 1-partition topic `name...` and collection c, starts a worker on it and waits
    until it consumed round 1 (rows(0)); returns the topic, the worker and round 1's last
    offset."""
    topic = unique_topic(name)
    client.cluster.log.create_topic(topic, 1)
    client.create_collection("c", dimension=2, metric_type="L2")
    first = start_worker(client, topic, workers)
    last = max(produce(client, topic, rows(0)))
    wait_until(lambda: first.positions().get((topic, 0), 0) > last, 60, "round 1 consumed")
    return topic, first, last


def test_a_second_worker_with_the_same_share_fences_the_first(client: Client, workers: Started):
    topic, first, last = consumed_round_1(client, workers, "fenced")
    second = start_worker(client, topic, workers)  # the same share: 0/1
    wait_until(lambda: second.positions().get((topic, 0), 0) > last, 60, "the second opened")
    produce(client, topic, rows(ROUND))
    wait_until(
        lambda: ids(client) == list(range(2 * ROUND)) and first.fenced is not None,
        60,
        "round 2 visible and the first worker fenced",
    )
    assert "claimed" in (first.fenced or "") and second.fenced is None
    applied = whole_writes_per_source(client.cluster.log, client.cluster.topics.dml, topic)
    assert sorted(applied) == [(0, o) for o in range(2 * ROUND)]
    assert set(applied.values()) == {1}


@pytest.mark.parametrize("point", ["ingest.before_dml", "ingest.write_behind"])
def test_a_fenced_workers_write_in_hand_is_hidden_after_the_takeover(
    client: Client, workers: Started, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, point: str
):
    topic, first, last = consumed_round_1(client, workers, "late")
    monkeypatch.setenv(PAUSE_ENV, f"{point}?={tmp_path}")
    (tmp_path / PAUSE_ARM).write_text("")
    try:
        produce(client, topic, rows(0, 2.0))  # the first worker holds this write
        wait_until(lambda: any(tmp_path.glob(f"{point}.*")), 60, "the first held")
        second = start_worker(client, topic, workers)  # the same share: 0/1
        last = max(produce(client, topic, rows(0, 3.0)))
        wait_until(lambda: second.positions().get((topic, 0), 0) > last, 60, "rounds 2-3")
    finally:
        (tmp_path / PAUSE_GO).write_text("")  # the first appends its round-2 write now
    expected = dict.fromkeys(range(ROUND), 3.0)
    wait_until(
        lambda: first.fenced is not None and seconds(client) == expected,
        60,
        "the first worker fenced and round 3's values visible",
    )
    applied = whole_writes_per_source(client.cluster.log, client.cluster.topics.dml, topic)
    assert sorted(applied) == [(0, o) for o in range(3 * ROUND)]
    assert set(applied.values()) == {1}


def test_a_fenced_workers_write_before_the_new_owners_first_is_hidden(
    client: Client, workers: Started, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    held, opened = tmp_path / "held", tmp_path / "opened"
    held.mkdir()
    opened.mkdir()
    topic, first, last = consumed_round_1(client, workers, "marked")
    monkeypatch.setenv(PAUSE_ENV, f"ingest.before_dml?={held}")
    (held / PAUSE_ARM).write_text("")
    try:
        last = max(produce(client, topic, rows(ROUND)))  # the first worker holds this write
        wait_until(lambda: any(held.glob("ingest.before_dml.*")), 60, "the first held")
        monkeypatch.setenv(PAUSE_ENV, f"ingest.recovered={opened}")
        second = start_worker(client, topic, workers)  # claims, marks dml, recovers, holds
        wait_until(lambda: any(opened.glob("ingest.recovered.*")), 60, "the second held")
        (held / PAUSE_GO).write_text("")  # the first's write lands before any of the second's
        wait_until(lambda: first.fenced is not None, 60, "the first worker fenced")
    finally:
        (held / PAUSE_GO).write_text("")
        (opened / PAUSE_GO).write_text("")
    wait_until(
        lambda: (
            second.positions().get((topic, 0), 0) > last and ids(client) == list(range(2 * ROUND))
        ),
        60,
        "round 2 applied by the second worker and visible",
    )
    applied = whole_writes_per_source(client.cluster.log, client.cluster.topics.dml, topic)
    assert sorted(applied) == [(0, o) for o in range(2 * ROUND)]
    assert set(applied.values()) == {1}
