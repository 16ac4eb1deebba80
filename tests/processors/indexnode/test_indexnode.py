"""The index node on a real log (both backends), fed by the test as rootcoord and the data node
would feed it: builds for Flushed segments, SegmentIndexed reports, drops, restart recovery,
and failed builds that never stop it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.processors.fakes import FakeRootCoord
from tests.streams.counting import ReaderLog
from tests.support import unique_topic, wait_until
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.faults import armed
from vectorlog.core.model import DataType, FieldSchema
from vectorlog.processors.indexnode import indexnode as indexnode_module
from vectorlog.processors.indexnode.errors import IndexBuildTimeout
from vectorlog.processors.indexnode.files import read_index_files
from vectorlog.processors.indexnode.indexnode import IndexNode
from vectorlog.processors.indexnode.service import FAILED, FINISHED, IN_PROGRESS, IndexProgress
from vectorlog.schemas.serde import Event
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.storage.binlog import DataTypeCode, insert_binlog
from vectorlog.storage.objectstore import MemoryObjectStore
from vectorlog.storage.paths import insert_log_path
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.scan import read_to_end
from vectorlog.streams.topics import Serdes, Topics

pytestmark = pytest.mark.parametrize("log", ["embedded", "kafka"], indirect=True)
CID, PID, IID, DIM, VEC = 10, 11, 12, 8, 101
MIN_ROWS = 100  # segments of >= 100 rows get the index type asked for (HNSW here)


class Cluster:
    """An IndexNode on a real log with a memory state store it can be restarted on."""

    def __init__(self, log: Log, owns: Callable[[int], bool] | None = None) -> None:
        self.owns = owns
        self.log, self.disk, self.objects = log, MemoryDisk(), MemoryObjectStore()
        self.topics = Topics(unique_topic("ix"), dml_partitions=1)
        self.topics.ensure(log)
        self.rc = FakeRootCoord(next_id=1000)
        self.rows = 0  # row ids handed out so far
        self.vectors: dict[int, np.ndarray] = {}
        self.node = self.open()

    def open(self) -> IndexNode:
        store = MemoryStateStore(self.disk)
        node = IndexNode(
            self.log, self.topics, Serdes(), store, self.objects, self.rc, min_rows=MIN_ROWS,
            owns=self.owns,
        )  # fmt: skip
        node.recover()
        node.start()
        return node

    def restart(self) -> None:
        self.node.stop()
        self.node = self.open()

    def append(self, topic: str, event_type: str, body: dict[str, Any]) -> None:
        event = Event(event_type, self.rc.now(), body, body.get("collection_id", 0))
        self.log.append(topic, [Append(0, Serdes().for_topic(topic).encode(event))])

    def create_index(
        self, index_id: int = IID, index_type: str = "HNSW", metric: str = "L2", **params: str
    ) -> None:
        body = {
            "collection_id": CID,
            "index_id": index_id,
            "index_name": f"ix{index_id}",
            "field_id": VEC if metric else 0,  # a scalar index: of the row id column
            "field_name": "vector" if metric else "pk",
            "index_type": index_type,
            "metric_type": metric,
            "params": params,
        }
        self.append(self.topics.ddl, "IndexCreated", body)

    def segment(
        self,
        sid: int,
        rows: int,
        flushed: bool = True,
        damage: bytes | None = None,
        partition: int = PID,
        vchannel: str = "v0",
        compacted_from: tuple[int, ...] = (),
    ) -> None:
        """Writes one insert log per field of `rows` new rows and reports it (BinlogPathsSaved;
        `damage` replaces the vector log's bytes; `compacted_from`: the segments a compaction
        merged into it, Dropped by this report)."""
        log_id = self.rc.allocate_ids()
        ids = np.arange(self.rows, self.rows + rows, dtype=np.int64)
        vectors = np.random.default_rng(sid + self.rows).random((rows, DIM), dtype=np.float32)
        self.rows += rows
        old = self.vectors.get(sid, np.empty((0, DIM), np.float32))
        self.vectors[sid] = np.concatenate([old, vectors])
        logs = []
        for field, kind, values in (
            (0, DataTypeCode.INT64, ids),
            (VEC, DataTypeCode.FLOAT_VECTOR, vectors),
        ):
            path = insert_log_path(CID, partition, sid, field, log_id)
            data = insert_binlog(
                collection_id=CID, partition_id=partition, segment_id=sid, field_id=field,
                data_type=kind, values=values, start_ts=1, end_ts=2, write_ts=3, dim=DIM,
            )  # fmt: skip
            self.objects.put(path, damage if damage is not None and field == VEC else data)
            binlog = {"log_id": log_id, "path": path, "entries": rows, "timestamp_from": 1,
                      "timestamp_to": 2, "size": len(data)}  # fmt: skip
            logs.append({"field_id": field, "binlogs": [binlog]})
        body = {
            "segment_id": sid, "collection_id": CID, "partition_id": partition,
            "vchannel": vchannel,
            "field_binlogs": logs, "delta_binlogs": [], "stats_binlogs": [], "ddl_binlogs": [],
            "num_rows": len(self.vectors[sid]), "start_position": None, "end_position": None,
            "flushed": flushed,
        }  # fmt: skip
        if compacted_from:
            body["compacted_from"] = list(compacted_from)
        self.append(self.topics.coord, "BinlogPathsSaved", body)

    def events(self, kind: str) -> list[dict[str, Any]]:
        serde = Serdes().for_topic(self.topics.coord)
        decoded = (serde.decode(r.value) for r in read_to_end(self.log, self.topics.coord))
        return [e.body for e in decoded if e.type == kind]

    def wait(self, index_id: int = IID, state: str = FINISHED, rows: int = 0) -> IndexProgress:
        def reached() -> IndexProgress | None:
            p = self.node.progress(CID, index_id)
            return p if p.state == state and p.total_rows >= rows else None

        found = wait_until(reached, 30, f"index {index_id} {state} over {rows} rows")
        assert found is not None
        return found


@pytest.fixture
def cluster(log: Log):
    c = Cluster(log)
    yield c
    c.node.stop()


def test_a_flushed_segment_gets_a_real_index_reported_on_coord(cluster: Cluster):
    cluster.segment(501, 60, flushed=False)  # binlogs written before the segment is full
    cluster.segment(501, 90)  # the flushed report: rows 60..149 in a second log
    cluster.segment(502, 30, flushed=False)  # not Flushed: not indexed, not counted
    cluster.create_index(M="8", efConstruction="40")  # strings, as pymilvus sends them
    p = cluster.wait(rows=150)
    assert p == IndexProgress(150, 150, 0, FINISHED)
    (body,) = cluster.events("SegmentIndexed")
    folder = f"index_files/{CID}/{PID}/501/{body['build_id']}"
    assert body == {
        "collection_id": CID, "partition_id": PID, "segment_id": 501, "vchannel": "v0",
        "field_id": VEC, "index_id": IID, "index_name": f"ix{IID}", "build_id": body["build_id"],
        "index_type": "HNSW", "metric_type": "L2",
        "params": {"M": "8", "efConstruction": "40", "built_as": "HNSW"}, "num_rows": 150,
        "index_file": f"{folder}/index.faiss", "row_id_file": f"{folder}/row_ids.npy",
        "build_ms": body["build_ms"],
    }  # fmt: skip
    index, row_ids = read_index_files(cluster.objects, body["index_file"], body["row_id_file"])
    assert index.ntotal == 150 and row_ids.tolist() == list(range(150))
    _, positions = index.search(cluster.vectors[501][[3, 100]], 1)
    assert row_ids[positions[:, 0]].tolist() == [3, 100]


def test_dropping_the_index_reports_it_and_deletes_its_files(cluster: Cluster):
    cluster.create_index()
    cluster.segment(501, 120)
    cluster.wait(rows=120)
    cluster.append(
        cluster.topics.ddl,
        "IndexDropped",
        {"collection_id": CID, "index_id": IID, "index_name": "ix"},
    )
    wait_until(lambda: cluster.events("SegmentIndexesDropped"), 30, "SegmentIndexesDropped")
    assert cluster.events("SegmentIndexesDropped") == [{"collection_id": CID, "index_id": IID}]
    wait_until(lambda: not cluster.objects.list("index_files"), 30, "the index files deleted")
    assert cluster.node.progress(CID, IID) == IndexProgress(0, 0, 0, FINISHED)  # unknown now


def test_dropping_the_collection_drops_every_index_and_its_files(cluster: Cluster):
    cluster.create_index()
    cluster.create_index(index_id=13, index_type="FLAT")
    cluster.segment(501, 120)
    cluster.wait(rows=120)
    cluster.wait(13, rows=120)
    assert len(cluster.objects.list("index_files")) == 6  # 2 builds: index, row ids, checksums
    cluster.append(
        cluster.topics.ddl, "CollectionDropped", {"collection_id": CID, "collection_name": "c"}
    )
    wait_until(lambda: not cluster.objects.list("index_files"), 30, "the index files deleted")
    assert cluster.events("SegmentIndexesDropped") == [{"collection_id": CID, "index_id": -1}]
    cluster.segment(503, 120)  # a late report of the dropped collection: ignored
    cluster.restart()
    assert cluster.node.progress(CID, IID).total_rows == 0
    assert not cluster.objects.list("index_files")


def test_a_build_reported_twice_counts_once_and_both_are_dropped(cluster: Cluster):
    cluster.create_index()
    cluster.segment(501, 120)
    cluster.wait(rows=120)
    (body,) = cluster.events("SegmentIndexed")
    again = dict(body, build_id=body["build_id"] + 1, index_file=body["index_file"] + "2")
    cluster.append(cluster.topics.coord, "SegmentIndexed", again)
    wait_until(lambda: len(cluster.node.state.built[(501, IID)]) == 2, 30, "both reports applied")
    assert cluster.node.progress(CID, IID) == IndexProgress(120, 120, 0, FINISHED)
    cluster.append(
        cluster.topics.ddl,
        "IndexDropped",
        {"collection_id": CID, "index_id": IID, "index_name": "ix"},
    )
    wait_until(lambda: not cluster.node.state.built, 30, "both builds forgotten")


def test_a_restart_redoes_only_the_build_not_reported_and_deletes_its_orphan(cluster: Cluster):
    cluster.create_index()
    cluster.segment(501, 120)
    cluster.wait(rows=120)
    with armed("indexnode.build.after_files") as reached:
        cluster.segment(502, 130)  # its files are written, then the node "dies"
        wait_until(lambda: "indexnode.build.after_files" in reached, 30, "the crash point")
    cluster.node.stop()
    orphan = [p for p in cluster.objects.list("index_files") if "/502/" in p]
    assert len(orphan) == 3  # index, row ids, checksums
    cluster.node = cluster.open()
    cluster.wait(rows=250)
    reports = cluster.events("SegmentIndexed")
    assert sorted(b["segment_id"] for b in reports) == [501, 502]  # each exactly once
    assert not set(orphan) & set(cluster.objects.list("index_files"))
    cluster.restart()  # nothing left to do: no new report
    assert cluster.node.progress(CID, IID) == IndexProgress(250, 250, 0, FINISHED)
    assert len(cluster.events("SegmentIndexed")) == 2


def test_a_restart_keeps_every_file_of_a_reported_build_and_its_checks_hold(cluster: Cluster):
    """The orphan sweep at recovery keeps a reported build's checksums file: without it, a
    build whose bytes changed after a restart would be read unchecked (and served)."""
    cluster.create_index()
    cluster.segment(501, 120)
    cluster.wait(rows=120)
    files = sorted(cluster.objects.list("index_files"))
    assert len(files) == 3  # index, row ids, checksums
    cluster.restart()
    cluster.restart()  # each start sweeps orphans
    assert sorted(cluster.objects.list("index_files")) == files
    (body,) = cluster.events("SegmentIndexed")
    spoiled = bytearray(cluster.objects.get(body["index_file"]))
    spoiled[-1] ^= 0x7F
    cluster.objects.put(body["index_file"], bytes(spoiled))
    with pytest.raises(InvalidArgument, match="index.faiss of index build .*checksum mismatch"):
        read_index_files(cluster.objects, body["index_file"], body["row_id_file"])


def test_a_corrupt_binlog_fails_that_build_only_and_the_node_goes_on(cluster: Cluster):
    cluster.create_index()
    cluster.segment(501, 120, damage=b"\xbc\xfa\xff\x00 not a binlog")
    p = cluster.wait(state=FAILED, rows=120)
    assert p.indexed_rows == 0 and p.total_rows == 120 and p.pending_index_rows == 120
    assert p.fail_reason.startswith("501: CorruptBinlog: binlog 'insert_log/10/11/501/101/")
    letters = wait_until(
        lambda: read_dead_letters(cluster.log, cluster.topics.dlq), 30, "a dead letter"
    )
    assert letters[0].processor == "indexnode" and "index 12 of segment 501" in letters[0].reason
    cluster.segment(502, 120)  # still alive: the next segment is indexed
    wait_until(lambda: cluster.node.progress(CID, IID).indexed_rows, 30, "502 indexed")
    assert [b["segment_id"] for b in cluster.events("SegmentIndexed")] == [502]
    p = cluster.node.progress(CID, IID)
    assert (p.state, p.indexed_rows, p.total_rows) == (FAILED, 120, 240)


def test_a_missing_binlog_fails_the_build_naming_the_file(cluster: Cluster):
    cluster.segment(501, 120)  # no index yet: nothing is built
    for path in cluster.objects.list(f"insert_log/{CID}/{PID}/501/{VEC}"):
        cluster.objects.delete(path)
    cluster.create_index()
    p = cluster.wait(state=FAILED, rows=120)
    assert "501: ObjectNotFound" in p.fail_reason and "does not exist" in p.fail_reason


def test_segments_compacted_away_before_or_during_their_build_are_skipped_quietly(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
):
    """502's build is under way (its binlogs not read yet) and 503's queued when a compaction
    merges both into 504 and their binlogs are deleted: neither fails nor is dead-lettered."""
    started, release = threading.Event(), threading.Event()
    real = indexnode_module.build_from_parts

    def held(*args: Any, **kwargs: Any) -> Any:
        if not started.is_set():
            started.set()
            release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(indexnode_module, "build_from_parts", held)
    cluster.create_index()
    cluster.segment(502, 120)
    wait_until(started.is_set, 30, "502's build under way")
    cluster.segment(503, 130)
    wait_until(lambda: cluster.node.progress(CID, IID).total_rows == 250, 30, "503 consumed")
    cluster.segment(504, 250, compacted_from=(502, 503))
    for sid in (502, 503):
        for path in cluster.objects.list(f"insert_log/{CID}/{PID}/{sid}"):
            cluster.objects.delete(path)
    release.set()
    assert cluster.wait(rows=250) == IndexProgress(250, 250, 0, FINISHED)
    assert [b["segment_id"] for b in cluster.events("SegmentIndexed")] == [504]
    assert read_dead_letters(cluster.log, cluster.topics.dlq) == []
    assert all("/504/" in p for p in cluster.objects.list("index_files"))


def test_a_scalar_index_of_a_field_a_segment_lacks_fails_unless_the_field_was_added(
    cluster: Cluster,
):
    """Segment 501's write holds no log of fields 102 and 103: 103 was added to the
    collection after it (its rows read as its default), 102 was not (a missing binlog)."""
    cluster.segment(501, 120)
    field = FieldSchema("score", DataType.INT64, field_id=103, nullable=True, default_value=7)
    added = {"collection_id": CID, "field": field.to_avro()}
    cluster.append(cluster.topics.ddl, "CollectionFieldAdded", added)
    for index_id, field_id in ((20, 102), (21, 103)):
        body = {"collection_id": CID, "index_id": index_id, "index_name": f"ix{index_id}",
                "field_id": field_id, "field_name": f"f{field_id}", "index_type": "INVERTED",
                "metric_type": "", "params": {}}  # fmt: skip
        cluster.append(cluster.topics.ddl, "IndexCreated", body)
    failed = cluster.wait(20, state=FAILED, rows=120)
    assert "501: ObjectNotFound" in failed.fail_reason and "/501/102" in failed.fail_reason
    assert cluster.wait(21, rows=120) == IndexProgress(120, 120, 0, FINISHED)


def test_a_scalar_index_is_built_like_a_vector_index(cluster: Cluster):
    cluster.create_index(index_id=14, index_type="AUTOINDEX", metric="")  # on a scalar field
    cluster.create_index()
    cluster.segment(501, 120)
    cluster.wait(rows=120)
    wait_until(lambda: cluster.node.progress(CID, 14).state == FINISHED, 30, "scalar built")
    assert cluster.node.progress(CID, 14) == IndexProgress(120, 120, 0, FINISHED)
    built = {b["index_id"]: b for b in cluster.events("SegmentIndexed")}
    assert sorted(built) == sorted([IID, 14])
    scalar = built[14]
    assert (scalar["metric_type"], scalar["params"]["built_as"], scalar["num_rows"]) == (
        "", "SORTED", 120,
    )  # fmt: skip
    assert scalar["index_file"].endswith("/index.arrow")


def test_a_build_under_way_does_not_hold_back_consuming(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
):
    started, release = threading.Event(), threading.Event()
    real = indexnode_module.build_from_parts

    def held(*args: Any, **kwargs: Any) -> Any:
        started.set()
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(indexnode_module, "build_from_parts", held)
    cluster.create_index()
    cluster.segment(501, 120)
    wait_until(started.is_set, 30, "the first build under way")
    cluster.segment(502, 130)  # consumed while segment 501 is being built
    wait_until(lambda: cluster.node.progress(CID, IID).total_rows == 250, 30, "502 consumed")
    assert cluster.node.progress(CID, IID).state == IN_PROGRESS
    with pytest.raises(IndexBuildTimeout, match="not Finished after 0.3s: .*InProgress"):
        cluster.node.wait_finished(CID, IID, timeout=0.3)
    release.set()
    assert cluster.wait(rows=250) == IndexProgress(250, 250, 0, FINISHED)


def test_dropping_a_partition_forgets_its_segments_and_deletes_their_files(cluster: Cluster):
    cluster.create_index()
    cluster.segment(501, 120)
    cluster.segment(502, 130, partition=PID + 1)
    cluster.wait(rows=250)
    body = {"collection_id": CID, "partition_id": PID, "partition_name": "p"}
    cluster.append(cluster.topics.ddl, "PartitionDropped", body)
    wait_until(lambda: cluster.node.progress(CID, IID).total_rows == 130, 30, "501 forgotten")
    left = cluster.objects.list("index_files")
    assert len(left) == 3 and all(f"/{PID + 1}/502/" in p for p in left)
    cluster.segment(503, 120)  # a late report of the dropped partition: ignored
    cluster.restart()
    assert cluster.node.progress(CID, IID) == IndexProgress(130, 130, 0, FINISHED)


def test_one_of_several_index_nodes_builds_the_segments_of_its_pchannels_only(log: Log):
    owned = {0}  # datacoord's division, as runners.datachannels.IndexNodeMember follows it
    cluster = Cluster(log, owns=lambda p: p in owned)
    try:
        cluster.create_index()
        cluster.segment(501, 120, vchannel="c-dml_0_10v0")
        cluster.segment(502, 120, vchannel="c-dml_1_10v1")  # another node's
        wait_until(lambda: cluster.events("SegmentIndexed"), 30, "a build")
        assert [b["segment_id"] for b in cluster.events("SegmentIndexed")] == [501]
        owned.add(1)  # that node died: its pchannel came here
        wait_until(lambda: len(cluster.events("SegmentIndexed")) == 2, 30, "the other build")
        assert {b["segment_id"] for b in cluster.events("SegmentIndexed")} == {501, 502}
    finally:
        cluster.node.stop()


def test_a_restarted_node_starts_consuming_with_its_recoverys_fence_state(cluster: Cluster):
    """The consumer of ddl and coord starts where the recovery read them to, with the fence
    state the recovery ended with: the only reader of each opened after the recovery is the
    consumer's, from where the recovery ended (none reads the topic again from its start)."""
    cluster.create_index()
    cluster.segment(501, 120)
    cluster.wait(rows=120)
    cluster.node.stop()
    counted = ReaderLog(cluster.log)
    store = MemoryStateStore(cluster.disk)
    node = IndexNode(counted, cluster.topics, Serdes(), store, cluster.objects, cluster.rc)
    cluster.node = node
    node.recover()
    topics = (cluster.topics.ddl, cluster.topics.coord)
    recovery = {t: len(counted.starts(t)) for t in topics}
    node.start()

    def resumed() -> dict[str, list[dict[int, int]]] | None:
        got = {t: counted.starts(t)[recovery[t] :] for t in topics}
        return got if any(at[0] > 0 for at in got[cluster.topics.coord]) else None

    got = wait_until(resumed, 30, "the consumer's reader of coord")
    assert [len(got[t]) for t in topics] == [1, 1], got
    assert all(got[t][0][0] > 0 for t in topics), got
