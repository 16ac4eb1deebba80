"""The data node's side of a compaction (processors/datanode/compaction.py): the deletes of
the merged segments carried into the new one, also when a data node with fresh state replays
a compaction whose merged segments' files were deleted since."""

from __future__ import annotations

import pytest

from vectorlog.processors.datanode.compaction import carry_deltas, delete_retired
from vectorlog.storage.binlog import DataTypeCode, delta_binlog
from vectorlog.storage.buffers import DeltaBuffer
from vectorlog.storage.objectstore import MemoryObjectStore
from vectorlog.storage.segment_views import SegmentViews
from vectorlog.streams.msgstream import StreamPosition

OLD, NEW, PCHANNEL = 11, 12, 0
READ, UNREAD = "delta_log/1/2/11/100/1", "delta_log/1/2/11/100/2"


def store_with_deltas() -> tuple[MemoryObjectStore, SegmentViews]:
    """An object store holding two delta logs of segment OLD: one the compaction job read
    (deleting key 1), one written after it read (deleting key 2)."""
    objects, views = MemoryObjectStore(), SegmentViews()
    for path, pk in ((READ, 1), (UNREAD, 2)):
        log = delta_binlog(
            collection_id=1,
            partition_id=2,
            segment_id=OLD,
            pks=[pk],
            tss=[100 + pk],
            pk_type=DataTypeCode.INT64,
            write_ts=200,
        )
        objects.put(path, log)
    views.get(OLD).delta_paths = [READ, UNREAD]
    views.get(OLD).paths = {READ, UNREAD}
    return objects, views


def test_deletes_the_job_did_not_read_move_to_the_new_segment():
    objects, views = store_with_deltas()
    deltas = {OLD: DeltaBuffer(StreamPosition(5), [3], [103])}
    carry_deltas(deltas, views, objects, {OLD}, NEW, {READ}, StreamPosition(9))
    assert set(deltas) == {NEW}
    assert sorted(zip(deltas[NEW].pks, deltas[NEW].tss, strict=True)) == [(2, 102), (3, 103)]
    assert deltas[NEW].start == StreamPosition(5)  # held back to the oldest carried delete


def test_a_replay_after_the_merged_files_were_retired_carries_what_is_left():
    """A data node with fresh state replays a compaction whose merged segments' files the
    old node deleted once its checkpoint passed it: the replay goes on (it was retried for
    ever, holding every flush back), carrying only the deletes still in memory."""
    objects, views = store_with_deltas()
    left = delete_retired(objects, [(PCHANNEL, 7, [READ, UNREAD])], {PCHANNEL: StreamPosition(8)})
    assert left == [] and not objects.exists(UNREAD)
    deltas = {OLD: DeltaBuffer(StreamPosition(5), [3], [103])}
    carry_deltas(deltas, views, objects, {OLD}, NEW, {READ}, StreamPosition(9), replay=True)
    assert list(zip(deltas[NEW].pks, deltas[NEW].tss, strict=True)) == [(3, 103)]


def test_a_first_application_still_fails_on_a_missing_delta_log():
    """Only a replay may skip a missing file: the first time, its deletes exist nowhere else."""
    objects, views = store_with_deltas()
    objects.delete(UNREAD)
    with pytest.raises(Exception, match="1/2/11/100/2"):
        carry_deltas({}, views, objects, {OLD}, NEW, {READ}, StreamPosition(9))
