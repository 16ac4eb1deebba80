"""The cluster mode as real OS processes on the test broker (`vectorlog run ROLE`, one process
per role and two proxies): a row written through one proxy is read Strong through the other,
both ways; flush and search answer, describe_index reports the index node's builds, a proxy's
web console lists what the cluster holds and its history (segment states, events, jobs); the
query node SIGKILLed and started again serves every acknowledged row, those written while it
was down too; each process says its lifecycle and serves /healthz and /metrics; the clients'
token guards the proxies and the cluster's token every process's RPCs and /metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from pymilvus import MilvusClient, MilvusException

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster
from vectorlog.rpc.errors import ClusterTokenRefused
from vectorlog.rpc.rootcoord_client import RootCoordClient

#: one worker runs both tests, on one cluster (starting its seven processes takes 20-40 s)
pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("process-cluster")]


@pytest.fixture(scope="module")
def cluster(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessCluster]:
    """The module's cluster: the first test writes and restarts the query node, the last one
    checks the processes' lifecycle and closes it."""
    made = ProcessCluster(kafka_bootstrap, tmp_path_factory.mktemp("processes"), proxies=2)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def _rows(first: int, n: int) -> list[dict[str, object]]:
    return [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(first, first + n)]


def _ids(client: MilvusClient) -> set[int]:
    rows = client.query("books", filter="id >= 0", output_fields=["id"], limit=1000)
    return {int(r["id"]) for r in rows}


def test_two_proxies_one_database_and_a_query_node_restarted(cluster: ProcessCluster):
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    one.create_collection("books", dimension=4, metric_type="L2", consistency_level="Strong")
    assert one.insert("books", _rows(0, 10))["insert_count"] == 10
    assert _ids(two) == set(range(10))  # written through 1, read Strong through 2
    assert two.insert("books", _rows(10, 10))["insert_count"] == 10
    assert _ids(one) == set(range(20))  # and the reverse

    one.flush("books")
    (hits,) = two.search("books", [[13.0, 0.0, 0.0, 1.0]], limit=3)
    assert [h["id"] for h in hits] == [13, 12, 14] or [h["id"] for h in hits] == [13, 14, 12]
    # describe_index through a proxy process reports the index node process's builds
    wait_until(
        lambda: two.describe_index("books", "vector").get("indexed_rows") == 20,
        60,
        "the flushed rows indexed, as the proxy reports",
    )
    assert two.describe_index("books", "vector")["state"] == "Finished"
    console = f"http://127.0.0.1:{cluster.members['proxy2'].rest_port}/console/api"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    listed = httpx.get(f"{console}/collections", headers=auth, timeout=30).json()
    assert [(c["name"], c["rows"]) for c in listed] == [("books", 20)]
    segments = httpx.get(f"{console}/segments?collection=books", headers=auth, timeout=30).json()
    assert sum(s["num_rows"] for s in segments) == 20
    assert httpx.get(f"{console}/health", headers=auth, timeout=30).json()["backend"] == "kafka"
    lives = httpx.get(f"{console}/segment-history?collection=books", headers=auth, timeout=30)
    assert {"Growing", "Flushed"} <= {s for life in lives.json() for s in life["states"]}
    page = httpx.get(f"{console}/events?topic=ddl&type=CollectionCreated", headers=auth, timeout=30)
    assert [e["collection"] for e in page.json()["events"]] == ["books"]
    jobs = httpx.get(f"{console}/jobs", headers=auth, timeout=30).json()
    assert [f["collection"] for f in jobs["flushes"]] == ["books"] and jobs["compactions"] == []
    job = one.compact("books")  # datacoord's process runs it (tests/.../test_cluster_jobs.py)
    done = lambda: two.get_compaction_state(job) == "Completed"  # noqa: E731
    wait_until(done, 60, f"compaction {job} Completed, as proxy2 reports")
    listed = httpx.get(f"{console}/jobs", headers=auth, timeout=30).json()["compactions"]
    assert [(c["job_id"], c["state"]) for c in listed] == [(job, "Completed")]

    # a DDL acknowledged through one proxy is seen at once by the other's cached meta
    one.create_collection("papers", dimension=2, consistency_level="Strong")
    assert two.insert("papers", [{"id": 1, "vector": [1.0, 0.0]}])["insert_count"] == 1
    one.drop_collection("papers")
    one.create_collection("papers", dimension=3, consistency_level="Strong")
    assert two.insert("papers", [{"id": 2, "vector": [1.0, 0.0, 0.0]}])["insert_count"] == 1
    assert [r["id"] for r in one.query("papers", filter="id >= 0", output_fields=["id"])] == [2]

    cluster.kill("querynode")
    assert one.insert("books", _rows(20, 5))["insert_count"] == 5  # needs no query node
    cluster.start("querynode")
    assert _ids(two) == set(range(25))
    assert two.query("books", filter="", output_fields=["count(*)"])[0]["count(*)"] == 25
    (hits,) = one.search("books", [[22.0, 0.0, 0.0, 1.0]], limit=1)
    assert hits[0]["id"] == 22


def test_a_search_over_four_shards_equals_the_exact_answer(cluster: ProcessCluster):
    """The query node answers a search on each of its pchannels and merges them before the
    proxy does: with an offset, several queries and an output field, the hits are the
    exact nearest ones in order (growing data: brute force), as one node over all rows."""
    client = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    client.create_collection(
        "shards", dimension=4, metric_type="L2", consistency_level="Strong", num_shards=4
    )
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0], "tag": i % 7} for i in range(200)]
    assert client.insert("shards", rows)["insert_count"] == 200
    queries = [[100.4, 0.0, 0.0, 1.0], [10.3, 0.0, 0.0, 1.0]]
    found = client.search("shards", queries, limit=6, offset=3, output_fields=["tag"])
    expected = [[102, 98, 103, 97, 104, 96], [12, 8, 13, 7, 14, 6]]
    assert [[h["id"] for h in hits] for hits in found] == expected
    assert [h["entity"]["tag"] for h in found[0]] == [i % 7 for i in expected[0]]
    assert found[0][0]["distance"] == pytest.approx(1.6**2, rel=1e-3)  # float32


def _served(cluster: ProcessCluster, method: str) -> float:
    """Returns how many `method` calls rootcoord served, from its /metrics."""
    text = cluster.members["rootcoord"].metrics()
    label = f'method="{method}"'
    found = re.search(r"vectorlog_rpc_served_total\{[^}]*" + label + r"[^}]*\} (\S+)", text)
    return 0.0 if found is None else float(found.group(1))


def test_each_process_logs_its_lifecycle_and_serves_health_and_metrics(
    cluster: ProcessCluster,
):
    proxy = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    proxy.create_collection("shelves", dimension=4, metric_type="L2", consistency_level="Bounded")
    proxy.insert("shelves", _rows(0, 10))
    proxy.search("shelves", [[1.0, 0.0, 0.0, 1.0]], limit=1)
    before = [_served(cluster, m) for m in ("GetMetaVersion", "DescribeCollection")]
    for _ in range(10):  # a Bounded search of unchanged meta asks rootcoord nothing
        proxy.search("shelves", [[1.0, 0.0, 0.0, 1.0]], limit=1)
    assert [_served(cluster, m) for m in ("GetMetaVersion", "DescribeCollection")] == before
    assert before[1] > 0  # the first read fetched the meta

    for name, member in cluster.members.items():
        metrics = member.metrics()
        assert f'vectorlog_process_up{{role="{member.role}"}} 1.0' in metrics, name
        assert f"{member.role} {name}: started" in cluster.log(name, whole=True)
        unscraped = httpx.get(f"http://127.0.0.1:{member.metrics_port}/metrics", timeout=5)
        assert unscraped.status_code == 401, name
    assert "rootcoord: became leader" in cluster.log("rootcoord", whole=True)
    assert "querynode: recovered" in cluster.log("querynode", whole=True)
    assert 'processor="querynode"' in cluster.members["querynode"].metrics()
    with pytest.raises(MilvusException):  # a proxy answers only its clients' token
        MilvusClient(cluster.members["proxy1"].uri).list_collections()
    stranger = RootCoordClient(cluster.members["rootcoord"].rpc)  # without the cluster's
    with pytest.raises(ClusterTokenRefused):
        stranger.list_collections()
    stranger.close()
    cluster.close()
    for name in cluster.members:
        assert f"{name}: stopped" in cluster.log(name), cluster.log(name)
