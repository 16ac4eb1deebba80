"""Several data nodes (issue 24) through `DataNode`'s public methods, on both log backends: a
data node taking a pchannel over starts from its last checkpoint on coord and knows the keys
already in binlogs (a delete after the takeover lands in the older segment's delta logs); a
write of the old owner after the reassignment is fenced: not taken by the new owner, nor by
datacoord's segment meta, nor by a query node's recovery point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.processors.datanode.test_datanode import CID, VCH, created, deleted, inserted
from tests.processors.fakes import FakeRootCoord
from tests.processors.querynode.test_replica import schema
from tests.support import unique_topic
from vectorlog.core.model import CollectionHistory
from vectorlog.processors.datacoord.coord_snapshot import CoordFold
from vectorlog.processors.datacoord.segment_meta import SegmentMeta
from vectorlog.processors.datanode.datanode import DataNode
from vectorlog.processors.datanode.takeover import Owned
from vectorlog.processors.querynode.recovery import read_point
from vectorlog.schemas.serde import Event
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.msgstream import MsgPack
from vectorlog.streams.snapshots import TopicSnapshotter, snapshot_at
from vectorlog.streams.topics import Serdes, Topics

SEG = 500
A, B = ("a", 1), ("b", 2)
HEARTBEATS = 200


@pytest.fixture
def topics(log: Log) -> Topics:
    t = Topics(unique_topic("dnt"), 1)
    t.ensure(log)
    return t


class Owner:
    """A data node writing pchannel 0 as registration `writer`, on a fresh state store."""

    def __init__(self, log: Log, topics: Topics, root: Path, writer: tuple[str, int]) -> None:
        self.rc = FakeRootCoord()
        history = CollectionHistory(CID, schema(), 1, None)
        owned = Owned(frozenset({0}), writer, lambda: [history])
        objects = PyArrowObjectStore(f"file://{root}")
        store = MemoryStateStore(MemoryDisk())
        self.dn = DataNode(log, topics, Serdes(), store, objects, self.rc, owned=owned)
        self.dn.buffer_bytes = 1  # every buffered row is written at the next step
        self.dn.recover(timeout=10)
        self.offset = 0

    def apply(self, *events: Event) -> None:
        for e in events:
            e.source, self.offset = (0, self.offset), self.offset + 1
        end = max(e.ts for e in events) + 1
        self.dn.apply(MsgPack(0, 0, end, list(events), self.offset + 1, self.offset))
        self.offset += 1
        self.dn.step(timeout=0)  # writes the buffered rows


def coord(log: Log, topics: Topics, type_: str, body: dict[str, Any], ts: int) -> None:
    serde = Serdes().for_topic(topics.coord)
    event = Event(type_, ts, body)
    log.append(topics.coord, [Append(0, serde.encode(event), serde.key(event))])


def assigned(version: int, owner: tuple[str, int], dead: list[tuple[str, int]]) -> dict[str, Any]:
    return {
        "version": version,
        "owners": [{"pchannel": 0, "node": owner[0], "epoch": owner[1]}],
        "dead": [{"node": n, "epoch": e} for n, e in dead],
    }


def test_the_new_owner_starts_from_the_checkpoint_and_the_old_owner_is_fenced(
    log: Log, topics: Topics, tmp_path: Path
):
    root = tmp_path / "objects"
    coord(log, topics, "DataChannelsAssigned", assigned(1, A, []), 1)
    opened: dict[str, Any] = {"segment_id": SEG, "collection_id": CID, "partition_id": 1}
    opened |= {"vchannel": VCH, "pchannel": 0, "max_rows": 1000}
    coord(log, topics, "SegmentOpened", opened, 2)
    a = Owner(log, topics, root, A)
    a.apply(created(a.rc.now()))
    a.apply(inserted(a.rc.now(), SEG, [1, 2, 3]))
    assert a.dn.views.get(SEG).rows_written == 3
    assert a.dn.publish(force=True)
    published = a.dn.checkpoints(ddl=False)[0]

    coord(log, topics, "DataChannelsAssigned", assigned(2, B, [A]), a.rc.now())
    a.apply(inserted(a.rc.now(), SEG, [4, 5]))  # a zombie's write: fenced
    assert a.dn.publish(force=True)  # and its checkpoint past them too

    b = Owner(log, topics, root, B)
    try:
        assert b.dn.positions[0] == published
        assert b.dn.views.get(SEG).rows_written == 3
        b.apply(deleted(b.rc.now(), [2]))  # a key written by the old owner
        assert b.dn.deltas[SEG].pks == [2]
    finally:
        a.dn.close()
        b.dn.close()
    meta = SegmentMeta(MemoryStateStore(MemoryDisk()), topics.coord)
    serde = Serdes().for_topic(topics.coord)
    for rec in log.reader(topics.coord, {0: 0}).poll(1000, 5):
        meta.apply(serde.decode(rec.value), rec.offset)
    assert meta.segments[SEG].num_rows == 3
    point = read_point(log, topics.coord, serde, None, timeout=10)
    assert point.checkpoints[0] == published
    assert len(point.segments[SEG].writes) == 1


def test_a_takeover_after_many_heartbeats_reads_the_coord_snapshot_and_its_tail(
    log: Log, topics: Topics, tmp_path: Path
):
    root = tmp_path / "objects"
    coord(log, topics, "DataChannelsAssigned", assigned(1, A, []), 1)
    opened: dict[str, Any] = {"segment_id": SEG, "collection_id": CID, "partition_id": 1}
    opened |= {"vchannel": VCH, "pchannel": 0, "max_rows": 1000}
    coord(log, topics, "SegmentOpened", opened, 2)
    a = Owner(log, topics, root, A)
    a.apply(created(a.rc.now()))
    a.apply(inserted(a.rc.now(), SEG, [1, 2, 3]))
    assert a.dn.publish(force=True)
    published = a.dn.checkpoints(ddl=False)[0]
    coord(log, topics, "DataChannelsAssigned", assigned(2, B, [A]), a.rc.now())
    a.apply(inserted(a.rc.now(), SEG, [4, 5]))  # a zombie's write: fenced
    assert a.dn.publish(force=True)
    for i in range(HEARTBEATS):  # coord grows by a heartbeat per node every second
        beat = {"node": "ab"[i % 2], "epoch": 1 + i % 2, "writing": [0]}
        coord(log, topics, "DataNodeReported", beat, a.rc.now())
    whole = Owner(log, topics, root, B)  # no snapshot yet: coord from offset 0
    blobs = PyArrowObjectStore(f"file://{root}")
    end = log.end_offsets(topics.coord)[0]
    serde = Serdes().for_topic(topics.coord)
    snap = TopicSnapshotter(log, topics.coord, serde, blobs, CoordFold, [lambda: end], 1)
    at = snap.snapshot() or snap.snapshot()  # a log keeping records: the second run writes
    held = snapshot_at(blobs, topics.coord, at or 0) or []
    b = Owner(log, topics, root, B)  # the takeover, started with the snapshot present
    try:
        tail = log.end_offsets(topics.coord)[0] - (at or 0) - 1  # but its own end marker
        assert 0 < len(held) < 10 and b.dn.recovered_coord_records == len(held) + tail
        assert whole.dn.recovered_coord_records > HEARTBEATS
        assert b.dn.positions[0] == whole.dn.positions[0] == published
        assert b.dn.views.get(SEG).rows_written == whole.dn.views.get(SEG).rows_written == 3
    finally:
        for owner in (a, whole, b):
            owner.dn.close()
