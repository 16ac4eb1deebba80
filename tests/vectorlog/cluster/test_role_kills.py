"""Each role of the cluster mode SIGKILLed under a mixed load and started again (issue 23), as
real OS processes on the test broker: writers through both proxies insert, upsert, delete
and flush (tests/vectorlog/cluster/mixed_load.py); after each kill and restart, a Strong read
through a proxy that was not killed shows every acknowledged row once with its last
acknowledged version, no deleted row back, count(*) equal to the rows, and a search finds a
present row first. Writes to a dead role may fail or wait (never past their timeout); a
failed one may or may not have landed. make test kills two roles; test-all kills every role,
and runs a chaos minute of random kills (its seed printed: CHAOS_SEED replays it)."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymilvus import MilvusClient

from tests.support import wait_until
from tests.vectorlog.cluster.mixed_load import (
    COLLECTION,
    TIMEOUT_S,
    Load,
    check,
    create_collection,
)
from tests.vectorlog.cluster.processes import BACKEND, TOKEN, ProcessCluster

#: one process cluster at a time on a test worker (as test_processes and the differential suite)
pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("process-cluster")]
#: seconds of load before a kill, with the role dead, and after its restart
BEFORE_S, DEAD_S = 2.0, 3.0
#: seconds a member may take to be healthy (a machine at load 100 took over 120; a member
#: waits up to VECTORLOG_RUN_PEER_WAIT_S, 300 s, for a peer that does not answer)
START_S = 300


@pytest.fixture(autouse=True)
def quiet_pymilvus() -> Iterator[None]:
    """pymilvus logs every failed call with its traceback: the load's many, expected."""
    logger = logging.getLogger("pymilvus")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=2)
    try:
        made.start_all(START_S)
        yield made
    finally:
        made.close()


def reader(cluster: ProcessCluster, spared: str) -> MilvusClient:
    """Returns a client of a proxy other than `spared` (raises while it cannot connect)."""
    name = "proxy2" if spared == "proxy1" else "proxy1"
    return MilvusClient(cluster.members[name].uri, token=TOKEN, timeout=TIMEOUT_S)


def settled(cluster: ProcessCluster, spared: str, load: Load) -> dict[str, object]:
    """Returns `check`'s findings through a proxy other than `spared` once a read answers
    (connecting and reading may fail while a role recovers; an answer is final, right or
    wrong)."""

    def answer() -> dict[str, object] | None:
        try:
            client = reader(cluster, spared)
        except Exception:  # noqa: BLE001 - pymilvus's errors while the proxy restarts
            time.sleep(0.5)
            return None
        try:
            return {"found": check(client, load.states())}
        except Exception:  # noqa: BLE001 - pymilvus's errors while a role recovers
            time.sleep(0.5)
            return None
        finally:
            client.close()

    return wait_until(answer, 120, "a Strong read answered")["found"]  # type: ignore[return-value]


def progressed(load: Load, since: list[int]) -> bool:
    """Returns whether every writer acknowledged an operation after `since`."""
    return all(now > then for now, then in zip(load.acked(), since, strict=True))


def kill_and_restart(cluster: ProcessCluster, load: Load, name: str) -> None:
    """SIGKILLs `name` under the load, starts it again, waits until every writer was
    acknowledged again, and checks a Strong read through a proxy that was not killed."""
    time.sleep(BEFORE_S)
    cluster.kill(name)
    time.sleep(DEAD_S)
    cluster.start(name, START_S)  # it waits for the peers it needs (runners.peerwait)
    since = load.acked()
    wait_until(lambda: progressed(load, since), 120, f"writes acknowledged after {name}")
    load.pause()
    found = settled(cluster, name, load)
    assert found == {}, f"after {name}'s restart: {found}\n{load.summary()}"
    load.resume()


def run_kills(cluster: ProcessCluster, names: tuple[str, ...], seed: int) -> None:
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN, timeout=TIMEOUT_S)
    create_collection(one)
    load = Load([m.uri for m in cluster.members.values() if m.role == "proxy"], TOKEN, seed)
    try:
        for name in names:
            kill_and_restart(cluster, load, name)
    finally:
        load.stop()
    print(f"\n{names}: {load.summary()}")
    print("\n".join(sorted(set(load.errors()))))
    assert all(n > 0 for n in load.acked())
    final_checks(cluster, load)
    one.close()


def final_checks(cluster: ProcessCluster, load: Load, note: str = "") -> None:
    """After the last kill, with the load stopped: a flush, a Strong read through each proxy,
    and every flushed segment indexed (the index node came back)."""
    wait_until(lambda: flushed(cluster), 120, "a flush after the load")
    for name in ("proxy1", "proxy2"):
        found = settled(cluster, name, load)
        assert found == {}, f"{note}at the end, through {name}'s peer: {found}\n{load.summary()}"
    client = reader(cluster, "proxy2")
    wait_until(lambda: pending(client) == 0, 180, "every flushed row indexed")
    client.close()


def flushed(cluster: ProcessCluster) -> bool:
    """Returns whether a flush through proxy1 was acknowledged."""
    try:
        client = reader(cluster, "proxy2")
        try:
            client.flush(COLLECTION, timeout=TIMEOUT_S)
        finally:
            client.close()
        return True
    except Exception:  # noqa: BLE001 - a flush while a role recovers may fail
        time.sleep(0.5)
        return False


def pending(client: MilvusClient) -> int:
    """Returns the rows not indexed yet (-1 before any is indexed)."""
    info = client.describe_index(COLLECTION, "vector", timeout=TIMEOUT_S)
    return int(info["pending_index_rows"]) if int(info["indexed_rows"]) > 0 else -1


@pytest.mark.timeout(900)
def test_a_coordinator_and_a_proxy_killed_under_load_lose_nothing(cluster: ProcessCluster):
    run_kills(cluster, ("datacoord", "proxy1"), seed=23)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_every_role_killed_in_turn_under_load_loses_nothing(cluster: ProcessCluster):
    roles = ("rootcoord", "datacoord", "datanode", "querynode", "indexnode", "proxy1", "proxy2")
    run_kills(cluster, roles, seed=24)


class Chaos(threading.Thread):
    """Every 2-6 s SIGKILLs a random member (at most two down at once) and starts each dead
    one again 1-5 s later, the coordinators first; records what it did and any failure."""

    def __init__(self, cluster: ProcessCluster, seed: int, seconds: float) -> None:
        super().__init__(name="chaos", daemon=True)
        self.cluster, self.rng = cluster, random.Random(seed)
        self.until = time.monotonic() + seconds
        self.down: dict[str, float] = {}  # name: when to start it again
        self.did: list[str] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            next_kill = time.monotonic() + self.rng.uniform(2, 6)
            while time.monotonic() < self.until or self.down:
                now = time.monotonic()
                if now >= next_kill and now < self.until and len(self.down) < 2:
                    self.kill_one(now)
                    next_kill = now + self.rng.uniform(2, 6)
                self.restart_due(time.monotonic())
                time.sleep(0.1)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.failure = e

    def kill_one(self, now: float) -> None:
        name = self.rng.choice(sorted(set(self.cluster.members) - set(self.down)))
        self.cluster.kill(name)
        self.down[name] = now + self.rng.uniform(1, 5)
        self.did.append(f"{now - self.until + 60:.1f}s kill {name}")

    def restart_due(self, now: float) -> None:
        """Starts the dead members due (all once the minute is over), and before them every
        dead one they need (a data node waits for rootcoord at its start)."""
        order = [*BACKEND, "proxy1", "proxy2"]
        due = [n for n, at in self.down.items() if at <= now or now >= self.until]
        if not due:
            return
        last = max(order.index(n) for n in due)
        for name in sorted((n for n in self.down if order.index(n) <= last), key=order.index):
            self.cluster.start(name, START_S)
            del self.down[name]
            self.did.append(f"start {name}")


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_chaos_minute_of_random_kills_loses_nothing(cluster: ProcessCluster):
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 30))
    print(f"\nchaos seed {seed} (CHAOS_SEED={seed} replays its kills)")
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN, timeout=TIMEOUT_S)
    create_collection(one)
    load = Load([m.uri for m in cluster.members.values() if m.role == "proxy"], TOKEN, seed)
    chaos = Chaos(cluster, seed, 60.0)
    try:
        chaos.start()
        chaos.join(timeout=600)
        assert not chaos.is_alive() and chaos.failure is None, (chaos.failure, chaos.did)
        since = load.acked()
        wait_until(lambda: progressed(load, since), 120, "writes acknowledged after the chaos")
    finally:
        load.stop()
    print(f"seed {seed}: {chaos.did}\n{load.summary()}")
    print("\n".join(sorted(set(load.errors()))))
    final_checks(cluster, load, f"chaos seed {seed}, {chaos.did}: ")
    one.close()
