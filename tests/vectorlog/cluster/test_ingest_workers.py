"""Ingest workers as processes of the cluster mode (`vectorlog run ingest --worker I/N`) on the
test broker: a worker's cached meta follows DDL made through the proxy (a collection dropped
and recreated with another dimension between two batches, a field added); one worker
consumes every partition of a 4-partition ingest topic; it is
SIGKILLed while rows flow and two workers take its partitions over (a rebalance: each its
range); every produced row is visible once and every source record was applied by exactly
one whole write on dml (the positions, shared on a topic with the dml marks they were taken
with, survive the move). A worker is healthy once its consumer opened: its claims are on the
positions topic by then. A worker paused (SIGSTOP) while another is started with its share is
fenced when it resumes: it exits with code 3 and one line saying who claimed its partitions,
having written nothing more. A worker's batches wait for its ddl watch once each, not once per
collection look-up (its /metrics counts both), and the batches of a backlog that was in the log
before a wait began need none of their own."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pymilvus import DataType, MilvusClient

from tests.processors.proxy.ingest.dml_sources import whole_writes_per_source
from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, Member, ProcessCluster
from vectorlog.cli.run import FENCED
from vectorlog.config import Config, open_log
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.log.base import Log
from vectorlog.streams.scan import read_all

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
PARTITIONS = 4
ROUND = 200  # rows per round, spread over the partitions


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=1)
    topic = f"{made.cluster}.rows"
    made.env["VECTORLOG_INGEST_TOPICS"] = f"{topic}=c:json"
    try:
        made.start_all()
        yield made
    finally:
        made.close()


@dataclass
class Setup:
    """The cluster's ingest topic (`topic`, PARTITIONS partitions), a log to read it and dml
    with, and a pymilvus client of proxy1 with collection `c` (2-d, L2) created."""

    topic: str
    log: Log
    client: MilvusClient


@pytest.fixture
def setup(cluster: ProcessCluster) -> Iterator[Setup]:
    topic = f"{cluster.cluster}.rows"
    log = open_log(Config.load(log=f"kafka://{cluster.bootstrap}", cluster=cluster.cluster))
    try:
        log.create_topic(topic, PARTITIONS)
        client = MilvusClient(uri=cluster.members["proxy1"].uri, token=TOKEN)
        client.create_collection("c", dimension=2, metric_type="L2")
        yield Setup(topic, log, client)
    finally:
        log.close()


def produce(bootstrap: str, topic: str, first: int, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(first, first + n):
        value = json.dumps({"id": i, "vector": [float(i), 1.0]}).encode()
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def ids(client: MilvusClient) -> list[int]:
    """Returns the ids of `c`, sorted, duplicates kept (Strong read)."""
    rows = client.query("c", filter="id >= 0", output_fields=["id"], limit=16_384)
    return sorted(int(r["id"]) for r in rows)


def counter(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found, f"{name} not on /metrics"
    return float(found.group(1))


def one_catch_up_per_batch(cluster: ProcessCluster, worker: str) -> bool | None:
    """Returns whether the worker's ddl catch-ups are at most one per batch (each batch looks
    its collection up three times) once it applied 3 batches or more (None before)."""
    text = cluster.metrics(worker)
    batches = counter(text, "vectorlog_ingest_batches_total")
    catch_ups = counter(text, "vectorlog_ddl_catch_ups_total")
    return None if batches < 3 else 1 <= catch_ups <= batches


def start_worker(cluster: ProcessCluster, name: str, worker: str) -> None:
    cluster.members[name] = Member("ingest", name, worker=worker)
    cluster.start(name)


def claims(log: Log, cluster: ProcessCluster) -> list[str]:
    """Returns the keys of the claims on the ingest workers' positions topic."""
    found = read_all(log, f"{cluster.cluster}.ingest.positions")
    return [r.key.decode() for r in found if r.key is not None and r.key.startswith(b"claim:")]


def test_two_workers_take_over_a_killed_workers_partitions_exactly_once(
    cluster: ProcessCluster, setup: Setup
):
    topic, log, client = setup.topic, setup.log, setup.client
    start_worker(cluster, "ingest-a", "0/1")  # healthy: its partitions claimed
    assert {f"claim:{topic}/{p}" for p in range(PARTITIONS)} <= set(claims(log, cluster))
    produce(cluster.bootstrap, topic, 0, ROUND)
    wait_until(lambda: ids(client) == list(range(ROUND)), 120, "round 1 visible")
    produce(cluster.bootstrap, topic, ROUND, ROUND)
    cluster.kill("ingest-a")  # while round 2 flows
    start_worker(cluster, "ingest-b", "0/2")
    start_worker(cluster, "ingest-c", "1/2")
    produce(cluster.bootstrap, topic, 2 * ROUND, ROUND)
    wait_until(lambda: ids(client) == list(range(3 * ROUND)), 120, "each row once")
    applied = whole_writes_per_source(log, f"{cluster.cluster}.dml", topic)
    assert sum(applied.values()) == 3 * ROUND and set(applied.values()) == {1}


def test_a_paused_worker_is_fenced_by_one_started_with_its_share(
    cluster: ProcessCluster, setup: Setup
):
    topic, log, client = setup.topic, setup.log, setup.client
    start_worker(cluster, "ingest-a", "0/1")
    produce(cluster.bootstrap, topic, 0, ROUND)
    wait_until(lambda: ids(client) == list(range(ROUND)), 120, "round 1 visible")
    cluster.send("ingest-a", signal.SIGSTOP)
    start_worker(cluster, "ingest-b", "0/1")  # the same share, as a replacement would
    produce(cluster.bootstrap, topic, ROUND, ROUND)
    wait_until(lambda: ids(client) == list(range(2 * ROUND)), 120, "round 2 visible")
    cluster.send("ingest-a", signal.SIGCONT)
    old = cluster.members["ingest-a"].proc
    assert old is not None
    wait_until(lambda: old.poll() is not None, 120, "the paused worker exited")
    assert old.returncode == FENCED, cluster.log("ingest-a")
    assert "fenced" in cluster.log("ingest-a")
    produce(cluster.bootstrap, topic, 2 * ROUND, ROUND)
    wait_until(lambda: ids(client) == list(range(3 * ROUND)), 120, "each row once")
    applied = whole_writes_per_source(log, f"{cluster.cluster}.dml", topic)
    assert sum(applied.values()) == 3 * ROUND and set(applied.values()) == {1}


def produce_rows(bootstrap: str, topic: str, rows: list[dict[str, object]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for row in rows:
        producer.produce(topic, value=json.dumps(row).encode(), partition=0)
    assert producer.flush(30) == 0


def test_a_workers_cached_schema_follows_a_recreate_and_an_added_field(
    cluster: ProcessCluster, setup: Setup
):
    topic, log, client = setup.topic, setup.log, setup.client
    start_worker(cluster, "ingest-a", "0/1")
    produce_rows(cluster.bootstrap, topic, [{"id": 1, "vector": [1.0, 0.0]}])
    wait_until(lambda: ids(client) == [1], 120, "batch 1 visible")
    client.drop_collection("c")
    client.create_collection("c", dimension=3, metric_type="L2")
    old, new = {"id": 2, "vector": [2.0, 0.0]}, {"id": 3, "vector": [3.0, 0.0, 1.0]}
    produce_rows(cluster.bootstrap, topic, [old, new])
    wait_until(lambda: ids(client) == [3], 120, "the row fitting the new schema")
    client.add_collection_field("c", "tag", DataType.VARCHAR, max_length=8, nullable=True)
    produce_rows(cluster.bootstrap, topic, [{**new, "id": 4, "tag": "t4"}])
    wait_until(lambda: ids(client) == [3, 4], 120, "the row with the added field")
    got = client.query("c", filter="id == 4", output_fields=["tag"])
    assert [r["tag"] for r in got] == ["t4"]
    letters = read_dead_letters(log, f"{cluster.cluster}.dlq")
    assert [json.loads(d.value)["id"] for d in letters] == [2]
    assert "expected 3" in letters[0].reason
    wait_until(lambda: one_catch_up_per_batch(cluster, "ingest-a") is not None, 30, "3 batches")
    assert one_catch_up_per_batch(cluster, "ingest-a") is True


def test_a_backlog_waits_for_the_ddl_watch_once_not_per_batch(
    cluster: ProcessCluster, setup: Setup
):
    topic, client = setup.topic, setup.client
    for first in range(0, 4 * ROUND, ROUND // 4):  # a backlog in 16 produce requests
        produce(cluster.bootstrap, topic, first, ROUND // 4)
    cluster.env["VECTORLOG_INGEST_TOPICS"] = f"{topic}=c:json;batch_size=40"
    start_worker(cluster, "ingest-a", "0/1")
    wait_until(lambda: ids(client) == list(range(4 * ROUND)), 120, "the backlog visible")
    text = cluster.metrics("ingest-a")
    batches = counter(text, "vectorlog_ingest_batches_total")
    catch_ups = counter(text, "vectorlog_ddl_catch_ups_total")
    assert batches >= 20 and 1 <= catch_ups <= batches / 4, (batches, catch_ups)
