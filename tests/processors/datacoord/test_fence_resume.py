"""The lease fence holds for readers that start past a takeover (issue 23), on both log backends:
a fenced datacoord's append that its producer delivered after a standby took over (see
tests/processors/rootcoord/test_lease_standby.py for how it lands after the takeover marker)
is hidden from a reader resuming from a stored position past the marker, from a follower
started from a coord snapshot written after the takeover, and from every later snapshot; what
the old epoch appended before the marker is still applied by all of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.processors.datacoord.test_coord_followers import (
    QueryFollower,
    query_assignment,
    read_to_end,
    snapshot,
)
from tests.processors.fakes import FakeRootCoord
from tests.streams.counting import ReaderLog
from tests.support import unique_topic
from vectorlog.jobs.replay import Filters, Positions, Replayed, replay
from vectorlog.processors.datacoord.channels import DataChannelCoord
from vectorlog.processors.datacoord.datacoord import DataCoord
from vectorlog.processors.datacoord.settings import DataCoordSettings
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.state.memory import MemoryDisk, MemoryStateStore
from vectorlog.storage.channel_fence import ChannelFence
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.log.fenced import fenced
from vectorlog.streams.log.lease_fence import FENCED_SOURCE, lease_headers, takeover_marker
from vectorlog.streams.snapshots import read_from, read_whole, snapshot_path
from vectorlog.streams.topics import Serdes, Topics


def leader(log: Log, epoch: int) -> Log:
    """Returns `log` as datacoord's leader of `epoch` appends to it (each record tagged)."""
    return fenced(log, lambda: None, lambda: lease_headers([("datacoord", epoch)]))


def replicas(writes: Log, topics: Topics, collection: int, ts: int) -> int:
    """Appends a QueryReplicasConfigured of `collection` through `writes`; returns its offset."""
    serde = Serdes().for_topic(topics.coord)
    event = Event("QueryReplicasConfigured", ts, {"collection_id": collection, "replica_number": 1})
    return writes.append(topics.coord, [Append(0, serde.encode(event), serde.key(event))])[0]


def assigned(writes: Log, topics: Topics, version: int, ts: int) -> int:
    """Appends a query and a data channel assignment of `version` through `writes`; returns
    the offset after them."""
    serde = Serdes().for_topic(topics.coord)
    fence = ChannelFence(dict.fromkeys(range(4), ("n0", 1)), frozenset(), version)
    events = [
        Event("QueryChannelsAssigned", ts, query_assignment(version, "n0", 1)),
        Event("DataChannelsAssigned", ts, fence.to_body()),
    ]
    return (
        writes.append(topics.coord, [Append(0, serde.encode(e), serde.key(e)) for e in events])[-1]
        + 1
    )


def takeover(log: Log, topics: Topics) -> tuple[Log, Log, int]:
    """Epoch 1 leads (collection 7, assignment 1), epoch 2 takes over (its marker, then
    collection 9, assignment 2); returns (the old leader, the new one, the offset after)."""
    old, new = leader(log, 1), leader(log, 2)
    replicas(old, topics, 7, 10)
    assigned(old, topics, 1, 11)
    new.append(topics.coord, takeover_marker(1))
    replicas(new, topics, 9, 20)
    return old, new, assigned(new, topics, 2, 21)


def zombie(old: Log, topics: Topics) -> int:
    """The old leader's late appends land (collection 8, assignment 9); returns the first's
    offset."""
    at = replicas(old, topics, 8, 12)
    assigned(old, topics, 9, 13)
    return at


def collections(records: Any) -> list[int]:
    out = []
    for rec in records:
        event = rec.event if isinstance(rec, Replayed) else EventSerde().decode(rec.value)
        if event.type == "QueryReplicasConfigured":
            out.append(event.body["collection_id"])
    return out


def test_a_reader_resuming_past_the_takeover_hides_the_late_record(log: Log, tmp_path: Path):
    """What rootcoord's, datacoord's and an index node's recovery read (read_from their stored
    position): one stored past the marker hides the late record, one stored before it still
    applies the old epoch's records before the marker."""
    topics = Topics(unique_topic("fr"), 1)
    topics.ensure(log)
    blobs = PyArrowObjectStore(tmp_path / "storage")
    old, new, past_marker = takeover(log, topics)  # a consumer stopped here (stored it)
    late = zombie(old, topics)
    replicas(new, topics, 10, 30)
    resumed = list(read_from(log, topics.coord, blobs, past_marker))
    hidden = next(r for r in resumed if r.offset == late)
    assert EventSerde().decode(hidden.value).body["source"] == FENCED_SOURCE
    assert collections(resumed) == [10]
    assert collections(read_from(log, topics.coord, blobs, 1)) == [9, 10]  # 7 is at offset 0
    assert collections(read_from(log, topics.coord, blobs, 0)) == [7, 9, 10]
    assert collections(read_whole(log, topics.coord, blobs)) == [7, 9, 10]
    at = Positions(topics.coord, {0: past_marker})  # `vectorlog replay --from-offset 0:N`
    replayed = replay(log, topics.coord, EventSerde(), Filters(), at, _corrupt, blobs)
    assert collections(replayed) == [10]


def _corrupt(rec: Record, reason: str) -> None:
    raise AssertionError(f"{rec.offset}: {reason}")


def test_followers_started_from_a_snapshot_after_a_takeover_hide_the_late_record(
    log: Log, tmp_path: Path
):
    """A query coordinator (or proxy, or query node) and a data channel coordinator started
    from coord's newest snapshot, written after the takeover: the snapshot is past the marker,
    yet the late records after it are not applied; nor are they folded into the next snapshot
    (the snapshotter reads on from the older one)."""
    topics = Topics(unique_topic("fs"), 4)
    topics.ensure(log)
    blobs = PyArrowObjectStore(tmp_path / "storage")
    old, new, _ = takeover(log, topics)
    whole = QueryFollower(log, topics, None)  # reads coord from offset 0, the marker too
    read_to_end(whole.follower)
    snapshot(log, topics, blobs)  # the new leader's snapshotter, past its marker
    zombie(old, topics)
    replicas(new, topics, 10, 30)
    started = QueryFollower(log, topics, blobs)  # a restarted proxy / query coordinator
    channels = DataChannelCoord(log, topics, Serdes(), lambda: 0, 4.0, lambda: 0.0, blobs=blobs)
    for reader in (whole.follower, started.follower, channels):
        read_to_end(reader)
    assert started.replicas == whole.replicas == {7: 1, 9: 1, 10: 1}
    assert started.follower.assignment.version == whole.follower.assignment.version == 2
    assert channels.fence.version == 2
    snapshot(log, topics, blobs)  # the next snapshot, written after the late records
    assert not any(_is_late(r) for r in read_from(log, topics.coord, blobs, 0))
    again = QueryFollower(log, topics, blobs)  # from that snapshot
    read_to_end(again.follower)
    assert again.replicas == {7: 1, 9: 1, 10: 1} and again.follower.assignment.version == 2


def _is_late(rec: Record) -> bool:
    event = EventSerde().decode(rec.value)
    return (event.type, event.body.get("collection_id")) == ("QueryReplicasConfigured", 8)


def test_a_datacoord_resuming_from_its_stored_position_ignores_the_old_leaders_late_seals(
    log: Log,
):
    """The new leader's datacoord stops (its position stored past the marker); the paused
    old leader's seal of a segment lands; it starts again from its stored position, and
    another late seal lands while it runs: both segments the old leader opened before the
    takeover stay Growing."""
    topics = Topics(unique_topic("dr"), dml_partitions=2)
    topics.ensure(log)
    rc, new_disk = FakeRootCoord(next_id=7), MemoryDisk()
    old = datacoord(log, topics, rc, 1, MemoryDisk())
    segments = [old.assign_segments(1, 2, v, 0, 20, 100, rc.now())[0][0] for v in ("v0", "v1")]
    old.stop()  # paused: a standby takes over
    leader(log, 2).append(topics.coord, takeover_marker(1))
    new = datacoord(log, topics, rc, 2, new_disk)
    new.stop()
    late_seal(log, topics, segments[0], rc.now())  # its producer delivers on resume
    new = datacoord(log, topics, rc, 2, new_disk)  # from its stored position
    try:
        late_seal(log, topics, segments[1], rc.now())
        new.assign_segments(1, 2, "v2", 0, 20, 100, rc.now())  # applied after the late seal
        assert [s["state"] for s in new.get_segment_info(segments)] == ["Growing", "Growing"]
    finally:
        new.stop()


def datacoord(log: Log, topics: Topics, rc: FakeRootCoord, epoch: int, disk: MemoryDisk) -> Any:
    """Returns a recovered, started DataCoord leading with `epoch` on a store on `disk`."""
    settings = DataCoordSettings(max_segment_bytes=4000)
    store = MemoryStateStore(disk)
    dc = DataCoord(leader(log, epoch), topics, Serdes(), store, rc, settings)
    dc.recover()
    dc.start()
    return dc


def late_seal(log: Log, topics: Topics, segment: int, ts: int) -> None:
    """Appends the old leader's (epoch 1) seal of `segment`, as its producer delivers it."""
    serde = Serdes().for_topic(topics.coord)
    event = Event("SegmentsSealed", ts, {"segment_ids": [segment], "reason": "size"})
    leader(log, 1).append(topics.coord, [Append(0, serde.encode(event), serde.key(event))])


def test_a_datacoord_consumer_starts_with_its_recoverys_fence_state(log: Log):
    """After a takeover, a datacoord recovers from coord's start through the marker and starts
    its consumer where the recovery ended, with the fence state the recovery read (not worked
    out again from coord's start): the old leader's seal landing after the start is ignored,
    and the only reader of coord opened after the recovery is the consumer's, at its end."""
    topics = Topics(unique_topic("dk"), dml_partitions=2)
    topics.ensure(log)
    rc = FakeRootCoord(next_id=7)
    old = datacoord(log, topics, rc, 1, MemoryDisk())
    segment = old.assign_segments(1, 2, "v0", 0, 20, 100, rc.now())[0][0]
    old.stop()
    leader(log, 2).append(topics.coord, takeover_marker(1))
    counted = ReaderLog(log)
    settings = DataCoordSettings(max_segment_bytes=4000)
    new = DataCoord(leader(counted, 2), topics, Serdes(), MemoryStateStore(), rc, settings)
    new.recover()
    recovery = len(counted.starts(topics.coord))
    new.start()
    try:
        late_seal(log, topics, segment, rc.now())
        new.assign_segments(1, 2, "v1", 0, 20, 100, rc.now())  # applied after the late seal
        assert [s["state"] for s in new.get_segment_info([segment])] == ["Growing"]
        resumed = counted.starts(topics.coord)[recovery:]
        assert len(resumed) == 1 and resumed[0][0] > 0, resumed
    finally:
        new.stop()


class CountedGets(PyArrowObjectStore):
    """An object store counting the reads of each path."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gets: dict[str, int] = {}

    def get(self, path: str) -> bytes:
        self.gets[path] = self.gets.get(path, 0) + 1
        return super().get(path)


def test_followers_started_from_a_snapshot_read_it_once(log: Log, tmp_path: Path):
    """A query coordinator's follower and a data channel coordinator started fresh take the
    newest snapshot, then read on from it with the fence state it keeps (not read again to
    work that state out); they still hide the old leader's late record."""
    topics = Topics(unique_topic("fo"), 4)
    topics.ensure(log)
    old, new, _ = takeover(log, topics)
    at = snapshot(log, topics, PyArrowObjectStore(tmp_path / "storage"))
    zombie(old, topics)
    blobs = CountedGets(tmp_path / "storage")
    started = QueryFollower(log, topics, blobs)
    channels = DataChannelCoord(log, topics, Serdes(), lambda: 0, 4.0, lambda: 0.0, blobs=blobs)
    for reader in (started.follower, channels):
        read_to_end(reader)
    assert started.replicas == {7: 1, 9: 1} and started.follower.assignment.version == 2
    assert channels.fence.version == 2
    assert blobs.gets == {snapshot_path(topics.coord, at): 2}  # once by each
