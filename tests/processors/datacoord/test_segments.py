"""Unit tests of datacoord's segment allocation (seed 004): rows fill the growing segment of
their (collection, partition, vchannel) up to 75 % of the maximum size, then a new one opens."""

from __future__ import annotations

from tests.processors.fakes import FakeRootCoord
from vectorlog.processors.datacoord.datacoord import DataCoord


def test_rows_fill_one_segment_per_channel_until_its_capacity():
    dc = DataCoord(FakeRootCoord(next_id=7), max_segment_bytes=4000)  # capacity 3000 bytes
    assert dc.assign_segments(1, 2, "v0", 20, 100) == [(7, 20)]
    assert dc.assign_segments(1, 2, "v0", 15, 100) == [(7, 10), (8, 5)]  # 30 rows fill 7
    assert dc.assign_segments(1, 2, "v0", 25, 100) == [(8, 25)]


def test_each_collection_partition_and_vchannel_has_its_own_segment():
    dc = DataCoord(FakeRootCoord(next_id=1))
    first = [
        dc.assign_segments(*key, 1, 10)[0][0]
        for key in [(1, 2, "a"), (1, 2, "b"), (1, 3, "a"), (2, 2, "a")]
    ]
    assert len(set(first)) == 4
    assert dc.assign_segments(1, 2, "a", 1, 10)[0][0] == first[0]


def test_a_batch_larger_than_a_segment_spans_several():
    dc = DataCoord(FakeRootCoord(next_id=1), max_segment_bytes=400)  # 3 rows of 100 bytes
    assert dc.assign_segments(1, 2, "v", 10, 100) == [(1, 3), (2, 3), (3, 3), (4, 1)]
    # a row bigger than a whole segment still lands, in a segment of its own
    assert dc.assign_segments(1, 2, "v", 1, 1000) == [(5, 1)]
