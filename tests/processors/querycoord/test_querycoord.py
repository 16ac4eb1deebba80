"""The query coordinator on the log: a query node that registers again with a newer epoch (a
restarted process) gets its pchannels back at once, without waiting for its old epoch's
silence, and its old epoch is declared dead: never an owner again, even if it reports."""

from __future__ import annotations

from typing import Any

from tests.support import unique_topic
from vectorlog.processors.querycoord.assignment import Assignment
from vectorlog.processors.querycoord.querycoord import QueryCoord
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.topics import Serdes, Topics

P = 4


def report(log: Log, topics: Topics, epoch: int, serving: list[int]) -> None:
    serde = Serdes().for_topic(topics.coord)
    body = {"node": "qn", "epoch": epoch, "address": f"qn:{epoch}", "serving": serving}
    event = Event("QueryNodeReported", epoch * 100 + len(serving), {**body, "failed": []})
    log.append(topics.coord, [Append(0, serde.encode(event), serde.key(event))])


def decided(coord: QueryCoord) -> Assignment:
    """Reads coord to its end on the caller's thread, then decides; returns the assignment."""
    follower: Any = coord.follower
    follower.caught_up.clear()
    while follower.step() or not follower.caught_up.is_set():
        pass
    return coord.decide()


def test_a_node_registered_again_takes_its_pchannels_at_once_and_its_old_epoch_is_fenced(
    log: Log,
):
    topics = Topics(unique_topic("qc"), P)
    topics.ensure(log)
    never = 0.0  # the clock stands still: no node is ever silent long enough to die
    coord = QueryCoord(log, topics, Serdes(), lambda: 1, dead_after_s=4.0, clock=lambda: never)
    coord.follower.open()
    report(log, topics, 1, [])
    assert {o.key for o in decided(coord).targets.values()} == {("qn", 1)}
    report(log, topics, 1, list(range(P)))
    assert {o.key for o in decided(coord).owners.values()} == {("qn", 1)}

    report(log, topics, 2, [])  # restarted: a new epoch, loading
    again = decided(coord)
    assert ("qn", 1) in again.dead
    assert {o.key for o in again.targets.values()} == {("qn", 2)}
    assert again.owners == {}  # reads wait for the new epoch to load

    report(log, topics, 1, list(range(P)))  # the old epoch speaks again: ignored
    report(log, topics, 2, list(range(P)))
    served = decided(coord)
    assert {o.key for o in served.owners.values()} == {("qn", 2)} and len(served.owners) == P
    coord.close()


def configure(log: Log, topics: Topics, collection_id: int, replica_number: int) -> None:
    serde = Serdes().for_topic(topics.coord)
    body = {"collection_id": collection_id, "replica_number": replica_number}
    event = Event("QueryReplicasConfigured", 5, body)
    log.append(topics.coord, [Append(0, serde.encode(event), serde.key(event))])


def test_node_and_replica_ids_are_recorded_on_coord_and_kept_by_a_new_coordinator(log: Log):
    topics = Topics(unique_topic("qcid"), P)
    topics.ensure(log)
    coord = QueryCoord(log, topics, Serdes(), lambda: 1, dead_after_s=4.0, clock=lambda: 0.0)
    coord.follower.open()
    report(log, topics, 1, [])
    configure(log, topics, 7, 1)
    configure(log, topics, 8, 1)
    first = decided(coord)
    assert first.node_ids == {("qn", 1): 1}
    assert first.collections == {7: (1,), 8: (2,)}
    report(log, topics, 2, [])  # restarted: a new registration, a new node id (as Milvus's)
    restarted = decided(coord)
    assert restarted.node_ids == {("qn", 2): 2}
    coord.close()

    again = QueryCoord(log, topics, Serdes(), lambda: 1, dead_after_s=4.0, clock=lambda: 0.0)
    again.follower.open()
    kept = decided(again)  # a new coordinator reads the ids back from coord
    assert (kept.node_ids, kept.collections) == ({("qn", 2): 2}, {7: (1,), 8: (2,)})
    configure(log, topics, 7, 2)  # a second copy of 7: a new id, never one used before
    assert decided(again).collections == {7: (1, 3), 8: (2,)}
    again.close()
