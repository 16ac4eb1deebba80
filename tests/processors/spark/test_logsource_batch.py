"""The log data source's batch reader (what the rebuild reads dml with): tasks of bounded size
in (partition, offset) order, and a clear error for a read without an end."""

from __future__ import annotations

import pytest

from vectorlog.processors.spark.logsource import LogBatchReader, LogPartition, LogSourceError


def test_a_batch_read_is_split_into_bounded_tasks_in_offset_order():
    reader = LogBatchReader(
        {
            "log": "/x",
            "topic": "t",
            "startingOffsets": '{"1": 10}',
            "endingOffsets": '{"0": 5, "1": 150, "2": 0}',
            "maxRecordsPerPartition": "64",
        }
    )
    assert list(reader.partitions()) == [
        LogPartition(0, 0, 5),
        LogPartition(1, 10, 74),
        LogPartition(1, 74, 138),
        LogPartition(1, 138, 150),
    ]


def test_a_batch_read_without_an_end_is_refused():
    with pytest.raises(LogSourceError, match="endingOffsets"):
        LogBatchReader({"log": "/x", "topic": "t"})
    with pytest.raises(LogSourceError, match="endingoffsets is not a JSON object"):
        LogBatchReader({"log": "/x", "topic": "t", "endingOffsets": "[1"})
