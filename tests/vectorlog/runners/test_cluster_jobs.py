"""The cluster mode's jobs (runners.jobs, runners.jobs_client) in one process, on both log
backends: datacoord's job RPCs (DataCoord v3) served over gRPC from the real BulkInserter
and Compactor of a cluster, called through the proxy side's RemoteBulkInserter and
RemoteCompactor. A compaction and a bulk insert run to Completed with the answers `vectorlog
serve` gives; a path outside the import root is refused before any job exists; each state
is recorded on coord, so a datacoord started later (a restart, a standby's takeover) answers
the ended jobs and records the ones cut short Failed, naming the restart; an import cut short
in its commit is decided from dml (Completed however late its segments show up if the commit
landed, Failed at once if it did not). The same through
real `vectorlog run` processes and pymilvus: tests/vectorlog/cluster/test_cluster_jobs.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.clients import ClientFactory
from tests.support import wait_until
from tests.vectorlog.test_compaction import SETTINGS, build
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.jobs.bulkinsert import BulkInserter, ImportTaskNotFound
from vectorlog.jobs.compaction import Compactor, local_merger
from vectorlog.processors.proxy.importfiles import ImportFileError
from vectorlog.rpc.datacoord_client import DataCoordClient
from vectorlog.rpc.server import RpcServer
from vectorlog.runners.import_commits import CommitLog
from vectorlog.runners.jobs import (
    CUT_BEFORE_COMMIT,
    CUT_COMPACTION,
    CUT_IN_COMMIT,
    ClusterJobs,
    JobRecorder,
    ServedDataCoord,
    recorded_jobs,
)
from vectorlog.runners.jobs_client import RemoteBulkInserter, RemoteCompactor
from vectorlog.server.import_paths import ImportPathRefused


def datacoord_jobs(client: Client, root: Path, datacoord: Any = None) -> ClusterJobs:
    """Returns the jobs a leading datacoord of `client`'s cluster would run (files under
    `root`; segments looked up on `datacoord`, default the cluster's), after taking back
    those recorded on coord."""
    cluster = client.cluster
    objects = cluster._store()
    uri, max_bytes = client.cfg.storage_uri(), client.cfg.datacoord_settings().max_segment_bytes
    master = client.cfg.spark_master
    bulk = BulkInserter(cluster.proxy, cluster.rootcoord, objects, uri, max_bytes, master)
    compactor = Compactor(cluster.proxy, cluster.rootcoord, objects, local_merger(objects), None)
    coord = cluster.topics.coord
    serde = cluster.serdes.for_topic(coord)
    recorder = JobRecorder(cluster.log, coord, serde, cluster.rootcoord.now)
    dml = cluster.topics.dml
    commits = CommitLog(cluster.log, dml, cluster.serdes.for_topic(dml))
    jobs = ClusterJobs(bulk, compactor, recorder, datacoord or cluster.datacoord, root, commits)
    jobs.recover(recorded_jobs(cluster.log, coord, serde, objects))
    return jobs


@pytest.fixture
def served_jobs() -> Iterator[Any]:
    """Serves a ClusterJobs as datacoord's RPC; yields a function returning a client to it."""
    opened: list[Any] = []

    def serve(client: Client, jobs: ClusterJobs) -> DataCoordClient:
        served = ServedDataCoord(client.cluster.datacoord, jobs)
        server = RpcServer("127.0.0.1:0", datacoord=served)
        server.start()
        dc = DataCoordClient(server.address)
        opened.extend([jobs.stop, server.stop, dc.close, jobs.bulk.close])
        return dc

    yield serve
    for close in reversed(opened):
        close()


def parquet(path: Path, ids: range) -> None:
    vectors = [[float(i), 1.0, 0.0, 0.0] for i in ids]
    table = pa.table({"id": list(ids), "vector": vectors, "tag": ["pq"] * len(ids)})
    pq.write_table(table, path)


def test_jobs_run_through_datacoords_rpc_and_a_restart_answers_or_fails_them(
    open_client: ClientFactory, served_jobs: Any, tmp_path: Path
):
    client = open_client(**SETTINGS)
    build(client)  # four flushes over two shards: small segments
    root = tmp_path / "imports"
    root.mkdir()
    parquet(root / "rows.parquet", range(1000, 1100))
    dc = served_jobs(client, datacoord_jobs(client, root))
    compactor, bulk = RemoteCompactor(dc), RemoteBulkInserter(dc, root)

    job = compactor.compact("c", wait=True)
    assert (job.state, job.failures) == ("Completed", [])
    merged = client.list_segments("c")
    assert len(merged) == 2 and {s["state"] for s in merged} == {"Flushed"}
    assert job.merged and set(job.merged) == {s["segment_id"] for s in merged}

    with pytest.raises(ImportPathRefused, match="etc/passwd"):
        bulk.submit("c", ["../../../../etc/passwd"], wait=False)
    (root / "rows.txt").write_text("1,2")
    with pytest.raises(ImportFileError, match="unknown format"):  # crosses as itself
        bulk.submit("c", [str(root / "rows.txt")], wait=False)
    assert bulk.jobs_of() == []  # refused before any job existed
    task = bulk.submit("c", [str(root / "rows.parquet")], wait=True)
    state = task.as_dict()
    assert (state["state"], state["row_count"], state["progress"]) == ("Completed", 100, 100)
    caught_up(client)
    count = client.query("c", "id >= 1000", output_fields=["count(*)"])[0]["count(*)"]
    assert count == 100

    # a leader that died mid-job left these on coord; the next one fails them, visibly
    cluster = client.cluster
    coord = cluster.topics.coord
    cut = JobRecorder(cluster.log, coord, cluster.serdes.for_topic(coord), cluster.rootcoord.now)
    cut.record("import", 77, "c", "Pending", _import_fields(77))
    cut.record("compaction", 78, "c", "Executing", _compaction_fields(78))
    landed = state["segment_ids"]  # as if the leader died right after this commit's append
    committing = {**_import_fields(80), "segment_ids": landed, "row_count": 100}
    cut.record("import", 80, "c", "Committing", committing)
    dc2 = served_jobs(client, datacoord_jobs(client, root))
    bulk2, compactor2 = RemoteBulkInserter(dc2, root), RemoteCompactor(dc2)
    assert bulk2.state(task.task_id).as_dict()["state"] == "Completed"
    assert compactor2.state(job.job_id).merged == job.merged
    failed = bulk2.state(77).as_dict()
    assert (failed["state"], failed["failed_reason"]) == ("Failed", CUT_BEFORE_COMMIT)
    assert (compactor2.state(78).state, compactor2.state(78).failures) == (
        "Failed",
        [CUT_COMPACTION],
    )
    with pytest.raises(ImportTaskNotFound):
        bulk2.state(79)
    resumed = lambda: bulk2.state(80).as_dict()["state"] == "Completed"  # noqa: E731
    wait_until(resumed, 60, "the import cut short in its commit Completed")
    assert bulk2.state(80).as_dict()["row_count"] == 100
    # the failures are on coord too: a third datacoord reads them as ended
    serde = cluster.serdes.for_topic(coord)
    again = recorded_jobs(cluster.log, coord, serde, cluster._store())
    assert [again[j]["state"] for j in (77, 78, 80)] == ["Failed", "Failed", "Completed"]
    assert json.loads(again[task.task_id]["detail"])["row_count"] == 100


def _import_fields(task_id: int) -> dict[str, Any]:
    return {"task_id": task_id, "collection_name": "c", "files": ["x.parquet"], "units": 1}


def _compaction_fields(job_id: int) -> dict[str, Any]:
    return {"job_id": job_id, "collection_name": "c", "merged": {}}


class LateSegments:
    """A datacoord whose segments `hidden` read as NotExist until `show()`: a data node that
    applies a commit late (down for a while, a loaded machine)."""

    def __init__(self, datacoord: Any, hidden: list[int]) -> None:
        self._dc, self._hidden, self._shown = datacoord, set(hidden), threading.Event()
        self.asked = 0

    def show(self) -> None:
        self._shown.set()

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        self.asked += 1
        infos = self._dc.get_segment_info(segment_ids)
        if self._shown.is_set():
            return list(infos)
        return [{**i, "state": "NotExist"} if i["segment_id"] in self._hidden else i for i in infos]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dc, name)


def test_an_import_cut_in_its_commit_is_decided_from_dml_not_a_timer(
    open_client: ClientFactory, served_jobs: Any, tmp_path: Path, monkeypatch: Any
):
    # the old rule failed an import whose segments were not shown within FLUSHED_WAIT_S
    monkeypatch.setattr("vectorlog.runners.jobs.FLUSHED_WAIT_S", 0.0)
    client = open_client(**SETTINGS)
    build(client)
    root = tmp_path / "imports"
    root.mkdir()
    parquet(root / "rows.parquet", range(1000, 1100))
    dc = served_jobs(client, datacoord_jobs(client, root))
    task = RemoteBulkInserter(dc, root).submit("c", [str(root / "rows.parquet")], wait=True)
    landed = task.as_dict()
    assert landed["state"] == "Completed"

    # a leader died right after this commit's append (before recording Completed), and
    # another during a commit that never reached dml
    cluster = client.cluster
    coord = cluster.topics.coord
    serde = cluster.serdes.for_topic(coord)
    cut = JobRecorder(cluster.log, coord, serde, cluster.rootcoord.now)
    fields = json.loads(
        recorded_jobs(cluster.log, coord, serde, cluster._store())[task.task_id]["detail"]
    )
    cut.record("import", task.task_id, "c", "Committing", {**fields, "state": "Committing"})
    dml = cluster.topics.dml
    ends = CommitLog(cluster.log, dml, cluster.serdes.for_topic(dml)).ends()
    never = {**_import_fields(81), "segment_ids": [987654321], "row_count": 5, "dml_from": ends}
    cut.record("import", 81, "c", "Committing", never)

    late = LateSegments(cluster.datacoord, landed["segment_ids"])
    bulk2 = RemoteBulkInserter(served_jobs(client, datacoord_jobs(client, root, late)), root)
    decided = lambda: late.asked >= 20 and bulk2.state(81).state == "Failed"  # noqa: E731
    wait_until(decided, 60, "the commit that never landed Failed, the other one waiting")
    failed = bulk2.state(81).as_dict()
    assert (failed["failed_reason"], failed["row_count"]) == (CUT_IN_COMMIT, 0)
    assert bulk2.state(task.task_id).state == "Committing"  # its segments are still hidden
    late.show()
    resumed = lambda: bulk2.state(task.task_id).state == "Completed"  # noqa: E731
    wait_until(resumed, 60, "the commit that landed Completed once its segments showed up")
    assert bulk2.state(task.task_id).as_dict()["row_count"] == 100
    again = recorded_jobs(cluster.log, coord, serde, cluster._store())
    assert [again[j]["state"] for j in (task.task_id, 81)] == ["Completed", "Failed"]
