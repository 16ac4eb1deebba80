"""DataCoord on a real log (both backends): allocation, the state machine, every seal policy,
flush against a data node played by the test, and recovery from the coord topic."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.processors.fakes import FakeRootCoord
from tests.support import unique_topic, wait_until
from vectorlog.core.errors import FlushTimeout
from vectorlog.core.faults import armed
from vectorlog.processors.datacoord.datacoord import DataCoord
from vectorlog.processors.datacoord.settings import DataCoordSettings
from vectorlog.schemas.serde import Event
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.scan import read_to_end
from vectorlog.streams.topics import Serdes, Topics

pytestmark = pytest.mark.parametrize("log", ["embedded", "kafka"], indirect=True)
GARBAGE = b"\x00garbage"
ROW = 100  # bytes per row: with 4,000-byte segments a segment holds 40 rows, sealed at 30


class Cluster:
    """A DataCoord on a real log with a memory state store it can be restarted on."""

    def __init__(self, log: Log, **settings: Any) -> None:
        self.log, self.disk = log, MemoryDisk()
        self.topics = Topics(unique_topic("dc"), dml_partitions=2)
        self.topics.ensure(log)
        self.rc = FakeRootCoord(next_id=7)
        self.settings = DataCoordSettings(max_segment_bytes=4000, **settings)
        self.dc = self.open()

    def open(self) -> DataCoord:
        store = MemoryStateStore(self.disk)
        dc = DataCoord(self.log, self.topics, Serdes(), store, self.rc, self.settings)
        dc.recover()
        dc.start()
        return dc

    def restart(self) -> None:
        self.dc.stop()
        self.dc = self.open()

    def events(self, kind: str | None = None) -> list[Event]:
        serde = Serdes().for_topic(self.topics.coord)
        records = read_to_end(self.log, self.topics.coord)
        out = [serde.decode(r.value) for r in records if r.value != GARBAGE]
        return [e for e in out if kind is None or e.type == kind]

    def report(self, event_type: str, body: dict[str, Any], ts: int | None = None) -> None:
        """Appends an event as the data node would."""
        event = Event(event_type, ts or self.rc.now(), body)
        self.log.append(self.topics.coord, [Append(0, Serdes().for_topic("").encode(event))])

    def state(self, segment_id: int) -> str:
        return str(self.dc.get_segment_info([segment_id])[0]["state"])


@pytest.fixture
def cluster(log: Log):
    c = Cluster(log)
    yield c
    c.dc.stop()


def assign(c: Cluster, rows: int, vch: str = "v0", partition: int = 2) -> list[tuple[int, int]]:
    return c.dc.assign_segments(1, partition, vch, 0, rows, ROW, c.rc.now())


def test_rows_fill_a_growing_segment_to_75_percent_then_it_is_sealed_for_size(cluster: Cluster):
    ((first, n),) = assign(cluster, 20)
    assert n == 20 and cluster.state(first) == "Growing"
    out = assign(cluster, 15)
    assert out[0] == (first, 10) and out[1][1] == 5 and out[1][0] != first
    assert cluster.state(first) == "Sealed" and cluster.state(out[1][0]) == "Growing"
    (sealed,) = cluster.events("SegmentsSealed")
    assert sealed.body == {"segment_ids": [first], "reason": "size"}
    opened = cluster.events("SegmentOpened")
    assert [e.body["segment_id"] for e in opened] == [first, out[1][0]]
    assert opened[0].body["max_rows"] == 40


def test_each_partition_and_vchannel_has_its_own_growing_segment(cluster: Cluster):
    ids = {assign(cluster, 1, vch, part)[0][0] for vch in ("a", "b") for part in (2, 3)}
    assert len(ids) == 4


def test_allocations_are_logged_in_batches_with_their_expiry(cluster: Cluster):
    ts = cluster.rc.now()
    cluster.dc.assign_segments(1, 2, "v0", 0, 3, ROW, ts)
    cluster.dc.assign_segments(1, 2, "v0", 0, 4, ROW, ts + 1)
    batches = wait_until(lambda: cluster.events("SegmentsAllocated"), 10, "allocations")
    allocations = [a for e in batches for a in e.body["allocations"]]
    assert [(a["rows"], a["insert_ts"]) for a in allocations] == [(3, ts), (4, ts + 1)]
    assert allocations[0]["expire_ts"] == ts + (2000 << 18)


def test_after_a_restart_the_next_insert_fills_the_same_growing_segment(cluster: Cluster):
    ((seg, _),) = assign(cluster, 5)
    cluster.restart()
    assert assign(cluster, 5) == [(seg, 5)]


def test_flush_seals_and_a_segment_is_flushed_only_after_the_data_node_passed_its_seal(
    cluster: Cluster,
):
    ((seg, _),) = assign(cluster, 5)
    assert cluster.dc.flush(1) == [seg]
    assert cluster.state(seg) == "Sealed"
    assert assign(cluster, 1)[0][0] != seg  # never an allocation in a segment not Growing
    seal_ts = cluster.events("SegmentsSealed")[0].ts
    cluster.report("DataNodeTicked", {"vchannel": "v0", "tick": seal_ts - 1, "segments": []})
    with pytest.raises(FlushTimeout, match="Sealed"):
        cluster.dc.wait_flushed([seg], timeout=0.5)
    rows = [{"segment_id": seg, "num_rows": 5}]
    cluster.report("DataNodeTicked", {"vchannel": "v0", "tick": seal_ts, "segments": rows})
    wait_until(lambda: cluster.state(seg) == "Flushing", 10, "Flushing")
    cluster.report("BinlogPathsSaved", binlogs_saved(seg, 5))
    cluster.dc.wait_flushed([seg], timeout=10)
    assert cluster.dc.flush_state([seg])
    info = cluster.dc.get_segment_info([seg])[0]
    assert info["state"] == "Flushed" and info["num_rows"] == 5
    assert info["insert_channel"] == "v0" and info["max_row_num"] == 40
    assert [e.type for e in cluster.events() if e.type.startswith("Segment")][-2:] == [
        "SegmentsFlushStarted",
        "SegmentFlushed",
    ]


def test_a_segment_whose_rows_an_earlier_tick_reported_starts_flushing_once_a_tick_passes_its_seal(
    cluster: Cluster,
):
    """The data node reports a vchannel's rows with the tick that passes another segment's
    seal; the tick passing this one's seal then changes nothing of its record, yet it must
    start flushing (else a flush of a quiet collection never ends)."""
    ((first, _),) = assign(cluster, 5)
    cluster.dc.flush(1)
    ((second, _),) = assign(cluster, 3)  # rows of a Growing segment, consumed with the next tick
    wait_until(lambda: allocated(cluster, second), 10, "the allocation batch logged")
    rows = [{"segment_id": first, "num_rows": 5}, {"segment_id": second, "num_rows": 3}]
    tick = cluster.rc.now()  # past the first seal and the second segment's insert
    cluster.report("DataNodeTicked", {"vchannel": "v0", "tick": tick, "segments": rows})
    wait_until(lambda: cluster.state(first) == "Flushing", 10, "the first segment Flushing")
    assert cluster.dc.get_segment_info([second])[0]["num_rows"] == 3
    assert cluster.dc.flush(1) == [first, second]
    seal_ts = cluster.events("SegmentsSealed")[-1].ts
    rows = [{"segment_id": second, "num_rows": 3}]  # what it reported before
    cluster.report("DataNodeTicked", {"vchannel": "v0", "tick": seal_ts, "segments": rows})
    wait_until(lambda: cluster.state(second) == "Flushing", 10, "the second segment Flushing")
    cluster.report("BinlogPathsSaved", binlogs_saved(second, 3))
    cluster.dc.wait_flushed([second], timeout=10)


def allocated(c: Cluster, segment_id: int) -> bool:
    """Whether an allocation of the segment is on the coord topic."""
    batches = c.events("SegmentsAllocated")
    return any(a["segment_id"] == segment_id for e in batches for a in e.body["allocations"])


def test_flush_of_a_collection_without_growing_segments_returns_nothing(cluster: Cluster):
    assert cluster.dc.flush(42) == []
    assert cluster.dc.get_segment_info([999]) == [{"segment_id": 999, "state": "NotExist"}]


def test_too_many_growing_segments_on_a_vchannel_seal_the_oldest(log: Log):
    c = Cluster(log, max_growing_per_channel=2)
    try:
        a, b, third = (assign(c, 1, "v0", part)[0][0] for part in (2, 3, 4))
        assert [c.state(s) for s in (a, b, third)] == ["Sealed", "Growing", "Growing"]
        assert c.events("SegmentsSealed")[0].body["reason"] == "too_many_growing"
    finally:
        c.dc.stop()


def test_a_growing_segment_older_than_the_lifetime_is_sealed(log: Log):
    c = Cluster(log, max_lifetime_s=0.05, background_interval_s=0.05)
    try:
        ((seg, _),) = assign(c, 1)
        wait_until(lambda: c.state(seg) == "Sealed", 10, "the lifetime seal")
        assert c.events("SegmentsSealed")[0].body["reason"] == "lifetime"
    finally:
        c.dc.stop()


def test_a_decision_lost_in_a_crash_is_taken_at_recovery(cluster: Cluster):
    ((seg, _),) = assign(cluster, 2)
    cluster.dc.flush(1)
    seal_ts = cluster.events("SegmentsSealed")[0].ts
    with armed("datacoord.decide.before_append") as reached:
        cluster.report("DataNodeTicked", {"vchannel": "v0", "tick": seal_ts, "segments": []})
        wait_until(lambda: "datacoord.decide.before_append" in reached, 10, "the crash point")
    assert cluster.events("SegmentsFlushStarted") == []
    cluster.restart()
    flushing = ("Flushing", "Flushed")  # the event is appended before datacoord applies it
    wait_until(
        lambda: cluster.events("SegmentsFlushStarted") and cluster.state(seg) in flushing,
        10,
        "flushing after recovery",
    )


def test_an_undecodable_coord_record_is_dead_lettered_and_the_rest_applied(cluster: Cluster):
    cluster.log.append(cluster.topics.coord, [Append(0, GARBAGE)])
    ((seg, _),) = assign(cluster, 2)
    cluster.dc.flush(1)
    seal_ts = cluster.events("SegmentsSealed")[0].ts
    cluster.report("DataNodeTicked", {"vchannel": "v0", "tick": seal_ts, "segments": []})
    wait_until(lambda: cluster.state(seg) == "Flushing", 10, "Flushing")
    letters = list(read_to_end(cluster.log, cluster.topics.dlq))
    assert len(letters) == 1


def binlogs_saved(segment_id: int, rows: int) -> dict[str, Any]:
    log = {
        "log_id": 77,
        "path": f"insert_log/1/2/{segment_id}/100/77",
        "entries": rows,
        "timestamp_from": 1,
        "timestamp_to": 2,
        "size": 10,
    }
    return {
        "segment_id": segment_id,
        "collection_id": 1,
        "partition_id": 2,
        "vchannel": "v0",
        "field_binlogs": [{"field_id": 100, "binlogs": [log]}],
        "delta_binlogs": [],
        "stats_binlogs": [],
        "ddl_binlogs": [],
        "num_rows": rows,
        "start_position": None,
        "end_position": None,
        "flushed": True,
    }


def test_an_insert_allocates_rows_while_a_coord_event_is_being_committed(cluster: Cluster):
    """Datacoord commits what a coord event changed after applying it in memory, outside
    the lock an insert's allocation takes: an insert waits for no state-store sync (a disk
    held here, as a slow sync would hold it)."""
    ((segment, _),) = assign(cluster, 1)
    wait_until(lambda: allocated(cluster, segment), 10, "the allocation batch logged")
    end = cluster.log.end_offsets(cluster.topics.coord)[0]
    wait_until(lambda: cluster.dc.meta.position() >= end, 10, "coord consumed")
    tick = cluster.rc.now()
    done: list[list[tuple[int, int]]] = []
    inserting = threading.Thread(target=lambda: done.append(assign(cluster, 1)), daemon=True)
    with cluster.disk.lock:  # every commit of datacoord's state waits
        rows = [{"segment_id": segment, "num_rows": 1}]
        cluster.report("DataNodeTicked", {"vchannel": "v0", "tick": tick, "segments": rows})
        wait_until(lambda: cluster.dc.meta.ticks.get("v0") == tick, 10, "the tick applied")
        inserting.start()
        inserting.join(timeout=10)  # a deadlock detector, not a timing: it never waits
        assert done == [[(segment, 1)]], "the allocation waited for the commit"
    assert cluster.dc.get_segment_info([segment])[0]["num_rows"] == 1
