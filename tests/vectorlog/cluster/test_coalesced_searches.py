"""Coalesced searches through a proxy of real processes on the test broker (test-all): many
concurrent pymilvus clients searching with different limits, offsets, filters, partitions
and output fields get exactly the hits each search gets alone, while the proxy sends some of
them to the two query nodes as one search (runners.coalesce; its counters on /metrics)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster
from tests.vectorlog.cluster.test_scaleout import served

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROWS, DIM, BATCH = 20_000, 8, 5_000
CLIENTS, SEARCHES, RUN = 16, 256, 8


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(kafka_bootstrap, tmp_path, proxies=1, querynodes=2)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def load(client: MilvusClient) -> None:
    """A 4-shard collection of ROWS rows (tag = id % 10) in two partitions, flushed, and a
    few growing rows more."""
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("tag", DataType.INT64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    client.create_collection("docs", schema=schema, num_shards=4, consistency_level="Bounded")
    client.create_partition("docs", "odd")
    vectors = np.random.default_rng(5).random((ROWS + 100, DIM), dtype=np.float32)
    for lo in range(0, ROWS + 100, BATCH):
        for part in ("_default", "odd"):
            rows = [
                {"id": i, "tag": i % 10, "vector": vectors[i].tolist()}
                for i in range(lo, min(lo + BATCH, ROWS + 100))
                if (i % 2 == 1) == (part == "odd")
            ]
            client.insert("docs", rows, partition_name=part)
        if lo + BATCH == ROWS:
            client.flush("docs")


def kinds() -> Iterator[dict[str, Any]]:
    """Yields SEARCHES searches' arguments: 16 kinds, each RUN times in a row (so that
    searches of one kind run at once), the kinds' runs mixed."""
    rng = np.random.default_rng(9)
    shapes = list(
        itertools.product(
            [(3, 0), (10, 2)],  # limit, offset
            ["", "tag < 5"],
            [None, ["odd"]],
            [None, ["tag"]],
        )
    )
    for i in range(SEARCHES):
        (limit, offset), expr, parts, fields = shapes[(i // RUN) % len(shapes)]
        yield {
            "data": [rng.random(DIM, dtype=np.float32).tolist()],
            "limit": limit,
            "offset": offset,
            "filter": expr,
            "partition_names": parts,
            "output_fields": fields,
            "consistency_level": "Strong" if i % 5 == 0 else "Bounded",
        }


def hits(client: MilvusClient, kw: dict[str, Any]) -> tuple[list[tuple[int, Any]], list[float]]:
    """Returns a search's hits (id, tag) and their distances (a batch's distances may differ
    from one query's in the last bits: faiss computes several queries' at once)."""
    (found,) = client.search("docs", **kw)
    return [(h["id"], h["entity"].get("tag")) for h in found], [h["distance"] for h in found]


def counter(cluster: ProcessCluster, name: str) -> int:
    found = re.search(rf"^{name}_total (\S+)$", cluster.metrics("proxy1"), re.M)
    assert found is not None, name
    return int(float(found.group(1)))


def test_concurrent_searches_coalesced_equal_each_alone(cluster):
    client = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    load(client)
    wait_until(lambda: served(cluster) == {"querynode1": 2, "querynode2": 2}, 120, "2 + 2")
    searches = list(kinds())
    alone = [hits(client, kw) for kw in searches]  # one at a time: none coalesced
    assert counter(cluster, "vectorlog_proxy_searches_coalesced") == 0
    clients = [MilvusClient(cluster.members["proxy1"].uri, token=TOKEN) for _ in range(CLIENTS)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        together = list(
            pool.map(lambda i: hits(clients[i % CLIENTS], searches[i]), range(SEARCHES))
        )
    assert [ids for ids, _ in together] == [ids for ids, _ in alone]
    for (_, d), (_, expected) in zip(together, alone, strict=True):
        np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-6)
    assert all(len(ids) == kw["limit"] for (ids, _), kw in zip(alone, searches, strict=True))
    # some of the concurrent ones went in batches (8 of a kind run at once)
    assert counter(cluster, "vectorlog_proxy_searches_coalesced") > 0
