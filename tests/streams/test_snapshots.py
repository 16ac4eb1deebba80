"""Snapshot + tail reads of a single-partition topic, and the snapshotter that writes them and
deletes the records below (the embedded log: the only one that deletes on request); on Kafka,
which keeps them, a fresh reader starts from the newest snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import on_backends, unique_topic
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.base import Append, Log, start_offsets
from vectorlog.streams.log.embedded import EmbeddedLog
from vectorlog.streams.snapshots import (
    PREFIX,
    SnapshotMissing,
    TopicSnapshotter,
    read_from,
    read_whole,
)

SERDE = EventSerde()


class LastOfEach:
    """A fold keeping the newest SegmentFlushed per segment."""

    def __init__(self) -> None:
        self.last: dict[int, Event] = {}

    def apply(self, event: Event) -> None:
        if event.type == "SegmentFlushed":
            self.last[event.body["segment_id"]] = event

    def events(self) -> list[Event]:
        return [self.last[k] for k in sorted(self.last)]


def flushed(sid: int, rows: int) -> bytes:
    return SERDE.encode(Event("SegmentFlushed", rows, {"segment_id": sid, "num_rows": rows}))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[EmbeddedLog, PyArrowObjectStore]]:
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("t", 1)
    log.append("t", [Append(0, flushed(i % 3, i)) for i in range(30)])
    yield log, PyArrowObjectStore(str(tmp_path / "storage"))
    log.close()


def decoded(records: Iterator) -> list[tuple[int, int, int]]:
    out = []
    for r in records:
        try:
            e = SERDE.decode(r.value)
        except Exception:
            continue
        if e.type == "SegmentFlushed":
            out.append((r.offset, e.body["segment_id"], e.body["num_rows"]))
    return out


def snapshotter(log: EmbeddedLog, blobs: PyArrowObjectStore, floor: list[int]) -> TopicSnapshotter:
    return TopicSnapshotter(log, "t", SERDE, blobs, LastOfEach, [lambda: floor[0]], 10)


def test_records_below_every_floor_become_a_snapshot_read_before_the_tail(setup):
    log, blobs = setup
    floor = [8]
    snap = snapshotter(log, blobs, floor)
    assert snap.snapshot() is None  # fewer than 10 records below the floor
    floor[0] = 20
    assert snap.snapshot() == 20 and start_offsets(log, "t")[0] == 20
    got = decoded(read_from(log, "t", blobs, 0))
    # the newest of each, below 20: only the last snapshot record moves a stored position
    # (to 20), the others keep the reader's (0), so a crash partway re-reads it whole
    assert got[:3] == [(-1, 0, 18), (-1, 1, 19), (19, 2, 17)]
    assert [n for _, _, n in got[3:]] == list(range(20, 30))
    assert [(s, n) for _, s, n in decoded(read_whole(log, "t", blobs))] == [
        (s, n) for _, s, n in got
    ]
    assert decoded(read_from(log, "t", blobs, 5))[:3] == [(4, 0, 18), (4, 1, 19), (19, 2, 17)]
    assert [n for _, _, n in decoded(read_from(log, "t", blobs, 25))] == list(range(25, 30))


@on_backends()
def test_an_idle_topics_snapshots_append_nothing_to_it(log: Log, tmp_path: Path):
    """A record of the snapshotter's own (an end marker) made the next snapshot due: with a
    small `snapshot_records` an idle cluster appended to coord and ddl every interval for
    ever. Once the topic is idle, however often it runs, the topic's end stays put."""
    topic = unique_topic("idle")
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, flushed(i % 3, i)) for i in range(30)])
    blobs = PyArrowObjectStore(str(tmp_path / "storage"))
    floor = [lambda: log.end_offsets(topic)[0]]  # every consumer read all there is
    snap = TopicSnapshotter(log, topic, SERDE, blobs, LastOfEach, floor, 1)
    snapshots = [snap.snapshot() for _ in range(3)]
    assert any(at is not None for at in snapshots)
    end = log.end_offsets(topic)
    assert [snap.snapshot() for _ in range(5)] == [None] * 5
    assert log.end_offsets(topic) == end
    assert [(s, n) for _, s, n in decoded(read_from(log, topic, blobs, 0))] == [
        (0, 27),
        (1, 28),
        (2, 29),
    ]


def test_a_later_snapshot_folds_the_earlier_one_and_replaces_it(setup):
    log, blobs = setup
    floor = [12]
    snap = snapshotter(log, blobs, floor)
    assert snap.snapshot() == 12
    floor[0] = 29
    assert snap.snapshot() == 29
    assert blobs.list(PREFIX) == [f"{PREFIX}t/{29:020d}"]
    got = decoded(read_from(log, "t", blobs, 0))
    assert got == [(-1, 0, 27), (-1, 1, 28), (28, 2, 26), (29, 2, 29)]


def test_deleted_records_without_a_snapshot_are_an_error_naming_the_offset(setup):
    log, blobs = setup
    log.truncate("t", 0, 5)
    with pytest.raises(SnapshotMissing, match="below offset 5 were deleted, and no snapshot"):
        list(read_from(log, "t", blobs, 0))


@on_backends("kafka")
def test_on_a_log_that_keeps_its_records_a_fresh_reader_starts_at_the_newest_snapshot(
    log: Log, tmp_path: Path
):
    topic = unique_topic("snap")
    log.create_topic(topic, 1)
    log.append(topic, [Append(0, flushed(i % 3, i)) for i in range(30)])
    blobs = PyArrowObjectStore(str(tmp_path / "storage"))
    snap = TopicSnapshotter(log, topic, SERDE, blobs, LastOfEach, [], 10)
    assert snap.snapshot() is None  # it notes the end (a marker at 30): folded a run later
    log.append(topic, [Append(0, flushed(i % 3, i)) for i in range(30, 35)])
    assert snap.snapshot() == 30
    got = decoded(read_from(log, topic, blobs, 0))
    tail = [(i + 1, i % 3, i) for i in range(30, 35)]  # after the marker
    assert got == [(-1, 0, 27), (-1, 1, 28), (29, 2, 29), *tail]
    # a reader with a position of its own reads on from it; nothing was deleted
    assert [n for _, _, n in decoded(read_from(log, topic, blobs, 1))] == list(range(1, 35))
    assert start_offsets(log, topic)[0] == 0
    assert snap.snapshot() is None  # 5 records since: fewer than 10
    log.append(topic, [Append(0, flushed(7, 100 + i)) for i in range(20)])
    snap.snapshot()  # notes the end
    at = snap.snapshot()  # folds the snapshot at 30 and the records after it
    assert at is not None and at > 50
    got = decoded(read_from(log, topic, blobs, 0))
    assert [(sid, n) for _, sid, n in got] == [(0, 33), (1, 34), (2, 32), (7, 119)]
    assert [o for o, _, _ in got] == [-1, -1, -1, at - 1]
