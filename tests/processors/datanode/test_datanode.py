"""`DataNode` through its public methods (#32): packs applied as its loop would apply them,
its checkpoint, and its dead letters, on both log backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.processors.fakes import FakeRootCoord
from tests.processors.querynode.test_replica import rows_inserted, schema
from tests.support import unique_topic
from vectorlog.core.model import DataType
from vectorlog.processors.datanode.datanode import DataNode
from vectorlog.schemas.columns import encode_column
from vectorlog.schemas.serde import Event
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.storage.buffers import InsertBuffer
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.deadletter import read_dead_letters
from vectorlog.streams.log.base import Log
from vectorlog.streams.msgstream import MsgPack, StreamPosition
from vectorlog.streams.topics import Serdes, Topics

CID, VCH = 7, "dn-dml_0_7v0"


class Node:
    """A data node on `log` with an in-memory state store (`disk`) and a fake rootcoord."""

    def __init__(self, log: Log, topics: Topics, disk: MemoryDisk, root: Path) -> None:
        self.rc = FakeRootCoord()
        objects = PyArrowObjectStore(f"file://{root}")
        self.dn = DataNode(log, topics, Serdes(), MemoryStateStore(disk), objects, self.rc)
        self.dn.recover(timeout=10)
        self.offset = 0

    def apply(self, *events: Event) -> MsgPack:
        """Applies the events as one pack of pchannel 0 (offsets as if read one by one)."""
        for e in events:
            e.source, self.offset = (0, self.offset), self.offset + 1
        end = max((e.ts for e in events), default=0) + 1
        pack = MsgPack(0, 0, end, list(events), self.offset + 1, self.offset)
        self.offset += 1
        self.dn.apply(pack)
        return pack

    def ts(self) -> int:
        return self.rc.now()


@pytest.fixture
def topics(log: Log) -> Topics:
    t = Topics(unique_topic("dn"), 1)
    t.ensure(log)
    return t


@pytest.fixture
def node(log: Log, topics: Topics, tmp_path: Path) -> Iterator[Node]:
    n = Node(log, topics, MemoryDisk(), tmp_path / "objects")
    yield n
    n.dn.close()


def created(ts: int) -> Event:
    return Event(
        "CollectionCreated", ts, {"collection_id": CID, "schema": schema().to_avro()}, CID, VCH
    )


def inserted(ts: int, segment: int, ids: list[int]) -> Event:
    body: dict[str, Any] = rows_inserted(schema(), ids)
    body |= {"segment_id": segment, "first_row_id": ids[0]}
    return Event("RowsInserted", ts, body, CID, VCH)


def deleted(ts: int, ids: list[int]) -> Event:
    body = {
        "collection_id": CID,
        "partition_id": -1,
        "num_rows": len(ids),
        "primary_keys": encode_column(DataType.INT64, ids),
    }
    return Event("RowsDeleted", ts, body, CID, VCH)


def test_buffered_rows_hold_the_checkpoint_before_them_across_a_restart(
    node: Node, log: Log, topics: Topics, tmp_path: Path
):
    first = node.apply(created(node.ts()))
    node.apply(inserted(node.ts(), 500, [1, 2, 3]))
    assert node.dn.buffers[500].num_rows == 3
    assert node.dn.positions[0] != first.position  # the position moved past the rows
    assert node.dn.checkpoints(ddl=False)[0] == first.position  # a restart replays the rows
    assert node.dn.checkpoints()[0] == StreamPosition()  # and the DDL not in DDL binlogs yet
    node.dn.checkpoint()
    disk = node.dn.state.disk  # type: ignore[attr-defined]
    node.dn.close()
    again = Node(log, topics, disk, tmp_path / "objects")
    try:
        assert again.dn.next_offsets()[(topics.dml, 0)] == 0
        assert CID in again.dn.schemas  # the collection was committed at once
    finally:
        again.dn.close()


def test_an_upsert_or_a_delete_marks_the_older_row_deleted_in_its_segment(node: Node):
    node.apply(created(node.ts()))
    node.apply(inserted(node.ts(), 500, [1, 2]))
    upsert_ts = node.ts()
    node.apply(inserted(upsert_ts, 501, [1]))
    assert node.dn.deltas[500].pks == [1] and node.dn.deltas[500].tss == [upsert_ts]
    delete_ts = node.ts()
    node.apply(deleted(delete_ts, [2, 9]))  # 9 was never inserted: nothing to delete
    assert node.dn.deltas[500].pks == [1, 2] and node.dn.deltas[500].tss[-1] == delete_ts
    assert 501 not in node.dn.deltas


def test_an_event_it_cannot_apply_is_dead_lettered_and_the_pack_completes(
    node: Node, log: Log, topics: Topics
):
    pack = node.apply(inserted(node.ts(), 500, [1]))  # its collection was never created
    assert node.dn.positions[0] == pack.position and not node.dn.buffers
    (letter,) = read_dead_letters(log, topics.dlq, timeout=10)
    assert (letter.topic, letter.offset, letter.processor) == (topics.dml, 0, "datanode")
    assert "KeyError" in letter.reason and "unknown to the data node" in letter.reason


def test_a_dropped_collection_discards_its_buffers_and_later_rows(node: Node):
    node.apply(created(node.ts()))
    node.apply(inserted(node.ts(), 500, [1]))
    node.apply(Event("CollectionDropped", node.ts(), {"collection_id": CID}, CID, VCH))
    node.apply(inserted(node.ts(), 500, [2]))
    assert not node.dn.buffers and CID in node.dn.dropped
    assert node.dn.checkpoints()[0] == node.dn.positions[0] != StreamPosition()


def buffered(node: Node, segment: int) -> dict[str, Any]:
    """Returns what a segment's buffer holds, as its binlogs would be written from it."""
    buf = node.dn.buffers[segment]
    assert isinstance(buf, InsertBuffer)
    return {
        "row_ids": np.concatenate(buf.row_ids).tolist(),
        "timestamps": np.concatenate(buf.timestamps).tolist(),
        "columns": {fid: np.asarray(buf.column(fid)).tolist() for fid in buf.columns},
        "num_rows": buf.num_rows,
        "nbytes": buf.nbytes,
    }


def test_a_pack_of_one_row_inserts_buffers_what_one_pack_per_insert_buffers(
    log: Log, topics: Topics, tmp_path: Path
):
    """A tick's pack of single-row inserts is buffered as one run (datanode/insertruns.py):
    the rows, ids, timestamps, key index and checkpoint are those of the inserts applied
    one pack each."""
    other = Topics(unique_topic("dn"), 1)
    other.ensure(log)
    one, each = (Node(log, t, MemoryDisk(), tmp_path / n) for t, n in ((topics, "a"), (other, "b")))
    try:
        for node in (one, each):
            node.apply(created(10))
            node.apply(inserted(11, 500, [1]))  # the first loads the vchannel's key index
        events = [inserted(20 + i, 500, [100 + i]) for i in range(30)]
        one.apply(*events)
        for e in [inserted(20 + i, 500, [100 + i]) for i in range(30)]:
            each.apply(e)
        assert buffered(one, 500) == buffered(each, 500)
        assert buffered(one, 500)["row_ids"] == [1, *range(100, 130)]
        assert one.dn.newest == each.dn.newest and one.dn.newest[VCH][129] == (500, 49)
        assert one.dn.checkpoints() == {0: StreamPosition()} == each.dn.checkpoints()
    finally:
        one.dn.close()
        each.dn.close()


def test_a_key_inserted_twice_in_one_pack_is_an_upsert(node: Node):
    node.apply(created(node.ts()))
    node.apply(inserted(node.ts(), 500, [1]))
    first, second, again = node.ts(), node.ts(), node.ts()
    node.apply(inserted(first, 500, [2]), inserted(second, 500, [3]), inserted(again, 500, [2]))
    assert node.dn.deltas[500].pks == [2] and node.dn.deltas[500].tss == [again]
    assert node.dn.buffers[500].num_rows == 4 and node.dn.newest[VCH][2] == (500, again)


def test_an_event_it_cannot_apply_in_a_pack_of_inserts_is_dead_lettered_alone(
    node: Node, log: Log, topics: Topics
):
    node.apply(created(node.ts()))
    node.apply(inserted(node.ts(), 500, [1]))
    bad = inserted(node.ts(), 500, [3])
    bad.body["columns"] = bad.body["columns"][:1]  # only its key column
    node.apply(inserted(node.ts(), 500, [2]), bad, inserted(node.ts(), 500, [4]))
    assert buffered(node, 500)["row_ids"] == [1, 2, 4]
    (letter,) = read_dead_letters(log, topics.dlq, timeout=10)
    assert letter.offset == bad.source[1] and "lacks fields" in letter.reason
