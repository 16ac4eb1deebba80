"""describe_index's progress at the proxy: the segments datacoord lists Flushed or Flushing
(Milvus's isFlush) count, each pending until the index node has read its flush and indexed
it; segments the index node still holds but datacoord dropped (merged away) no longer count."""

from __future__ import annotations

from vectorlog.core.model import CollectionInfo, CollectionSchema
from vectorlog.processors.indexnode.service import FAILED, FINISHED, IN_PROGRESS, IndexProgress
from vectorlog.processors.proxy import indexes as ix

INFO = CollectionInfo(1, "c", CollectionSchema(()), 1, ["v"], [0], 0, partitions={"_default": 7})


def _segment(sid: int, state: str, rows: int, partition: int = 7) -> dict[str, object]:
    return {"segment_id": sid, "state": state, "partition_id": partition, "num_rows": rows}


def test_rows_datacoord_reports_flushed_are_pending_until_the_index_node_indexed_them():
    segments = [
        _segment(1, "Flushed", 100),
        _segment(2, "Growing", 50),
        _segment(3, "Flushed", 30, partition=8),  # a dropped partition
    ]
    counted = ix.counted_segments(INFO, segments)
    assert counted == {1: 100}
    not_read_yet = ix.progress(IndexProgress(0, 0, 0, FINISHED), counted)
    assert (not_read_yet.total_rows, not_read_yet.pending_index_rows) == (100, 100)
    assert not_read_yet.state == IN_PROGRESS
    done = ix.progress(IndexProgress(100, 100, 0, FINISHED, built=(1,)), counted)
    assert done.state == FINISHED and done.pending_index_rows == 0
    failed = ix.progress(IndexProgress(0, 100, 100, FAILED, "boom"), counted)
    assert failed.state == FAILED and failed.fail_reason == "boom"


def test_a_flushing_segment_keeps_the_index_in_progress_as_in_milvus():
    """Milvus's DescribeIndex totals Flushed and Flushing segments (datacoord isFlush): rows
    sealed and being written are not indexed yet, so the build is not Finished."""
    segments = [
        _segment(1, "Flushed", 100),
        _segment(2, "Flushing", 40),
        _segment(3, "Sealed", 20),  # Milvus leaves Sealed out
    ]
    counted = ix.counted_segments(INFO, segments)
    assert counted == {1: 100, 2: 40}
    indexed_the_flushed_one = ix.progress(IndexProgress(100, 100, 0, FINISHED, built=(1,)), counted)
    assert indexed_the_flushed_one.state == IN_PROGRESS
    assert indexed_the_flushed_one.pending_index_rows == 40
    both = ix.progress(IndexProgress(140, 140, 0, FINISHED, built=(1, 2)), counted)
    assert both.state == FINISHED and both.pending_index_rows == 0


def test_a_segment_a_compaction_made_is_pending_though_the_index_node_still_counts_its_sources():
    """Right after a compaction, datacoord lists the merged segment Flushed and its sources
    Dropped, while the index node may not have read the merge yet: its sources, all built,
    read Finished there. The build is not Finished until the merged segment is indexed."""
    segments = [
        _segment(1, "Dropped", 9000),
        _segment(2, "Dropped", 9000),
        _segment(3, "Flushed", 18000),
    ]
    counted = ix.counted_segments(INFO, segments)
    stale = IndexProgress(18000, 18000, 0, FINISHED, built=(1, 2))
    merged_pending = ix.progress(stale, counted)
    assert merged_pending.state == IN_PROGRESS
    assert (merged_pending.indexed_rows, merged_pending.pending_index_rows) == (0, 18000)
    rebuilt = ix.progress(IndexProgress(18000, 18000, 0, FINISHED, built=(3,)), counted)
    assert rebuilt.state == FINISHED and rebuilt.built == (3,)
