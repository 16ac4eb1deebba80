"""The ingest workers' shares and shared positions (processors/proxy/ingest/positions.py):
partitions divided as Kafka's range assignor divides them, each exactly once; positions and
the dml marks committed with them, on a topic, as a worker taking a partition over reads
them (on both backends)."""

from __future__ import annotations

import pytest

from tests.support import unique_topic
from vectorlog import Client
from vectorlog.processors.proxy.ingest.positions import LogPositions, assigned


def test_partitions_are_divided_as_the_range_assignor_divides_them():
    assert [list(assigned(5, w, 2)) for w in range(2)] == [[0, 1, 2], [3, 4]]
    assert [list(assigned(1, w, 3)) for w in range(3)] == [[0], [], []]
    for partitions in range(10):
        for workers in range(1, 5):
            shares = [p for w in range(workers) for p in assigned(partitions, w, workers)]
            assert shares == list(range(partitions)), (partitions, workers)


@pytest.mark.parametrize("with_mark", [True, False])
def test_a_new_owner_reads_the_positions_and_the_mark_committed_with_them(
    client: Client, with_mark: bool
):
    topic = unique_topic("positions")
    first = LogPositions(client.cluster.log, topic)
    first.refresh()
    first.commit({("t", 0): 5, ("t", 1): 7}, {0: 100, 1: 200})
    first.commit({("t", 1): 9}, {0: 150, 1: 250} if with_mark else None)
    taker = LogPositions(client.cluster.log, topic)
    taker.refresh()
    assert taker.committed() == {("t", 0): 5, ("t", 1): 9}
    assert taker.marks([("t", 0)]) == {0: 100, 1: 200}
    expected = {0: 150, 1: 250} if with_mark else {0: 100, 1: 200}
    assert taker.marks([("t", 1)]) == expected
    assert taker.marks([("t", 0), ("t", 1)]) == {0: 100, 1: 200}
    assert taker.marks([("t", 0), ("t", 2)]) == {}  # partition 2 never committed: no floor
