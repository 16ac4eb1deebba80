"""describe_index's progress at the proxy: datacoord's Flushed and Flushing rows count as
pending until the index node has read their flush and indexed them (Milvus's isFlush)."""

from __future__ import annotations

from vectorlog.core.model import CollectionInfo, CollectionSchema
from vectorlog.processors.indexnode.service import FAILED, FINISHED, IN_PROGRESS, IndexProgress
from vectorlog.processors.proxy import indexes as ix


def test_rows_datacoord_reports_flushed_are_pending_until_the_index_node_indexed_them():
    schema = CollectionSchema(())
    info = CollectionInfo(1, "c", schema, 1, ["v"], [0], 0, partitions={"_default": 7})
    segments = [
        {"state": "Flushed", "partition_id": 7, "num_rows": 100},
        {"state": "Growing", "partition_id": 7, "num_rows": 50},
        {"state": "Flushed", "partition_id": 8, "num_rows": 30},  # a dropped partition
    ]
    flushed = ix.flushed_rows(info, segments)
    assert flushed == 100
    not_read_yet = ix.progress(IndexProgress(0, 0, 0, FINISHED), flushed)
    assert (not_read_yet.total_rows, not_read_yet.pending_index_rows) == (100, 100)
    assert not_read_yet.state == IN_PROGRESS
    done = ix.progress(IndexProgress(100, 100, 0, FINISHED), flushed)
    assert done.state == FINISHED and done.pending_index_rows == 0
    failed = ix.progress(IndexProgress(0, 100, 100, FAILED, "boom"), flushed)
    assert failed.state == FAILED and failed.fail_reason == "boom"


def test_a_flushing_segment_keeps_the_index_in_progress_as_in_milvus():
    """Milvus's DescribeIndex totals Flushed and Flushing segments (datacoord isFlush): rows
    sealed and being written are not indexed yet, so the build is not Finished."""
    schema = CollectionSchema(())
    info = CollectionInfo(1, "c", schema, 1, ["v"], [0], 0, partitions={"_default": 7})
    segments = [
        {"state": "Flushed", "partition_id": 7, "num_rows": 100},
        {"state": "Flushing", "partition_id": 7, "num_rows": 40},
        {"state": "Sealed", "partition_id": 7, "num_rows": 20},  # Milvus leaves Sealed out
    ]
    flushed = ix.flushed_rows(info, segments)
    assert flushed == 140
    indexed_the_flushed_one = ix.progress(IndexProgress(100, 100, 0, FINISHED), flushed)
    assert indexed_the_flushed_one.state == IN_PROGRESS
    assert indexed_the_flushed_one.pending_index_rows == 40
    both = ix.progress(IndexProgress(140, 140, 0, FINISHED), flushed)
    assert both.state == FINISHED and both.pending_index_rows == 0
