"""Coord snapshots: the snapshot of a prefix of a real cluster's coord topic, then the records
after it, rebuild exactly the state the whole topic gives, for every coord consumer
(datacoord, the data node's segment views, the query node's recovery point, the index node)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.clients import log_events
from tests.vectorlog.test_compaction import deltas_written
from vectorlog import Client, DataType
from vectorlog.processors.datacoord.coord_snapshot import CoordFold
from vectorlog.processors.datacoord.segment_meta import SegmentMeta
from vectorlog.processors.indexnode.state import IndexState
from vectorlog.processors.querynode.recovery import RecoveryPoint
from vectorlog.schemas.serde import Event
from vectorlog.state.memory import MemoryStateStore
from vectorlog.storage.segment_views import SegmentViews


@pytest.fixture(scope="module")
def coord_events(tmp_path_factory: pytest.TempPathFactory) -> list[Event]:
    """Every coord event of a cluster that flushed, deleted, upserted, indexed, compacted and
    dropped an index."""
    uri = str(tmp_path_factory.mktemp("coord") / "db")
    with Client(uri, tick_interval_ms=50, compaction_interval_s=None) as client:
        schema = client.create_schema()
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=4)
        params = client.prepare_index_params()
        params.add_index("vector", index_type="FLAT", metric_type="L2")
        client.create_collection("c", schema=schema, index_params=params, num_shards=2)
        for step in range(4):
            ids = range(30 * step, 30 * step + 30)
            client.insert("c", [{"id": i, "vector": [float(i), 0, 0, 1]} for i in ids])
            if step == 1:
                client.delete("c", ids=[0, 1, 2])
                client.upsert("c", [{"id": 5, "vector": [5.0, 1, 1, 1]}])
            client.flush("c")
        client.compact("c", wait=True)
        client.delete("c", ids=[40, 41])  # a delta log of the merged segment
        client.insert("c", [{"id": 500, "vector": [1.0, 0, 0, 0]}])
        client.flush("c")
        deltas_written(client)
        return [e for e in log_events(client, client.cluster.topics.coord) if e.type != "TimeTick"]


def snapshot_then_tail(events: list[Event], at: int) -> list[Event]:
    fold = CoordFold()
    for e in events[:at]:
        fold.apply(e)
    return fold.events() + events[at:]


def datacoord_state(events: list[Event]) -> Any:
    meta = SegmentMeta(MemoryStateStore(), "coord")
    for e in events:
        meta.apply(e, None)
    segments = {
        sid: {k: v for k, v in dataclasses.asdict(s).items() if k not in TRANSIENT}
        for sid, s in meta.segments.items()
    }
    return segments, meta.ticks


TRANSIENT = ("allocations", "last_expire_ts")  # allocations expire in seconds: not kept


def views_state(events: list[Event]) -> Any:
    views = SegmentViews()
    for e in events:
        views.apply(e)
    return {sid: dataclasses.asdict(v) for sid, v in views.by_id.items()}, views.pending


def recovery_state(events: list[Event]) -> Any:
    point = RecoveryPoint()
    for e in events:
        point.apply(e)
    return point.checkpoints, {sid: dataclasses.asdict(s) for sid, s in point.segments.items()}


def index_state(events: list[Event]) -> Any:
    state = IndexState(MemoryStateStore())
    for i, e in enumerate(events):
        state.apply("coord", i, e, lambda fx: None)
    segs = {sid: dataclasses.asdict(s) for sid, s in state.segments.items()}
    for seg in segs.values():
        seg.pop("flushed_offset")  # a coord offset: the snapshot's records are at one offset
    return segs, state.built


@pytest.mark.parametrize("fold_of", [datacoord_state, views_state, recovery_state, index_state])
def test_a_snapshot_then_the_tail_rebuild_what_the_whole_topic_builds(
    coord_events: list[Event], fold_of: Any
):
    assert any(e.body.get("compacted_from") for e in coord_events)
    whole = fold_of(coord_events)
    for at in range(0, len(coord_events) + 1, max(1, len(coord_events) // 7)):
        got = fold_of(snapshot_then_tail(coord_events, at))
        assert got == whole, (at, _diff(got, whole))
    assert fold_of(snapshot_then_tail(coord_events, len(coord_events))) == whole


def test_the_snapshot_is_much_smaller_than_the_topic(coord_events: list[Event]):
    fold = CoordFold()
    for e in coord_events:
        fold.apply(e)
    segments = {e.body["segment_id"] for e in coord_events if e.type == "SegmentOpened"}
    assert len(fold.events()) <= 5 * len(segments) + len(coord_events) // 4
    assert len(fold.events()) < len(coord_events)


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Returns where two nested values differ (for failure messages)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b), key=str)
        return [d for k in keys for d in _diff(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"[:300]]


def test_a_snapshot_keeps_each_jobs_newest_record_in_the_order_the_jobs_began():
    def job(job_id: int, ts: int, state: str) -> Event:
        body = {"job_id": job_id, "kind": "import", "collection_name": "c", "state": state}
        return Event("JobRecorded", ts, {**body, "detail": "{}"})

    fold = CoordFold()
    for event in (job(1, 10, "Pending"), job(2, 11, "Executing"), job(1, 12, "Completed")):
        fold.apply(event)
    kept = [(e.body["job_id"], e.body["state"]) for e in fold.events() if e.type == "JobRecorded"]
    assert kept == [(1, "Completed"), (2, "Executing")]
