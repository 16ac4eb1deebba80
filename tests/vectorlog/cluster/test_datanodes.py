"""Several data nodes as real OS processes on the test broker (test-all): two data nodes
divide the dml pchannels; one is SIGKILLed while a flush runs, and the other takes its
pchannels over from their last checkpoint (and the keys in their binlogs: deletes of rows
the first owners wrote reach delta logs); a data node SIGSTOPped past its heartbeat window
and continued is fenced (what it writes then is not taken) and registers again. Every row
inserted is in the binlogs coord references exactly once, read back from them."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster
from vectorlog.processors.querynode.recovery import read_point
from vectorlog.storage.binlog_read import int64s, read_insert_binlog
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.kafka import KafkaLog
from vectorlog.streams.topics import Serdes, Topics

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

DIM, BATCH = 8, 2_000
PK_FIELD = 100  # the first user field: the primary key "id"


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=1, datanodes=2)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def written(cluster: ProcessCluster) -> dict[str, int]:
    """Returns the pchannels each data node writes, as datacoord's assignment says."""
    text = cluster.metrics("datacoord")
    found = re.findall(r'vectorlog_data_pchannels_written\{node="(\w+)"\} (\d+)', text)
    return {node: int(float(n)) for node, n in found}


def insert(client: MilvusClient, start: int, stop: int) -> None:
    rng = np.random.default_rng(start)
    for lo in range(start, stop, BATCH):
        ids = range(lo, min(lo + BATCH, stop))
        vectors = rng.random((len(ids), DIM), dtype=np.float32)
        rows = zip(ids, vectors.tolist(), strict=True)
        client.insert("docs", [{"id": i, "vector": v} for i, v in rows])


def flush(client: MilvusClient) -> None:
    """Flushes, again after a failure (a flush may time out while a pchannel moves)."""
    for _ in range(5):
        try:
            client.flush("docs")
            return
        except Exception:
            continue
    client.flush("docs")


def ids_in_binlogs(cluster: ProcessCluster, bootstrap: str) -> Counter[int]:
    """Returns how often each primary key occurs in the insert binlogs coord references
    (fenced writes left out), read back from the object store."""
    log = KafkaLog(bootstrap)
    try:
        topics = Topics(cluster.cluster, 4)
        point = read_point(log, topics.coord, Serdes(None, False).for_topic(topics.coord), None)
    finally:
        log.close()
    store = PyArrowObjectStore(str(cluster.storage))
    seen: Counter[int] = Counter()
    for seg in point.segments.values():
        for write in seg.writes:
            path = write[PK_FIELD]
            seen.update(int64s(read_insert_binlog(store.get(path), path), path).tolist())
    return seen


@pytest.mark.timeout(900)
def test_a_killed_data_node_hands_its_channels_over_and_every_row_is_written_once(
    cluster: ProcessCluster, kafka_bootstrap: str
):
    wait_until(lambda: written(cluster) == {"datanode1": 2, "datanode2": 2}, 60, "divided")
    client = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    client.create_collection(
        "docs", dimension=DIM, metric_type="L2", num_shards=4, consistency_level="Strong"
    )
    insert(client, 0, 20_000)

    flushing = threading.Thread(target=flush, args=(client,))
    flushing.start()
    time.sleep(1.0)
    cluster.kill("datanode1")  # while the flush writes its segments
    flushing.join()
    wait_until(lambda: written(cluster) == {"datanode2": 4}, 60, "datanode2 took all")
    insert(client, 20_000, 30_000)
    flush(client)

    cluster.start("datanode1")  # a new epoch: it gets its share back
    wait_until(lambda: written(cluster) == {"datanode1": 2, "datanode2": 2}, 60, "rebalanced")
    insert(client, 30_000, 36_000)
    proc = cluster.members["datanode2"].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)  # silent past its heartbeat window
    wait_until(lambda: written(cluster) == {"datanode1": 4}, 60, "datanode2 declared dead")
    flush(client)
    proc.send_signal(signal.SIGCONT)  # writes what it buffered with a dead epoch: fenced
    wait_until(lambda: written(cluster) == {"datanode1": 2, "datanode2": 2}, 60, "back")
    client.delete("docs", ids=list(range(1_000)))  # rows the first owners wrote
    insert(client, 36_000, 40_000)
    flush(client)

    seen = ids_in_binlogs(cluster, kafka_bootstrap)
    assert sorted(seen) == list(range(40_000))
    assert {n for n in seen.values()} == {1}
    cluster.kill("querynode")  # it loads the deletes from delta logs, past the checkpoint
    cluster.start("querynode")
    count = client.query("docs", filter="", output_fields=["count(*)"])[0]["count(*)"]
    assert count == 39_000
    assert client.query("docs", ids=[0, 999, 1_000], output_fields=["id"]) == [{"id": 1_000}]
