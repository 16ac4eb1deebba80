"""Datacoord's compaction policy: which Flushed segments a compaction merges."""

from __future__ import annotations

from vectorlog.processors.datacoord.compaction_policy import (
    CompactionPolicy,
    group_files,
    plan_groups,
)
from vectorlog.processors.datacoord.segment import Segment, SegmentState

POLICY = CompactionPolicy(small_fraction=0.5, min_segments=2, max_segments=3)


def seg(sid: int, rows: int, vch: str = "v0", part: int = 1, **kw: object) -> Segment:
    s = Segment(sid, 7, part, vch, 0, 100, sid, state=SegmentState.FLUSHED, num_rows=rows)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def ids(groups: list[list[Segment]]) -> list[list[int]]:
    return [[s.segment_id for s in g] for g in groups]


def test_small_segments_of_one_channel_merge_up_to_one_segments_rows():
    segs = [seg(1, 30), seg(2, 30), seg(3, 30), seg(4, 30), seg(5, 80), seg(6, 10)]
    assert ids(plan_groups(segs, 0, POLICY)) == [[1, 2, 3], [4, 6]]


def test_channels_partitions_and_states_are_never_mixed():
    segs = [
        seg(1, 10),
        seg(2, 10, vch="v1"),
        seg(3, 10, part=2),
        seg(4, 10, state=SegmentState.GROWING),
        seg(5, 10, state=SegmentState.DROPPED),
        seg(6, 10),
    ]
    assert ids(plan_groups(segs, 0, POLICY)) == [[1, 6]]


def test_a_group_is_capped_at_max_segments_and_a_lone_small_segment_is_left():
    segs = [seg(i, 5) for i in range(1, 8)]
    assert ids(plan_groups(segs, 0, POLICY)) == [[1, 2, 3], [4, 5, 6]]


def test_a_large_segment_with_many_expired_deletes_is_rewritten_alone():
    def deltas(entries: int, ts: int) -> dict:
        return {"delta_binlogs": {"9": {"entries": entries, "timestamp_to": ts, "path": "d/9"}}}

    segs = [seg(1, 80, binlogs=deltas(20, 50)), seg(2, 80, binlogs=deltas(20, 500))]
    assert ids(plan_groups(segs, 100, POLICY)) == [[1]]  # segment 2's deletes are too new
    assert ids(plan_groups(segs, 1000, POLICY)) == [[1], [2]]


def test_a_groups_files_are_its_writes_in_log_id_order():
    binlogs = {
        "field_binlogs": {
            "0": {"12": {"path": "r12"}, "3": {"path": "r3"}},
            "100": {"13": {"path": "p13"}, "4": {"path": "p4"}},
        },
        "delta_binlogs": {"20": {"path": "d20"}, "8": {"path": "d8"}},
    }
    files = group_files([seg(1, 10, binlogs=binlogs)])
    assert files["vchannel"] == "v0" and files["partition_id"] == 1
    (one,) = files["segments"]
    assert one["writes"] == [{0: "r3", 100: "p4"}, {0: "r12", 100: "p13"}]
    assert one["deltas"] == ["d8", "d20"]
