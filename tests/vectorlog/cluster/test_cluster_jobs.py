"""Bulk insert and compaction in the cluster mode, as real `vectorlog run` processes on the test
broker (slow: `make test-all`): unmodified pymilvus asks one proxy and reads the states
through the other; the leading datacoord runs the jobs and its background compaction policy;
a datacoord that dies in the middle of an import is started again and reports the job Failed,
naming the restart, with nothing of it visible. The RPCs alone, in process and on both
backends, are tests/vectorlog/runners/test_cluster_jobs.py (make test)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymilvus import MilvusClient, connections, utility
from pymilvus.client.types import BulkInsertState

from tests.support import wait_until
from tests.vectorlog.cluster.processes import TOKEN, ProcessCluster
from vectorlog.core.faults import CRASH_EXIT, ENV

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
ENDED = (BulkInsertState.ImportCompleted, BulkInsertState.ImportFailedAndCleaned)


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    made = ProcessCluster(
        kafka_bootstrap, tmp_path, proxies=2, env={"VECTORLOG_COMPACTION_INTERVAL_S": "2"}
    )
    try:
        made.start_all()
        yield made
    finally:
        made.close()


@pytest.fixture
def aliases(cluster: ProcessCluster) -> Iterator[tuple[str, str]]:
    """pymilvus connections to proxy1 and proxy2 (for `utility`)."""
    names = (f"a{uuid.uuid4().hex[:8]}", f"b{uuid.uuid4().hex[:8]}")
    for name, proxy in zip(names, ("proxy1", "proxy2"), strict=True):
        connections.connect(alias=name, uri=cluster.members[proxy].uri, token=TOKEN)
    yield names
    for name in names:
        connections.disconnect(name)


def segments(cluster: ProcessCluster, collection: str) -> list[dict[str, Any]]:
    """Returns the collection's live segments, as proxy2's console lists them."""
    console = f"http://127.0.0.1:{cluster.members['proxy2'].rest_port}/console/api"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.get(f"{console}/segments?collection={collection}", headers=auth, timeout=30)
    return [s for s in answer.json() if s["state"] != "Dropped"]


def write_in_batches(milvus: MilvusClient, name: str, batches: int) -> None:
    """Creates `name` and writes `batches` flushed batches of 10 rows (small segments)."""
    milvus.create_collection(name, dimension=4, metric_type="L2", consistency_level="Strong")
    for b in range(batches):
        rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(b * 10, b * 10 + 10)]
        milvus.insert(name, rows)
        milvus.flush(name)


def ended(task: int, alias: str) -> Any:
    def done() -> Any:
        state = utility.get_bulk_insert_state(task, using=alias)
        return state if state.state in ENDED else None

    return wait_until(done, 300, f"bulk insert {task} to end", interval=0.2)


def count(milvus: MilvusClient, name: str) -> int:
    return int(milvus.query(name, "", output_fields=["count(*)"])[0]["count(*)"])


def test_bulk_insert_and_compaction_through_the_proxies(
    cluster: ProcessCluster, aliases: tuple[str, str]
):
    one = MilvusClient(cluster.members["proxy1"].uri, token=TOKEN)
    two = MilvusClient(cluster.members["proxy2"].uri, token=TOKEN)
    # the background policy merges the small segments of a collection nobody compacts
    write_in_batches(one, "auto", 3)
    merged = lambda: len(segments(cluster, "auto")) == 1  # noqa: E731
    wait_until(merged, 120, "datacoord's policy merging the three segments")
    assert count(two, "auto") == 30
    # a manual compaction asked through one proxy, its state read through the other
    write_in_batches(one, "books", 3)
    job = one.compact("books")
    state = lambda: two.get_compaction_state(job) == "Completed"  # noqa: E731
    wait_until(state, 120, f"compaction {job} Completed, through proxy2")
    wait_until(lambda: len(segments(cluster, "books")) == 1, 120, "books merged")
    assert count(two, "books") == 30
    # a bulk insert of a file under the storage root (paths relative to it)
    folder = cluster.storage / "in"
    folder.mkdir()
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(100, 140)]
    (folder / "rows.json").write_text(json.dumps({"rows": rows}))
    task = utility.do_bulk_insert("books", ["in/rows.json"], using=aliases[0])
    done = ended(task, aliases[1])
    assert (done.state, done.row_count) == (BulkInsertState.ImportCompleted, 40)
    assert count(one, "books") == 70
    listed = utility.list_bulk_insert_tasks(collection_name="books", using=aliases[1])
    assert [t.task_id for t in listed] == [task]
    with pytest.raises(Exception, match="passwd"):  # outside the storage root: refused
        utility.do_bulk_insert("books", ["../../../../etc/passwd"], using=aliases[0])

    # datacoord dies once the import's files are written: started again, it fails the job
    cluster.kill("datacoord")
    cluster.env[ENV] = "bulkinsert.after_files"
    cluster.start("datacoord")
    del cluster.env[ENV]
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(200, 210)]
    (folder / "more.json").write_text(json.dumps({"rows": rows}))
    cut = utility.do_bulk_insert("books", ["in/more.json"], using=aliases[0])
    proc = cluster.members["datacoord"].proc
    assert proc is not None and proc.wait(timeout=300) == CRASH_EXIT
    cluster.start("datacoord")
    failed = ended(cut, aliases[1])
    assert failed.state == BulkInsertState.ImportFailedAndCleaned
    assert "datacoord restarted before the import's commit" in failed.infos["failed_reason"]
    assert count(two, "books") == 70
    again = utility.get_bulk_insert_state(task, using=aliases[0])  # recorded before: kept
    assert (again.state, again.row_count) == (BulkInsertState.ImportCompleted, 40)
