"""Several index nodes as real OS processes on the test broker (test-all): datacoord divides
the index builds among them by the segments' pchannels; one is SIGKILLed and its builds go to
the other: every flushed row ends up indexed, as describe_index reports through the proxy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

DIM = 8


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=1, indexnodes=2)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def building(cluster: ProcessCluster) -> dict[str, int]:
    """Returns the pchannels whose builds each index node does, as datacoord says."""
    text = cluster.metrics("datacoord")
    found = re.findall(r'vectorlog_index_pchannels_built\{node="(\w+)"\} (\d+)', text)
    return {node: int(float(n)) for node, n in found}


def insert(client: MilvusClient, start: int, stop: int) -> None:
    vectors = np.random.default_rng(start).random((stop - start, DIM), dtype=np.float32)
    rows = [{"id": start + i, "vector": v} for i, v in enumerate(vectors.tolist())]
    client.insert("docs", rows)
    client.flush("docs")


def indexed(client: MilvusClient) -> int:
    return int(client.describe_index("docs", "vector").get("indexed_rows", 0))


@pytest.mark.timeout(600)
def test_index_builds_are_divided_and_a_dead_index_nodes_builds_move(cluster: ProcessCluster):
    halves = {"indexnode1": 2, "indexnode2": 2}
    wait_until(lambda: building(cluster) == halves, 60, "builds divided")
    client = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    client.create_collection(
        "docs", dimension=DIM, metric_type="L2", num_shards=4, consistency_level="Strong"
    )
    insert(client, 0, 4_000)
    wait_until(lambda: indexed(client) == 4_000, 120, "every flushed row indexed")
    for name in ("indexnode1", "indexnode2"):  # both built some
        assert "built index" in cluster.log(name), name

    cluster.kill("indexnode2")
    wait_until(lambda: building(cluster) == {"indexnode1": 4}, 60, "indexnode1 has all")
    insert(client, 4_000, 8_000)
    wait_until(lambda: indexed(client) == 8_000, 120, "the new rows indexed by indexnode1")
    assert client.describe_index("docs", "vector")["state"] == "Finished"
