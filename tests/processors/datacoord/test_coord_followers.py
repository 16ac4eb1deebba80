"""The followers of coord's assignments (issue 23): a query assignment follower (proxies, query
nodes, the query coordinator) and a data channel coordinator started after many coord records,
with a coord snapshot present, read only the snapshot and the records after it (not coord from
offset 0) and end in the state reading the whole topic gives: the same assignment, replicas,
newest heartbeat per node, fence. Neither counts as caught up before it read to coord's end
(an empty first fetch, as Kafka's may be, is not the end)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support import unique_topic
from vectorlog.processors.datacoord.channels import DataChannelCoord
from vectorlog.processors.datacoord.coord_snapshot import CoordFold
from vectorlog.processors.querycoord.assignment import Assignment, Owner
from vectorlog.processors.querycoord.routing import CoordFollower
from vectorlog.schemas.serde import Event
from vectorlog.storage.channel_fence import ChannelFence
from vectorlog.storage.objectstore import PyArrowObjectStore
from vectorlog.streams.log.base import Append, Log, Reader, Record
from vectorlog.streams.snapshots import TopicSnapshotter, newest_snapshot, snapshot_at
from vectorlog.streams.topics import Serdes, Topics

HEARTBEATS = 300  # heartbeats of each kind before the snapshot (3 nodes for 100 s)


def append(log: Log, topics: Topics, kind: str, ts: int, body: dict[str, Any]) -> None:
    serde = Serdes().for_topic(topics.coord)
    event = Event(kind, ts, body)
    log.append(topics.coord, [Append(0, serde.encode(event), serde.key(event))])


def query_assignment(version: int, node: str, epoch: int) -> dict[str, Any]:
    owner = Owner(node, epoch, f"{node}:1")
    slots = {(p, 0): owner for p in range(4)}
    return Assignment(version, slots, slots, frozenset({("gone", 1)})).to_body()


def write_history(log: Log, topics: Topics, start: int, beats: int, first: int) -> int:
    """Appends `beats` heartbeats of each kind (newer epochs among them) and, every 100, both
    assignments (versions from `first` on) and replicas; returns the next ts."""
    ts = start
    for i in range(beats):
        node, epoch = f"n{i % 3}", first + i // 150  # each node registers again half way
        query = {"node": node, "epoch": epoch, "address": f"{node}:1", "serving": [i % 4]}
        append(log, topics, "QueryNodeReported", ts, {**query, "failed": []})
        data = {"node": node, "epoch": epoch, "writing": []}
        append(log, topics, "DataNodeReported", ts + 1, data)
        ts += 2
        if i % 100 == 50 % beats:
            v = first + i // 100
            append(log, topics, "QueryChannelsAssigned", ts, query_assignment(v, node, epoch))
            fence = ChannelFence(dict.fromkeys(range(4), (node, epoch)), frozenset(), v)
            append(log, topics, "DataChannelsAssigned", ts + 1, fence.to_body())
            replicas = {"collection_id": v % 3, "replica_number": v}
            append(log, topics, "QueryReplicasConfigured", ts + 2, replicas)
            ts += 3
    return ts


class QueryFollower:
    """What the query coordinator folds from coord: the assignment, each node's newest report
    (of its newest epoch, as QueryCoord.reported keeps), each collection's replicas."""

    def __init__(self, log: Log, topics: Topics, blobs: PyArrowObjectStore | None) -> None:
        self.reports: dict[str, tuple[int, list[int]]] = {}
        self.replicas: dict[int, int] = {}
        serde = Serdes().for_topic(topics.coord)
        self.follower = CoordFollower(log, topics.coord, serde, "t", self.folded, blobs=blobs)

    def folded(self, e: Event) -> None:
        if e.type == "QueryNodeReported":
            known = self.reports.get(e.body["node"])
            if known is None or known[0] <= e.body["epoch"]:
                self.reports[e.body["node"]] = (e.body["epoch"], list(e.body["serving"]))
        elif e.type == "QueryReplicasConfigured":
            self.replicas[e.body["collection_id"]] = e.body["replica_number"]

    def state(self) -> Any:
        return self.follower.assignment, self.reports, self.replicas


def read_to_end(reader: Any) -> None:
    """Opens `reader` (a follower) and steps it on its caller's thread until it read coord to
    its end (no decision is taken: nothing is appended)."""
    reader.open()
    reader.caught_up.clear()
    while reader.step() or not reader.caught_up.is_set():
        pass


def channel_state(coord: DataChannelCoord) -> Any:
    return coord.fence.to_body(), {n: h.epoch for n, h in coord.heard.items()}


def snapshot(log: Log, topics: Topics, blobs: PyArrowObjectStore) -> int:
    """Writes coord's snapshot as of its end (both log kinds); returns its offset."""
    end = log.end_offsets(topics.coord)[0]
    snap = TopicSnapshotter(
        log, topics.coord, Serdes().for_topic(topics.coord), blobs, CoordFold, [lambda: end], 1
    )
    at = snap.snapshot() or snap.snapshot()  # a log keeping records: the second run writes
    assert at is not None
    return at


def test_followers_start_from_the_snapshot_and_end_as_reading_coord_whole(log: Log, tmp_path: Path):
    topics = Topics(unique_topic("cf"), 4)
    topics.ensure(log)
    blobs = PyArrowObjectStore(tmp_path / "storage")
    ts = write_history(log, topics, 1, HEARTBEATS, 1)
    whole_q = QueryFollower(log, topics, None)  # read before the snapshot: every record
    whole_d = DataChannelCoord(log, topics, Serdes(), lambda: 0, 4.0, lambda: 0.0)
    for reader in (whole_q.follower, whole_d):
        read_to_end(reader)
    at = snapshot(log, topics, blobs)
    write_history(log, topics, ts, 30, 4)  # the tail: heartbeats and assignments after it
    for reader in (whole_q.follower, whole_d):
        read_to_end(reader)
    end = log.end_offsets(topics.coord)[0]
    held = snapshot_at(blobs, topics.coord, newest_snapshot(blobs, topics.coord) or 0) or []
    assert newest_snapshot(blobs, topics.coord) == at and 0 < len(held) < 20

    started_q = QueryFollower(log, topics, blobs)  # a restarted proxy / query coordinator
    started_d = DataChannelCoord(log, topics, Serdes(), lambda: 0, 4.0, lambda: 0.0, blobs=blobs)
    for reader in (started_q.follower, started_d):
        read_to_end(reader)
        assert reader.records_read == len(held) + end - at  # the snapshot, then the tail
    assert started_q.follower.records_read < whole_q.follower.records_read / 2
    assert started_q.state() == whole_q.state()
    assert started_q.follower.assignment.version == 4
    assert channel_state(started_d) == channel_state(whole_d)
    assert started_d.fence.version == 4
    assert channel_state(started_d)[1] == {"n0": 4, "n1": 4, "n2": 4}


def test_the_coord_fold_keeps_the_newest_assignments_and_each_nodes_newest_heartbeat():
    fold = CoordFold()
    beats = [("a", 2, 10), ("a", 1, 11), ("b", 1, 12), ("b", 1, 13)]  # (node, epoch, ts)
    for node, epoch, ts in beats:
        fold.apply(Event("DataNodeReported", ts, {"node": node, "epoch": epoch, "writing": []}))
        body = {"node": node, "epoch": epoch, "address": "", "serving": [], "failed": []}
        fold.apply(Event("QueryNodeReported", ts, body))
    indexer = {"node": "a", "epoch": 1, "writing": [], "role": "indexnode"}
    fold.apply(Event("DataNodeReported", 14, indexer))
    for v in (2, 1):
        fold.apply(Event("QueryChannelsAssigned", 20 + v, query_assignment(v, "a", 2)))
    fold.apply(Event("QueryReplicasConfigured", 30, {"collection_id": 7, "replica_number": 2}))
    fold.apply(Event("QueryReplicasConfigured", 31, {"collection_id": 7, "replica_number": 1}))
    kept = [(e.type, e.ts) for e in fold.events()]
    assert kept == [
        ("QueryChannelsAssigned", 22),
        ("QueryReplicasConfigured", 31),
        ("DataNodeReported", 10),  # a's epoch 2: its older registration's later beat is not
        ("DataNodeReported", 13),
        ("DataNodeReported", 14),  # the index node a: a role of its own
        ("QueryNodeReported", 10),
        ("QueryNodeReported", 13),
    ]


class EmptyFirstFetch:
    """A reader whose first poll returns nothing, as a Kafka consumer's first fetch may."""

    def __init__(self, reader: Reader) -> None:
        self._reader, self._polled = reader, False

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        if not self._polled:
            self._polled = True
            return []
        return self._reader.poll(max_records, timeout)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._reader.seek(topic, partition, offset)

    def close(self) -> None:
        self._reader.close()


class SlowFirstFetchLog:
    """`log`, its readers' first polls empty."""

    def __init__(self, log: Log) -> None:
        self._log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    def reader(self, topic: str, positions: dict[int, int]) -> Reader:
        return EmptyFirstFetch(self._log.reader(topic, positions))


def test_followers_are_caught_up_only_once_they_read_to_coords_end(log: Log):
    topics = Topics(unique_topic("cf"), 4)
    topics.ensure(log)
    write_history(log, topics, 1, HEARTBEATS, 1)  # assignments 1, 2, 3
    slow: Any = SlowFirstFetchLog(log)
    query = CoordFollower(slow, topics.coord, Serdes().for_topic(topics.coord), "q")
    data = DataChannelCoord(slow, topics, Serdes(), lambda: 0, 4.0, lambda: 0.0)
    for reader in (query, data):
        reader.open()
        reader.step()  # the empty first fetch
        assert not reader.caught_up.is_set()
        for _ in range(1000):
            if reader.caught_up.is_set():
                break
            reader.step()
        assert reader.caught_up.is_set()
    assert query.assignment.version == 3
    assert data.fence.version == 3
