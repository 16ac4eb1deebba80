"""vectorlog.sdk.probes answer what the processors do, checked against what a user sees
(reads, the log) on both log backends."""

from __future__ import annotations

import pytest

from tests.support import wait_until
from vectorlog import Client
from vectorlog.core.errors import CollectionNotFound, InvalidArgument
from vectorlog.schemas.serde import EventSerde
from vectorlog.sdk import probes
from vectorlog.streams.scan import read_to_end

ROWS = [{"id": i, "vector": [float(i), 1.0]} for i in range(30)]
#: an id no collection of a shared cluster has (ids are counted up from small numbers)
UNUSED = 10**12


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py)."""
    return shared_client


def test_now_is_above_every_write_acknowledged_before_it_and_below_every_later_one(
    client: Client,
):
    client.create_collection("c", dimension=2)
    before = client.insert("c", ROWS[:1])["timestamp"]
    now = probes.now(client)
    assert before < now < client.insert("c", ROWS[1:2])["timestamp"]
    with probes.stamped(client, "test") as held:
        assert now < held < probes.now(client)


def test_pchannels_are_where_the_collections_records_land(client: Client):
    client.create_collection("c", dimension=2, num_shards=2)
    client.insert("c", ROWS)
    pchannels = probes.pchannels(client, "c")
    cid = client.describe_collection("c")["collection_id"]
    serde, dml = EventSerde(), client.cluster.topics.dml
    landed = {
        r.partition
        for r in read_to_end(client.cluster.log, dml)
        if (e := serde.decode(r.value)).type == "RowsInserted" and e.collection_id == cid
    }
    assert len(pchannels) == 2 and landed == set(pchannels)
    assert set(probes.partition_ids(client, "c")) == {"_default"}
    with pytest.raises(CollectionNotFound):
        probes.pchannels(client, "nothing")


def test_the_query_node_serves_flushed_segments_from_their_index(client: Client):
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", ROWS)
    cid = client.describe_collection("c")["collection_id"]
    probes.caught_up(client)
    assert probes.applied_ts(client, "c") > 0 and probes.holds_collection(client, cid)
    growing = probes.served_segments(client, cid)
    assert sum(s.rows for s in growing) == len(ROWS) and not any(s.indexed for s in growing)
    (flushed,) = client.flush("c")

    def indexed() -> bool:
        served = [s for s in probes.served_segments(client, cid) if s.rows]
        return [(s.segment_id, s.indexed) for s in served] == [(flushed, True)]

    wait_until(indexed, 60, "the flushed segment served from its index")
    assert not probes.holds_collection(client, cid + UNUSED)
    assert probes.served_segments(client, cid + UNUSED) == []


def test_next_offsets_name_the_processors_and_refuse_others(client: Client):
    ddl = client.cluster.topics.ddl
    before = probes.next_offsets(client, "rootcoord").get((ddl, 0), 0)
    client.create_collection("c", dimension=2)
    wait_until(
        lambda: probes.next_offsets(client, "rootcoord")[(ddl, 0)] > before, 10, "the create read"
    )
    with pytest.raises(InvalidArgument, match="'proxy'"):
        probes.next_offsets(client, "proxy")
