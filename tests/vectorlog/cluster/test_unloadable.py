"""A corrupt binlog in cluster mode, with real processes on the test broker (test-all): a
flushed segment's binlogs are overwritten on the storage and the only query node starts again
from them. While the log still holds the segment's dml, the node says which binlog it cannot
read and replays the dml instead: every read is complete. (When retention deleted that dml,
the pchannel is reported unloadable: tests/vectorlog/cluster/test_fanout.py and the query
node's recovery tests; the test broker cannot delete records.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from tests.support import stored_files, wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROWS, DIM = 2_000, 8


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    # no mmap cache: the restarted query node decodes the segment's binlogs again
    made = ProcessCluster(
        kafka_bootstrap, tmp_path, proxies=1, env={"VECTORLOG_QUERYNODE_MMAP": "false"}
    )
    try:
        made.start_all()
        yield made
    finally:
        made.close()


def corrupt_segment(storage: Path) -> int:
    """Overwrites every insert binlog of one flushed segment with garbage; returns its id."""
    files = stored_files(storage / "insert_log")
    assert files, "no insert binlog written"
    segment = int(files[0].relative_to(storage / "insert_log").parts[2])
    for f in files:
        if int(f.relative_to(storage / "insert_log").parts[2]) == segment:
            f.write_bytes(b"not a binlog" * 10)
    return segment


def test_a_corrupt_segment_is_read_again_from_the_log_and_no_row_is_missing(cluster):
    client = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    client.create_collection(
        "docs", dimension=DIM, metric_type="L2", num_shards=1, consistency_level="Strong"
    )
    vectors = np.random.default_rng(7).random((ROWS, DIM), dtype=np.float32)
    rows = [{"id": i, "vector": vectors[i].tolist()} for i in range(ROWS)]
    assert client.insert("docs", rows)["insert_count"] == ROWS
    client.flush("docs")
    segment = corrupt_segment(cluster.storage)

    cluster.kill("querynode")  # SIGKILL; it starts again from the binlogs
    cluster.start("querynode")
    wait_until(lambda: "replaying dml from 0 instead" in cluster.log("querynode"), 180, "replay")
    assert f"/{segment}/" in cluster.log("querynode")  # the log names the corrupt binlog
    count = client.query("docs", filter="", output_fields=["count(*)"])[0]["count(*)"]
    (hits,) = client.search("docs", [vectors[1234].tolist()], limit=1)
    assert (count, hits[0]["id"]) == (ROWS, 1234)
    assert client.get_load_state("docs")["state"].name == "Loaded"
