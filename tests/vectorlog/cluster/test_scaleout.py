"""Scale-out of the query nodes as real OS processes on the test broker (test-all): two query
nodes share the dml pchannels (and their Flushed segments); reads through a proxy fan out to
both and merge. One is SIGSTOPped past its heartbeat window and continued (declared dead: it
must register again, never serve its old ownership), then SIGKILLed and started again; every
read meanwhile either waits or answers completely, never partially, and the load is
balanced again once it is back."""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROWS, DIM, BATCH = 100_000, 8, 10_000
PROBES = [7, 12_345, 33_333, 50_001, 66_666, 81_234, 99_998, 424]


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=2, querynodes=2)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def served(cluster: ProcessCluster) -> dict[str, int]:
    """Returns the pchannels each query node serves, as the query coordinator says."""
    text = cluster.metrics("datacoord")
    found = re.findall(r'vectorlog_query_pchannels_served\{node="(\w+)"\} (\d+)', text)
    return {node: int(float(n)) for node, n in found}


class Readers:
    """Reads through a proxy in a loop until stopped: count(*), a query by keys and a
    filtered search, each checked complete; any error or partial answer is kept."""

    def __init__(
        self,
        client: MilvusClient,
        vectors: np.ndarray,
        rows: int = ROWS,
        probes: list[int] = PROBES,
    ) -> None:
        self.client, self.vectors, self.rows, self.probes = client, vectors, rows, probes
        self.done = threading.Event()
        self.problems: list[str] = []
        self.reads = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            try:
                self._once()
                self.reads += 1
            except Exception as exc:  # a read that failed instead of waiting
                self.problems.append(f"error: {exc}")

    def _once(self) -> None:
        c = self.client
        probes, first = self.probes, self.probes[0]
        n = c.query("docs", filter=f"id < {self.rows}", output_fields=["count(*)"])[0]["count(*)"]
        if n != self.rows:
            self.problems.append(f"count {n}")
        rows = c.query("docs", ids=probes, output_fields=["id"])
        if sorted(r["id"] for r in rows) != sorted(probes):
            self.problems.append(f"get {sorted(r['id'] for r in rows)}")
        (hits,) = c.search(
            "docs", [self.vectors[first].tolist()], limit=len(probes), filter=f"id in {probes}"
        )
        if sorted(h["id"] for h in hits) != sorted(probes) or hits[0]["id"] != first:
            self.problems.append(f"search {[h['id'] for h in hits]}")

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=120)


def test_two_query_nodes_share_the_reads_and_a_dead_one_loses_no_answer(cluster):
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    one.create_collection("docs", dimension=DIM, metric_type="L2", num_shards=4)
    vectors = np.random.default_rng(3).random((ROWS, DIM), dtype=np.float32)
    for lo in range(0, ROWS, BATCH):
        rows = [{"id": i, "vector": vectors[i].tolist()} for i in range(lo, lo + BATCH)]
        assert one.insert("docs", rows)["insert_count"] == BATCH
    one.flush("docs")
    wait_until(lambda: served(cluster) == {"querynode1": 2, "querynode2": 2}, 120, "2 + 2")

    readers = Readers(two, vectors)
    try:
        wait_until(lambda: readers.reads >= 3 or bool(readers.problems), 120, "reads")
        # declared dead while stopped: it must register again, its old epoch fenced
        stopped = cluster.members["querynode2"].proc
        assert stopped is not None
        stopped.send_signal(signal.SIGSTOP)
        wait_until(lambda: served(cluster) == {"querynode1": 4}, 120, "all on querynode1")
        at = readers.reads
        stopped.send_signal(signal.SIGCONT)
        wait_until(lambda: served(cluster) == {"querynode1": 2, "querynode2": 2}, 120, "back")
        assert "was declared dead; registered again" in cluster.log("querynode2")

        cluster.kill("querynode2")  # SIGKILL
        assert one.insert("docs", [{"id": ROWS, "vector": [0.5] * DIM}])["insert_count"] == 1
        wait_until(lambda: served(cluster) == {"querynode1": 4}, 120, "all on querynode1")
        cluster.start("querynode2")
        wait_until(lambda: served(cluster) == {"querynode1": 2, "querynode2": 2}, 120, "rebalanced")
        wait_until(lambda: readers.reads >= at + 3 or bool(readers.problems), 120, "reads after")
    finally:
        readers.stop()
    assert readers.problems == []  # every read complete; none failed
    assert one.query("docs", filter="", output_fields=["count(*)"])[0]["count(*)"] == ROWS + 1
    assert two.get_load_state("docs")["state"].name == "Loaded"


def test_with_two_replicas_a_killed_query_node_costs_no_read_an_error(cluster):
    rows, probes = 20_000, [3, 4_444, 9_999, 15_001, 19_998]
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    one.create_collection(
        "docs", dimension=DIM, metric_type="L2", num_shards=4, consistency_level="Strong"
    )
    vectors = np.random.default_rng(5).random((rows, DIM), dtype=np.float32)
    for lo in range(0, rows, BATCH):
        batch = [{"id": i, "vector": vectors[i].tolist()} for i in range(lo, lo + BATCH)]
        assert one.insert("docs", batch)["insert_count"] == BATCH
    one.flush("docs")
    one.load_collection("docs", replica_number=2)  # returns once both copies are served
    assert served(cluster) == {"querynode1": 4, "querynode2": 4}
    two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    before = replicas_of(two)
    assert len(before) == 2 and len({r.id for r in before}) == 2
    assert len(replica_nodes_of(before)) == 2

    readers = Readers(two, vectors, rows, probes)
    try:
        wait_until(lambda: readers.reads >= 3 or bool(readers.problems), 120, "reads")
        at = readers.reads
        cluster.kill("querynode2")  # SIGKILL: reads go to the other copy at once
        wait_until(lambda: served(cluster) == {"querynode1": 4}, 120, "declared dead")
        wait_until(lambda: readers.reads >= at + 5 or bool(readers.problems), 120, "reads after")
    finally:
        readers.stop()
    assert readers.problems == []  # not one read failed or answered partially

    cluster.start("querynode2")  # a new session: a new node id, as Milvus's
    wait_until(lambda: served(cluster) == {"querynode1": 4, "querynode2": 4}, 120, "back")
    wait_until(lambda: len(replica_nodes(two)) == 2, 60, "both copies described")
    after = replicas_of(two)
    assert {r.id for r in after} == {r.id for r in before}  # the replicas stay
    old, new = replica_nodes_of(before), replica_nodes_of(after)
    assert len(old & new) == 1 and max(new) > max(old)  # querynode1 kept its id


def replicas_of(client: MilvusClient) -> list:
    """Returns describe_replica's answer, checked: each replica has the 4 shards, each led
    by a node of the replica that alone serves it, and the copies of a shard are led by
    different nodes."""
    found = client.describe_replica("docs")
    for r in found:
        assert len(r.shards) == 4
        assert all(s.shard_leader in r.group_nodes for s in r.shards)
        assert all(s.shard_nodes == {s.shard_leader} for s in r.shards)
    leaders: dict[str, set[int]] = {}
    for r in found:
        for s in r.shards:
            leaders.setdefault(s.channel_name, set()).add(s.shard_leader)
    assert all(len(nodes) == len(found) for nodes in leaders.values())
    return found


def replica_nodes_of(found: list) -> set[int]:
    return {n for r in found for n in r.group_nodes}


def replica_nodes(client: MilvusClient) -> set[int]:
    """Returns the node ids of describe_replica's answer; none while a copy has no node."""
    try:
        return replica_nodes_of(client.describe_replica("docs"))
    except Exception:  # a shard without its leader yet (Milvus's code 500)
        return set()
