"""A cluster member is patient with its peers at its start, as Milvus components are (issue
23), with real OS processes on the test broker: one started while its rootcoord is paused
(SIGSTOP) waits, logging each wait naming rootcoord's address, and comes up once rootcoord is
continued, even when rootcoord pauses again right after answering its first wait (the next
call of its start times out: the start is made again); one whose rootcoord never answers
refuses to start after VECTORLOG_RUN_PEER_WAIT_S (set short here), exit code 2, with one
line naming rootcoord and its address; one with another cluster's token is refused without
waiting. A proxy whose rootcoord is paused answers a call that needs rootcoord with Milvus's
"service unavailable" (merr 2) once the call's deadline passes, never hanging its client, and
serves it again by itself once rootcoord is continued."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymilvus import MilvusClient, MilvusException

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("process-cluster")]
#: seconds a member may take to be healthy on a loaded machine
START_S = 300
#: seconds a paused rootcoord stays paused after answering once: past one call's deadline
#: (vectorlog.rpc.channel.DEFAULT_DEADLINE_S, 10 s)
PAUSE_S = 12.0
#: the members' start-up timeout in the refusal test
SHORT_WAIT_S = 8


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=0)
    try:
        yield made
    finally:
        if made.members["rootcoord"].proc is not None:
            made.send("rootcoord", signal.SIGCONT)  # a paused one would not stop
        made.close()


def test_a_member_started_while_rootcoord_is_paused_comes_up_once_it_is_continued(
    cluster: ProcessCluster,
):
    cluster.start("rootcoord", START_S)
    address = cluster.members["rootcoord"].rpc
    cluster.send("rootcoord", signal.SIGSTOP)
    proc = cluster.launch("querynode")
    waiting = f"querynode: waiting for rootcoord at {address}"
    wait_until(lambda: waiting in cluster.log("querynode"), START_S, "the querynode waiting")
    cluster.send("rootcoord", signal.SIGCONT)
    answered = f"querynode: rootcoord at {address} answered"
    wait_until(
        lambda: answered in cluster.log("querynode") or proc.poll() is not None,
        START_S,
        "rootcoord answering the querynode's wait",
    )
    cluster.send("rootcoord", signal.SIGSTOP)  # the querynode's next calls time out
    time.sleep(PAUSE_S)
    cluster.send("rootcoord", signal.SIGCONT)
    member = cluster.members["querynode"]
    wait_until(lambda: proc.poll() is not None or member.healthy(), START_S, "querynode up")
    assert proc.poll() is None, cluster.log("querynode")
    assert "querynode: started" in cluster.log("querynode", whole=True)
    print(f"\nstart attempts: {cluster.log('querynode', whole=True).count('start attempt')}")


def test_a_member_whose_rootcoord_never_answers_refuses_naming_it(
    kafka_bootstrap: str, tmp_path: Path
):
    env = {"VECTORLOG_RUN_PEER_WAIT_S": str(SHORT_WAIT_S)}
    cluster = ProcessCluster(kafka_bootstrap, tmp_path, proxies=0, env=env)
    try:
        cluster.start("rootcoord", START_S)
        address = cluster.members["rootcoord"].rpc
        wrong = cluster.launch("querynode", {"VECTORLOG_CLUSTER_TOKEN": "another-clusters"})
        assert wrong.wait(timeout=START_S) == 2, cluster.log("querynode")
        cluster.send("rootcoord", signal.SIGSTOP)
        proc = cluster.launch("datanode")
        assert proc.wait(timeout=START_S) == 2, cluster.log("datanode")
    finally:
        cluster.send("rootcoord", signal.SIGCONT)
        cluster.close()
    text = cluster.log("datanode", whole=True)
    last = text.strip().splitlines()[-1]
    assert last.startswith(
        f"vectorlog run datanode: datanode: rootcoord at {address} did not answer in "
        f"{SHORT_WAIT_S} s (VECTORLOG_RUN_PEER_WAIT_S): rootcoord at {address} is unavailable"
    ), text
    assert "Traceback" not in text
    refused = cluster.log("querynode", whole=True)
    assert refused.strip().splitlines()[-1] == (
        "vectorlog run querynode: vectorlog.rpc.v5.RootCoord: the call did not carry the "
        "cluster's token (VECTORLOG_CLUSTER_TOKEN)"
    ), refused
    assert "waiting for" not in refused  # refused at its first answer, not retried


def test_a_proxy_whose_rootcoord_is_paused_answers_service_unavailable_then_recovers(
    kafka_bootstrap: str, tmp_path: Path
):
    cluster = ProcessCluster(kafka_bootstrap, tmp_path, proxies=1)
    try:
        cluster.start_all(START_S)
        client = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
        client.create_collection("books", dimension=4)
        cluster.send("rootcoord", signal.SIGSTOP)
        began = time.monotonic()
        with pytest.raises(MilvusException) as refused:
            client.create_collection("films", dimension=4)  # DDL: rootcoord's RPC
        waited = time.monotonic() - began
        assert refused.value.code == 2, refused.value  # Milvus's retriable "service unavailable"
        assert "service unavailable" in refused.value.message
        assert "rootcoord" in refused.value.message
        print(f"\nrefused after {waited:.1f} s")
        cluster.send("rootcoord", signal.SIGCONT)
        wait_until(lambda: created(client, "films"), START_S, "films created once continued")
        assert sorted(client.list_collections()) == ["books", "films"]
        client.close()
    finally:
        if cluster.members["rootcoord"].proc is not None:
            cluster.send("rootcoord", signal.SIGCONT)
        cluster.close()


def created(client: MilvusClient, name: str) -> bool:
    """Returns whether creating collection `name` succeeded (or it exists already)."""
    try:
        client.create_collection(name, dimension=4)
    except MilvusException:
        return client.has_collection(name)
    return True
