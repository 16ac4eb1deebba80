"""With `record_keys` (on by default), records on vectorlog's topics carry keys a sink
can read (UTF-8 text): dml records their vchannel, DDL events their collection id,
segment events their vchannel or segment id, cluster-wide events their type; with it
off, none."""

from __future__ import annotations

from tests.clients import ClientFactory
from vectorlog import Client
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.scan import read_all


def keyed(client: Client, topic: str) -> list[tuple[str, bytes | None]]:
    """Returns (event type, record key) of every record of `topic`."""
    serde = EventSerde()
    return [(serde.decode(r.value).type, r.key) for r in read_all(client.cluster.log, topic)]


def ends(client: Client, topic: str) -> list[int]:
    """Returns the offsets of the end markers (TimeTicks of ts 0) of `topic`."""
    serde = EventSerde()
    return [
        r.offset
        for r in read_all(client.cluster.log, topic)
        if (e := serde.decode(r.value)).type == "TimeTick" and e.ts == 0
    ]


def test_with_record_keys_off_no_event_record_is_keyed(open_client: ClientFactory):
    client = open_client(record_keys=False)
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": 1, "vector": [1.0, 1.0]}])
    topics = client.cluster.topics
    assert {key for t in (topics.dml, topics.ddl) for _, key in keyed(client, t)} == {None}


def test_every_event_record_is_keyed_by_default(open_client: ClientFactory):
    client = open_client()
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": i, "vector": [float(i), 1.0]} for i in range(4)])
    client.delete("c", ids=[1])
    client.flush("c")
    info = client.describe_collection("c")
    cid, (vch,) = str(info["collection_id"]).encode(), info["virtual_channel_names"]
    topics = client.cluster.topics
    dml, ddl, coord = (keyed(client, t) for t in (topics.dml, topics.ddl, topics.coord))
    data = [
        key for kind, key in dml if kind in ("RowsInserted", "RowsDeleted", "CollectionCreated")
    ]
    assert data and set(data) == {vch.encode()}
    assert ("CollectionCreated", cid) in ddl
    assert {key for kind, key in ddl if kind == "RangeReserved"} <= {b"RangeReserved"}
    (segment,) = client.list_segments("c")
    assert ("SegmentFlushed", str(segment["segment_id"]).encode()) in coord
    assert ("SegmentsSealed", b"SegmentsSealed") in coord
    markers = [r for t in (topics.dml, topics.ddl, topics.coord) for r in ends(client, t)]
    unkeyed = [k for k, key in dml + ddl + coord if not key]
    assert len(unkeyed) == len(markers)  # only the tools' end markers (ts 0) are unkeyed
