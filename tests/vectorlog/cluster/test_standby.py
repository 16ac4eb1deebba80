"""Standbys of the cluster mode as real OS processes on the test broker (issue 23): a second
rootcoord or datacoord run with --standby waits (its /healthz says "standby", it serves no
RPC) and takes over once its leader is gone; the clients, given both addresses, follow it; a
standby stopped before it leads exits cleanly. A leader paused past its lease's ttl (SIGSTOP)
is fenced when it resumes (SIGCONT): it exits with code 3 and nothing it did after the pause
reaches the log."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx
import pytest
from pymilvus import MilvusClient

from tests.support import wait_until
from tests.vectorlog.cluster.processes import CLUSTER_TOKEN, TOKEN, ProcessCluster
from vectorlog.core.errors import ServiceUnavailable, VectorlogError
from vectorlog.core.faults import PAUSE_ARM, PAUSE_ENV, PAUSE_GO
from vectorlog.core.hybridts import physical_ms, wall_ms
from vectorlog.core.model import quick_schema
from vectorlog.processors.rootcoord.lease_record import LeaseRecord
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.streams.log.kafka import KafkaLog
from vectorlog.streams.scan import read_all
from vectorlog.streams.snapshots import PREFIX
from vectorlog.streams.topics import Serdes, Topics

pytestmark = pytest.mark.kafka
#: the exit code of a fenced leader (cli.run.FENCED)
FENCED = 3
#: the lease's ttl in these tests (seconds): a paused leader is replaced after it
TTL_S = 2


@pytest.fixture
def coords(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    """A leading rootcoord and its standby (no other role)."""
    made = ProcessCluster(
        kafka_bootstrap, tmp_path, proxies=0, standby=True,
        env={"VECTORLOG_LEASE_TTL_S": str(TTL_S)},
    )  # fmt: skip
    try:
        made.start("rootcoord")
        made.start("rootcoord-standby")
        yield made
    finally:
        made.close()


def health(cluster: ProcessCluster, name: str) -> str:
    url = f"http://127.0.0.1:{cluster.members[name].metrics_port}/healthz"
    return httpx.get(url, timeout=5).text


def state(pid: int) -> str:
    """Returns a process's state letter (T: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def answered(call: object) -> object:
    """Returns what `call()` returns, or None while no rootcoord answers."""
    try:
        return call()  # type: ignore[operator]
    except (ServiceUnavailable, VectorlogError):
        return None


def test_a_standby_rootcoord_takes_over_from_a_killed_leader(coords: ProcessCluster):
    assert health(coords, "rootcoord-standby") == "standby"
    assert "rootcoord: standing by; the leader is host" in coords.log("rootcoord-standby")
    client = RootCoordClient(coords.addresses("rootcoord"), deadline_s=2, token=CLUSTER_TOKEN)
    client.create_collection("books", quick_schema(4, "L2"))
    before = client.allocate_timestamps(1)

    coords.kill("rootcoord")  # SIGKILL
    after = wait_until(
        lambda: answered(lambda: client.allocate_timestamps(1)), 60, "the standby to answer"
    )
    assert isinstance(after, int) and after > before
    assert client.list_collections() == ["books"]  # the new leader recovered the DDL
    assert "rootcoord: became leader" in coords.log("rootcoord-standby")
    assert health(coords, "rootcoord-standby") == "ok"
    # the first leader's DDLs wait for no predecessor's follower leases; its successor's do
    assert "the cluster's first leader: no follower lease to wait out" in coords.log("rootcoord")
    assert "wait up to 4.0 s for the follower leases" in coords.log("rootcoord-standby")
    client.close()


@pytest.mark.slow
def test_a_strong_read_right_after_a_rootcoord_takeover_sees_every_write(
    kafka_bootstrap: str, tmp_path: Path
):
    """The standby's ticks carry a newer epoch of the rootcoord lease: the consumers drop the
    dead leader's ticks at once (not a liveness window later), and nothing acknowledged before
    or after the takeover is passed over."""
    cluster = ProcessCluster(kafka_bootstrap, tmp_path, proxies=1, standby=True)
    try:
        started = ("rootcoord", "rootcoord-standby", "datacoord", "querynode", "indexnode")
        for name in (*started, "proxy1"):
            cluster.start(name)
        client = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
        client.create_collection("books", dimension=4, metric_type="L2", consistency_level="Strong")
        acknowledged = set(_insert(client, 0, 10))
        cluster.kill("rootcoord")
        acknowledged |= set(wait_until(lambda: _try_insert(client, 100, 10), 120, "a write"))
        got = client.query("books", filter="id >= 0", output_fields=["id"], limit=100)
        assert {int(r["id"]) for r in got} == acknowledged
    finally:
        cluster.close()
    log = KafkaLog(kafka_bootstrap)
    try:
        serde = Serdes().for_topic(topics(cluster).dml)
        ticks = [serde.decode(r.value) for r in read_all(log, topics(cluster).dml)]
        epochs = {
            e.body["source"]: e.body["epoch"]
            for e in ticks
            if e.type == "TimeTick" and e.body["lease"] == "rootcoord"
        }
        assert epochs["rootcoord-standby"] > epochs["rootcoord"]
    finally:
        log.close()


@pytest.mark.slow
def test_a_paused_leader_is_fenced_and_appends_nothing_after_the_pause(
    coords: ProcessCluster, kafka_bootstrap: str
):
    client = RootCoordClient(coords.addresses("rootcoord"), deadline_s=5, token=CLUSTER_TOKEN)
    client.create_collection("books", quick_schema(4, "L2"))
    coords.send("rootcoord", signal.SIGSTOP)
    try:
        pid = coords.members["rootcoord"].proc.pid  # type: ignore[union-attr]
        wait_until(lambda: state(pid) == "T", 30, "the leader stopped")
        stopped_at = wall_ms()  # the leader computes nothing from here on
        wait_until(lambda: "became leader" in coords.log("rootcoord-standby"), 60, "the takeover")
        with pytest.raises(ServiceUnavailable, match="deadline_exceeded"):
            # sent to the paused leader: its outcome is unknown, so it is not sent again
            client.create_collection("films", quick_schema(4, "L2"))
        client.create_collection("films", quick_schema(4, "L2"))  # the new leader serves it
    finally:
        coords.send("rootcoord", signal.SIGCONT)
    old = coords.members["rootcoord"].proc
    assert old is not None
    assert old.wait(timeout=60) == FENCED
    assert "rootcoord lost its lease; exiting" in coords.log("rootcoord")
    assert sorted(client.list_collections()) == ["books", "films"]
    client.close()
    restarted = coords.start("rootcoord")  # the fenced leader, back: it stands by in turn
    assert health(coords, "rootcoord") == "standby"
    assert restarted.proc is not None
    restarted.proc.send_signal(signal.SIGTERM)
    assert restarted.proc.wait(timeout=60) == 0
    assert "rootcoord: stopped while standing by" in coords.log("rootcoord")
    coords.close()  # nothing appends while the log is read

    log = KafkaLog(kafka_bootstrap)
    try:
        topics = Topics(coords.cluster, 4)
        pid = old.pid
        lease = [LeaseRecord.decode(r.value) for r in read_all(log, topics.lease)]
        mine = [r for r in lease if r is not None and r.pid == pid and r.role == "rootcoord"]
        assert mine and max(r.at for r in mine) < stopped_at  # no renewal, no release since
        serde = Serdes().for_topic(topics.dml)
        ticks = [serde.decode(r.value) for r in read_all(log, topics.dml)]
        own = [e.ts for e in ticks if e.type == "TimeTick" and e.body["source"] == "rootcoord"]
        assert own and max(physical_ms(ts) for ts in own) < stopped_at
        new = [e for e in ticks if e.type == "TimeTick" and e.body["source"] != "rootcoord"]
        assert any(e.body["source"] == "rootcoord-standby" for e in new)
    finally:
        log.close()


@pytest.mark.slow
def test_a_ddl_the_paused_leader_had_handed_over_lands_after_the_takeover_and_is_read_by_nobody(
    kafka_bootstrap: str, tmp_path: Path
):
    """The paused leader's CollectionCreated passed its lease check and waited to be sent
    (pause point fenced.handed.ddl: its producer's queue) when it was stopped; it lands once
    it resumes, after the takeover. Neither the new leader nor the one after it (recovering
    from ddl) counts it: the name the caller was told nothing certain about is created once,
    by the retry the new leader served."""
    held = tmp_path / "held"
    held.mkdir()
    cluster = ProcessCluster(
        kafka_bootstrap, tmp_path, proxies=0, standby=True,
        env={"VECTORLOG_LEASE_TTL_S": str(TTL_S), PAUSE_ENV: f"fenced.handed.ddl?={held}"},
    )  # fmt: skip
    try:
        cluster.start("rootcoord")
        cluster.env.pop(PAUSE_ENV)
        cluster.start("rootcoord-standby")
        client = RootCoordClient(cluster.addresses("rootcoord"), deadline_s=5, token=CLUSTER_TOKEN)
        client.create_collection("books", quick_schema(4, "L2"))
        (held / PAUSE_ARM).touch()
        told: list[object] = []
        call = threading.Thread(target=lambda: told.append(answered_or_error(client, "films")))
        call.start()
        wait_until(lambda: list(held.glob("fenced.handed.ddl.*")), 60, "the DDL handed over")
        cluster.send("rootcoord", signal.SIGSTOP)
        wait_until(lambda: "became leader" in cluster.log("rootcoord-standby"), 60, "takeover")
        (held / PAUSE_GO).touch()
        cluster.send("rootcoord", signal.SIGCONT)  # its CollectionCreated lands now
        old = cluster.members["rootcoord"].proc
        assert old is not None and old.wait(timeout=60) == FENCED
        call.join(60)
        assert told and told[0] != "created"  # never acknowledged
        assert client.list_collections() == ["books"]
        client.create_collection("films", quick_schema(4, "L2"))  # the caller's retry
        films = client.describe_collection("films").collection_id
        cluster.start("rootcoord")  # stands by, then leads after the next takeover
        cluster.kill("rootcoord-standby")
        again = wait_until(lambda: answered(client.list_collections), 60, "the third leader")
        assert sorted(cast(list[str], again)) == ["books", "films"]
        assert client.describe_collection("films").collection_id == films
        client.close()
    finally:
        cluster.close()


def answered_or_error(client: RootCoordClient, name: str) -> object:
    """Returns "created", or the error the caller of create_collection was given."""
    try:
        client.create_collection(name, quick_schema(4, "L2"))
        return "created"
    except Exception as exc:
        return exc


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_proxies_follow_each_coordinators_standby(kafka_bootstrap: str, tmp_path: Path):
    """A whole cluster with standbys: SIGKILL the rootcoord, then the datacoord, under
    writes through two proxies: every acknowledged row is read Strong through the other. The
    standbys (fresh state) recover from the leaders' coord and ddl snapshots and the tail."""
    snapshots = {"VECTORLOG_SNAPSHOT_RECORDS": "20", "VECTORLOG_LOG_RETENTION_CHECK_S": "0.5"}
    cluster = ProcessCluster(kafka_bootstrap, tmp_path, proxies=2, standby=True, env=snapshots)
    try:
        cluster.start_all()
        one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
        two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
        one.create_collection("books", dimension=4, metric_type="L2", consistency_level="Strong")
        acknowledged = set(_insert(one, 0, 20))
        for i in range(3):
            one.create_partition("books", f"p{i}")
            one.flush("books")
        # the leaders write coord's and ddl's snapshots: their standbys start from them
        shots = [cluster.storage / PREFIX / t for t in (topics(cluster).coord, topics(cluster).ddl)]
        wait_until(lambda: all(list(d.glob("*")) for d in shots), 60, "snapshots written")
        for leader in ("rootcoord", "datacoord"):
            cluster.kill(leader)
            first = 100 * (len(acknowledged) // 20)

            def write(at: int = first) -> list[int] | None:
                return _try_insert(one, at, 20)

            rows = wait_until(write, 120, "a write served")
            acknowledged |= set(rows)
            assert f"{leader}: became leader" in cluster.log(f"{leader}-standby")
        two.flush("books")  # datacoord-standby seals and flushes
        got = two.query("books", filter="id >= 0", output_fields=["id"], limit=1000)
        assert {int(r["id"]) for r in got} == acknowledged
        assert sorted(two.list_partitions("books")) == ["_default", "p0", "p1", "p2"]
    finally:
        cluster.close()


def topics(cluster: ProcessCluster) -> Topics:
    return Topics(cluster.cluster, 4)


def _insert(client: MilvusClient, first: int, n: int) -> list[int]:
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(first, first + n)]
    assert client.insert("books", rows)["insert_count"] == n
    return [int(r["id"]) for r in rows]  # type: ignore[call-overload]


def _try_insert(client: MilvusClient, first: int, n: int) -> list[int] | None:
    try:
        return _insert(client, first, n)
    except Exception:  # pymilvus's errors while the standby takes over
        time.sleep(0.5)
        return None
