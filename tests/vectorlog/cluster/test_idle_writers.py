"""Strong reads among several writers, as real processes on the test broker, every writer
ticking every 2 s (docs/cluster.md, "Strong reads and idle writers"): a Strong read
through one proxy sees a row acknowledged just before through the other, both ways; a writer
that went idle and then died does not hold Strong reads back (its idle tick took it out of the
query node's minimum, long before the liveness window could), and started again it writes and
is read at once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster
from vectorlog.core.hybridts import LOGICAL_BITS
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.log.kafka import KafkaLog
from vectorlog.streams.msgstream import DEFAULT_LIVENESS_MS
from vectorlog.streams.scan import END_MARKER_SOURCE, read_to_end

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("idle-writers")]
SERDE = EventSerde()


@pytest.fixture(scope="module")
def cluster(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessCluster]:
    """Two proxies; every writer's periodic tick every 2 s (the query nodes' 5 s liveness
    window spans two of them)."""
    env = {"VECTORLOG_TICK_INTERVAL_MS": "2000"}
    made = ProcessCluster(kafka_bootstrap, tmp_path_factory.mktemp("idle"), proxies=2, env=env)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def _client(cluster: ProcessCluster, name: str) -> MilvusClient:
    return MilvusClient(cluster.members[name].uri, token=TOKEN)


def _has(client: MilvusClient, i: int) -> bool:
    rows = client.query("t", filter=f"id == {i}", output_fields=["id"], consistency_level="Strong")
    return [int(r["id"]) for r in rows] == [i]


def _row(i: int) -> dict[str, object]:
    return {"id": i, "vector": [float(i), 0.0, 0.0, 1.0]}


def _ticks(cluster: ProcessCluster) -> list[tuple[str, int, bool]]:
    """(source, ts, idle) of every tick on the dml topic's partition 0, in log order."""
    log = KafkaLog(cluster.bootstrap)
    try:
        recs = [r for r in read_to_end(log, f"{cluster.cluster}.dml") if r.partition == 0]
    finally:
        log.close()
    events = [SERDE.decode(r.value) for r in sorted(recs, key=lambda r: r.offset)]
    return [
        (e.body["source"], e.ts, bool(e.body.get("idle")))
        for e in events
        if e.type == "TimeTick" and e.body["source"] != END_MARKER_SOURCE
    ]


def test_a_strong_read_sees_a_write_acknowledged_just_before_through_another_writer(
    cluster: ProcessCluster,
):
    one, two = _client(cluster, "proxy1"), _client(cluster, "proxy2")
    one.create_collection("t", dimension=4, metric_type="L2")
    for i in range(0, 6, 2):
        assert _has(two, _acknowledged(one, i))  # written through 1, read Strong through 2
        assert _has(one, _acknowledged(two, i + 1))  # and the reverse


def _acknowledged(client: MilvusClient, i: int) -> int:
    """Inserts row `i` and returns its id once a write is acknowledged. A write refused as of
    unknown outcome (acknowledged too long after its writer's last tick: a loaded machine) is
    not retried under the same id, as its message says: the next try writes id i + 1000."""
    for attempt in range(3):
        try:
            assert client.insert("t", [_row(i + 1000 * attempt)])["insert_count"] == 1
            return i + 1000 * attempt
        except MilvusException as exc:
            if "may or may not be applied" not in str(exc):
                raise
    raise AssertionError(f"three writes of row {i} had an unknown outcome")


def test_a_writer_that_went_idle_and_died_holds_no_strong_read_back(cluster: ProcessCluster):
    one, two = _client(cluster, "proxy1"), _client(cluster, "proxy2")
    assert one.insert("t", [_row(100)])["insert_count"] == 1

    def idle_after_write() -> tuple[str, int, bool] | None:
        mine = [t for t in _ticks(cluster) if t[0] == "proxy1"]
        return mine[-1] if mine and mine[-1][2] else None

    last = wait_until(idle_after_write, 60, "proxy1's idle tick after its write", 0.1)
    cluster.kill("proxy1")  # dead idle: it will never tick again
    assert _has(two, 100)
    newest = max(ts for _, ts, _ in _ticks(cluster))
    # the read passed before the liveness window could drop proxy1: its idle tick did
    assert newest - last[1] < DEFAULT_LIVENESS_MS << LOGICAL_BITS
    cluster.start("proxy1")  # started again it is idle, and its first write is read at once
    assert _client(cluster, "proxy1").insert("t", [_row(101)])["insert_count"] == 1
    assert _has(two, 101)
