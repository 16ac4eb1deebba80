"""Strong reads and the log (issue 7, item 12): a read appends nothing when no write was
stamped since the last tick (it is served at that tick), on-demand ticks under load are
coalesced, and a Strong read still sees every write acknowledged before it began.

What reads append is measured with the log's own offsets: an end marker appended to every
dml partition before and after returns the offsets in between.
"""

from __future__ import annotations

import threading

import pytest

from vectorlog import Client
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Append
from vectorlog.streams.scan import END_MARKER_SOURCE

MARKER = EventSerde().encode(Event("TimeTick", 0, {"source": END_MARKER_SOURCE}))


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py): the tests of
    a worker run one at a time, so the cluster is as quiet as a fresh one during each."""
    return shared_client


def dml_ends(client: Client) -> list[int]:
    """Appends an end marker (which every consumer ignores) to every dml partition; returns
    their offsets."""
    log, topics = client.cluster.log, client.cluster.topics
    return log.append(topics.dml, [Append(p, MARKER) for p in range(topics.dml_partitions)])


def appended_between(before: list[int], after: list[int]) -> list[int]:
    """The records appended to each partition between two `dml_ends` calls."""
    return [b - a - 1 for a, b in zip(before, after, strict=True)]


def ready(client: Client, name: str) -> None:
    """Creates `name` with a row, and reads it once: the ticks it takes are behind us."""
    client.create_collection(name, dimension=2, num_shards=2)
    client.insert(name, [{"id": 0, "vector": [1.0, 0.0]}])
    assert client.get(name, [0], output_fields=["id"]) == [{"id": 0}]


def test_strong_reads_on_a_quiet_cluster_append_nothing(client: Client):
    ready(client, "c")
    before = dml_ends(client)
    for _ in range(50):
        assert client.get("c", [0], output_fields=["id"]) == [{"id": 0}]
        assert len(client.search("c", [[1.0, 0.0]], limit=1)[0]) == 1
    assert appended_between(before, dml_ends(client)) == [0] * len(before)


def test_concurrent_strong_reads_after_a_write_share_a_few_ticks(client: Client):
    ready(client, "c")
    before = dml_ends(client)
    client.insert("c", [{"id": 1, "vector": [0.0, 1.0]}])
    seen: list[int] = []

    def reads() -> None:
        for _ in range(10):
            seen.append(len(client.get("c", [0, 1], output_fields=["id"])))

    threads = [threading.Thread(target=reads) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [2] * 80
    appended = appended_between(before, dml_ends(client))
    assert sum(appended) - 1 <= 3 * len(appended)  # the insert, and a few ticks, not 80


def test_a_strong_read_sees_every_write_acknowledged_before_it_began(client: Client):
    """One thread writes; another reads Strong the newest key acknowledged before each read
    began; the writes pause now and then so some reads are served by a quiet tick."""
    client.create_collection("c", dimension=2, num_shards=2)
    acked: list[int] = []
    missed: list[int] = []
    done = threading.Event()

    def write() -> None:
        for i in range(150):
            client.insert("c", [{"id": i, "vector": [1.0, float(i)]}])
            acked.append(i)
            if i % 10 == 0:  # a quiet moment: reads in it are served by the last tick
                client.get("c", [i])
        done.set()

    def read() -> None:
        while not done.is_set():
            if acked:
                key = acked[-1]
                if client.get("c", [key], output_fields=["id"]) != [{"id": key}]:
                    missed.append(key)

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(0, 150, 7):  # and write-then-read in one thread
        client.insert("c", [{"id": 1000 + i, "vector": [0.0, 1.0]}])
        assert client.get("c", [1000 + i], output_fields=["id"]) == [{"id": 1000 + i}]
    assert missed == []
