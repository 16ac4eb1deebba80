"""The ingest workers' shares and shared positions (processors/proxy/ingest/positions.py):
partitions divided as Kafka's range assignor divides them, each exactly once; positions and
the dml marks committed with them, on a topic, as a worker taking a partition over reads
them (on both backends); keyed records (compacted on Kafka), read with the unkeyed ones of
before; a newer worker's claim fences the older one."""

from __future__ import annotations

import json

import pytest

from tests.support import unique_topic
from vectorlog import Client
from vectorlog.processors.proxy.ingest.positions import IngestFenced, LogPositions, assigned
from vectorlog.streams.log.base import Append
from vectorlog.streams.scan import read_all


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


def test_a_worker_restarting_after_many_commits_reads_the_newest_keyed_positions(
    client: Client,
):
    topic = unique_topic("positions")
    log = client.cluster.log
    worker = LogPositions(log, topic)
    worker.claim([("t", 0), ("t", 1)], "0/1")
    worker.refresh()
    for n in range(1, 31):
        marks = {0: 10 * n} if n % 10 == 0 else None
        worker.commit({("t", 0): n, ("t", 1): 2 * n}, marks)
    worker.close()
    again = LogPositions(log, topic)
    again.refresh()
    assert again.committed() == {("t", 0): 30, ("t", 1): 60}
    assert again.marks([("t", 0), ("t", 1)]) == {0: 300}
    keys = [r.key for r in read_all(log, topic)]
    assert keys and None not in keys  # each keyed: compaction keeps the newest of a key
    assert {k for k in keys if k is not None} == {b"claim:t/0", b"claim:t/1", b"t/0", b"t/1"}


def test_commits_written_before_fencing_are_read_with_the_keyed_ones(client: Client):
    topic = unique_topic("positions")
    log = client.cluster.log
    LogPositions(log, topic)  # creates the topic
    old = {"positions": {"t/0": 4, "t/1": 6}, "marks": {"0": 40}}
    log.append(topic, [Append(0, json.dumps(old).encode())])
    upgraded = LogPositions(log, topic)
    upgraded.refresh()
    assert upgraded.committed() == {("t", 0): 4, ("t", 1): 6}
    upgraded.claim([("t", 1)], "1/2")
    upgraded.commit({("t", 1): 9}, None)  # the old mark carried into the keyed commit
    reader = LogPositions(log, topic)
    reader.refresh()
    assert reader.committed() == {("t", 0): 4, ("t", 1): 9}
    assert reader.marks([("t", 0)]) == reader.marks([("t", 1)]) == {0: 40}


def test_a_newer_claim_fences_the_older_worker_and_its_late_commit_does_not_count(
    client: Client,
):
    topic = unique_topic("positions")
    log = client.cluster.log
    old = LogPositions(log, topic)
    old.claim([("t", 0)], "0/1")
    old.refresh()
    old.commit({("t", 0): 5}, {0: 50})
    new = LogPositions(log, topic)
    new.claim([("t", 0)], "0/1")
    new.refresh()
    new.commit({("t", 0): 8}, {0: 80})
    with pytest.raises(IngestFenced, match=r"claimed t\[0\]"):
        old.commit({("t", 0): 6}, None)
    assert old.fenced is not None and new.fenced is None
    new.check()
    # a commit of the old epoch that reached the topic late (appended before it was paused)
    epoch = next(r.offset for r in read_all(log, topic) if r.key == b"claim:t/0")
    late = {"offset": 7, "epoch": epoch, "mark": {"0": 60}}
    log.append(topic, [Append(0, json.dumps(late).encode(), b"t/0")])
    reader = LogPositions(log, topic)
    reader.refresh()
    assert reader.committed() == {("t", 0): 8}
    assert reader.marks([("t", 0)]) == {0: 80}
