"""Read-your-DDL across proxy processes (runners/meta_cache.py, ddl_watch.py), on the test
broker: each proxy's meta follows the ddl topic instead of asking rootcoord per request, yet a
DDL acknowledged through one proxy is seen by the next request through the other, round after
round: a collection dropped and recreated with another dimension takes rows of the new one
at once, an alias moved reads the new target, an added field is written and read back; and
searches of unchanged meta, Bounded or Strong, ask rootcoord for no meta (the timestamps
they ask are counted by benchmarks/rpc_counts_bench.py: other processes ask some too)."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymilvus import DataType, MilvusClient

from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=2)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def served(cluster: ProcessCluster, method: str) -> float:
    """Returns how many `method` calls rootcoord served, from its /metrics."""
    text = cluster.members["rootcoord"].metrics()
    label = f'method="{method}"'
    found = re.search(r"vectorlog_rpc_served_total\{[^}]*" + label + r"[^}]*\} (\S+)", text)
    return 0.0 if found is None else float(found.group(1))


def ids(client: MilvusClient, name: str) -> list[int]:
    rows = client.query(name, filter="id >= 0", output_fields=["id"], consistency_level="Strong")
    return sorted(int(r["id"]) for r in rows)


def test_each_ddl_through_one_proxy_is_seen_at_once_through_the_other(cluster: ProcessCluster):
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    for dim in (2, 3, 5, 2, 7):
        ddl, dml = (one, two) if dim % 2 else (two, one)
        if ddl.has_collection("c"):
            ddl.drop_collection("c")
        ddl.create_collection("c", dimension=dim, consistency_level="Strong")
        assert dml.insert("c", [{"id": dim, "vector": [1.0] * dim}])["insert_count"] == 1
        assert ids(ddl, "c") == [dim]
        (hits,) = dml.search("c", [[1.0] * dim], limit=1)
        assert [h["id"] for h in hits] == [dim]
    one.create_collection("d", dimension=7, consistency_level="Strong")
    one.insert("d", [{"id": 70, "vector": [0.5] * 7}])
    one.create_alias("c", "current")
    assert ids(two, "current") == [7]
    one.alter_alias("d", "current")
    assert ids(two, "current") == [70]
    one.add_collection_field("d", "tag", DataType.VARCHAR, max_length=8, nullable=True)
    two.insert("d", [{"id": 71, "vector": [0.5] * 7, "tag": "new"}])
    got = one.query("d", filter="id == 71", output_fields=["tag"], consistency_level="Strong")
    assert [r["tag"] for r in got] == ["new"]


def test_searches_of_unchanged_meta_ask_rootcoord_for_no_meta(
    cluster: ProcessCluster,
):
    proxy = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    proxy.create_collection("c", dimension=4, consistency_level="Bounded")
    proxy.insert("c", [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(20)])
    proxy.search("c", [[1.0, 0.0, 0.0, 1.0]], limit=3, consistency_level="Strong")
    meta = ("GetMetaVersion", "DescribeCollection")
    before = [served(cluster, m) for m in meta]
    for _ in range(10):
        (hits,) = proxy.search("c", [[1.0, 0.0, 0.0, 1.0]], limit=3)
        assert hits[0]["id"] == 1
    for _ in range(10):
        (hits,) = proxy.search("c", [[2.0, 0.0, 0.0, 1.0]], limit=3, consistency_level="Strong")
        assert hits[0]["id"] == 2
    assert [served(cluster, m) for m in meta] == before


def counter(text: str, name: str) -> float:
    """Returns the value of the counter `name` (without labels) in /metrics `text`."""
    found = re.search(rf"^{name}_total (\S+)$", text, re.M)
    assert found is not None, name
    return float(found.group(1))


def test_reads_and_ddl_ask_the_broker_nothing_while_the_ddl_lease_holds(cluster: ProcessCluster):
    """Each DDL through proxy 1 (a drop and recreate with another dimension, a dropped index,
    altered properties) is seen by the next request through proxy 2, whose reads wait only
    for their own ddl reader to pass the fence rootcoord's DDL lease gave it: no query to
    the broker for the ddl topic's end (processors/rootcoord/ddl_followers.py)."""
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    one.create_collection("c", dimension=4, consistency_level="Strong")
    two.describe_collection("c")
    ends = counter(cluster.metrics("proxy2"), "vectorlog_ddl_end_queries")
    for dim in (3, 6):
        one.drop_collection("c")
        one.create_collection("c", dimension=dim, consistency_level="Strong")
        assert two.insert("c", [{"id": dim, "vector": [1.0] * dim}])["insert_count"] == 1
        (hits,) = two.search("c", [[1.0] * dim], limit=1)
        assert [h["id"] for h in hits] == [dim]
    assert two.list_indexes("c") == ["vector"]
    one.release_collection("c")
    one.drop_index("c", "vector")
    assert two.list_indexes("c") == []
    one.alter_collection_properties("c", {"collection.ttl.seconds": 60})
    props = two.describe_collection("c")["properties"]
    assert props["collection.ttl.seconds"] == "60"
    assert counter(cluster.metrics("proxy2"), "vectorlog_ddl_end_queries") == ends


def test_a_ddl_while_a_proxy_is_paused_is_seen_by_it_when_it_resumes(cluster: ProcessCluster):
    """Proxy 2 paused (SIGSTOP: it renews no lease, reads nothing): a drop and recreate with
    another dimension through proxy 1 returns only once proxy 2's lease lapsed (as Milvus's
    DDL waits for InvalidateCollectionMetaCache on every proxy whose session is live; Milvus
    then fails the DDL, here the lapsed lease fences the proxy), and proxy 2's first request
    once resumed sees it (its lease lapsed: it asks the broker where the ddl topic ends
    until rootcoord renews it)."""
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    one.create_collection("c", dimension=4, consistency_level="Strong")
    two.insert("c", [{"id": 4, "vector": [1.0] * 4}])
    cluster.send("proxy2", signal.SIGSTOP)
    try:
        one.drop_collection("c")
        one.create_collection("c", dimension=5, consistency_level="Strong")
    finally:
        cluster.send("proxy2", signal.SIGCONT)
    assert two.insert("c", [{"id": 5, "vector": [1.0] * 5}])["insert_count"] == 1
    (hits,) = two.search("c", [[1.0] * 5], limit=2)
    assert [h["id"] for h in hits] == [5]
