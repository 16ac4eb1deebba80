"""A segment's outstanding allocations: the rows it counts as handed out follow every way
allocations come and go (recorded, recorded again, released by a tick, cleared at a flush,
read back from its stored JSON), and a batch of allocations is released as of the tick."""

from __future__ import annotations

import json
from dataclasses import fields

from vectorlog.processors.datacoord.segment import Allocation, Segment, SegmentState
from vectorlog.processors.datacoord.segment_meta import SegmentMeta
from vectorlog.schemas.serde import Event
from vectorlog.state.memory import MemoryStateStore


def growing(**kwargs: object) -> Segment:
    return Segment(1, 10, 20, "v0", 0, 1000, 5, **kwargs)  # type: ignore[arg-type]


def test_allocated_rows_follow_allocations_recorded_released_and_cleared():
    seg = growing()
    for ts, rows in ((100, 3), (200, 4), (300, 5)):
        seg.allocate(Allocation(rows, ts, ts + 1000))
    seg.allocate(Allocation(4, 200, 1200))  # the same insert recorded again (its batch)
    assert seg.allocated == 12
    seg.release(200)  # the data node consumed past the first two inserts
    assert seg.allocated == 5 and list(seg.allocations) == ["300"]
    seg.release(1300)  # past the last one's expiry too
    assert seg.allocated == 0
    seg.allocate(Allocation(7, 400, 1400))
    seg.clear_allocations()
    assert seg.allocated == 0 and seg.allocations == {}


def test_allocated_rows_of_a_segment_read_back_from_json():
    seg = growing(allocations={"100": Allocation(3, 100, 900)})
    seg.allocate(Allocation(2, 200, 900))
    back = Segment.from_json(seg.to_json())
    assert back == seg and back.allocated == 5
    assert b"_allocated" not in seg.to_json()


def test_a_segment_stored_by_an_earlier_version_reads_back_whole():
    """The state store holds records written with json.dumps before the switch to orjson."""
    seg = growing(
        state=SegmentState.FLUSHED,
        binlogs={"insert": {"101": ["a/b/1"]}, "rows": 7},
        dml_position={"offset": 9},
    )
    seg.allocate(Allocation(2, 200, 900))
    d = {f.name: getattr(seg, f.name) for f in fields(seg)}
    d["state"] = int(seg.state)
    d["allocations"] = {k: vars(a) for k, a in seg.allocations.items()}
    earlier = json.dumps(d, separators=(",", ":")).encode()
    back = Segment.from_json(earlier)
    assert back == seg and back.allocated == 2 and back.state is SegmentState.FLUSHED
    assert Segment.from_json(back.to_json()) == seg


def test_a_batch_of_allocations_keeps_only_those_past_the_data_nodes_tick():
    meta = SegmentMeta(MemoryStateStore(), "coord")
    meta.apply(Event("SegmentOpened", 5, opened()), 0)
    meta.apply(Event("DataNodeTicked", 6, {"vchannel": "v0", "tick": 250, "segments": []}), 1)
    batch = [{"segment_id": 1, "rows": r, "insert_ts": t, "expire_ts": 9000} for t, r in TSS]
    (seg,) = meta.apply(Event("SegmentsAllocated", 7, {"allocations": batch}), 2)
    assert sorted(seg.allocations) == ["300", "400"] and seg.allocated == 7
    assert seg.last_expire_ts == 9000


TSS = [(100, 1), (200, 2), (300, 3), (400, 4)]


def opened() -> dict[str, object]:
    return {
        "segment_id": 1,
        "collection_id": 10,
        "partition_id": 20,
        "vchannel": "v0",
        "pchannel": 0,
        "max_rows": 1000,
    }
