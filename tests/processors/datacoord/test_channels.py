"""The data channel coordinator (issue 24): the dml pchannels divided among the live data
nodes, balanced and sticky; a silent node declared dead and its pchannels moved at once; a
heartbeat of a dead registration ignored; every decision a DataChannelsAssigned on coord."""

from __future__ import annotations

from collections import Counter

from tests.support import unique_topic, wait_until
from vectorlog.processors.datacoord.channels import DataChannelCoord, divide
from vectorlog.schemas.serde import Event
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.topics import Serdes, Topics

A, B, C = ("a", 1), ("b", 2), ("c", 3)


def test_pchannels_are_balanced_over_the_live_nodes_and_stay_where_they_are():
    first = divide({}, 8, [A, B])
    assert Counter(first.values()) == {A: 4, B: 4}
    third = divide(first, 8, [A, B, C])
    assert sorted(Counter(third.values()).values()) == [2, 3, 3]
    assert all(third[p] == first[p] for p in third if third[p] != C)  # only moves to C
    without_a = divide(third, 8, [B, C])
    assert Counter(without_a.values()) == {B: 4, C: 4}
    assert all(without_a[p] == third[p] for p in third if third[p] != A)
    assert divide(without_a, 8, []) == {}


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def beat(log: Log, topics: Topics, node: tuple[str, int], ts: int) -> None:
    serde = Serdes().for_topic(topics.coord)
    event = Event("DataNodeReported", ts, {"node": node[0], "epoch": node[1], "writing": []})
    log.append(topics.coord, [Append(0, serde.encode(event), serde.key(event))])


def test_a_silent_node_is_declared_dead_and_its_heartbeats_are_ignored_after(log: Log):
    topics = Topics(unique_topic("dch"), 4)
    topics.ensure(log)
    clock, ts = Clock(), iter(range(1, 1000))
    coord = DataChannelCoord(log, topics, Serdes(), lambda: next(ts), 4.0, clock)
    coord.start()
    try:
        beat(log, topics, A, 1)
        beat(log, topics, B, 2)
        halves = {A: 2, B: 2}
        wait_until(lambda: Counter(coord.fence.owners.values()) == halves, 30, "divided")
        clock.t = 3.0
        beat(log, topics, A, 3)
        wait_until(lambda: coord.heard["a"].seen == 3.0, 30, "a heard again")
        clock.t = 5.0  # b silent for 5 s (the coordinator decides every 0.25 s)
        alone = dict.fromkeys(range(4), A)
        wait_until(lambda: coord.fence.owners == alone and B in coord.fence.dead, 30, "moved")
        beat(log, topics, B, 4)  # its dead registration: ignored
        beat(log, topics, A, 5)
        wait_until(lambda: coord.offset >= 7 and "b" not in coord.heard, 30, "ignored")
    finally:
        coord.stop()
    again = DataChannelCoord(log, topics, Serdes(), lambda: next(ts), 4.0, clock)
    again.start()  # a restarted datacoord: the assignment comes back from coord
    try:
        wait_until(lambda: again.caught_up.is_set() and again.fence.version == 2, 30, "read")
        assert again.fence.owners == dict.fromkeys(range(4), A)
    finally:
        again.stop()
