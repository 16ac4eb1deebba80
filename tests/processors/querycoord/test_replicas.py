"""GetReplicas' view of the query assignment (processors.querycoord.replicas): a replica per
replica id of a loaded collection, each shard led by the node serving that copy of its
pchannel (its node id and address); a collection never loaded, or a copy whose node died and
is not served again yet, is refused as Milvus's query coordinator refuses it."""

from __future__ import annotations

import pytest

from vectorlog.processors.querycoord.assignment import Assignment, Owner
from vectorlog.processors.querycoord.errors import ChannelNotFound, ReplicaNotFound
from vectorlog.processors.querycoord.replicas import Loaded, replicas_of

A, B = Owner("qa", 10, "10.0.0.1:1"), Owner("qb", 11, "10.0.0.2:1")
DOCS = Loaded(7, [70, 71], ["dml_0_7v0", "dml_2_7v1"], [0, 2])


def assignment(owners: dict[tuple[int, int], Owner]) -> Assignment:
    return Assignment(
        version=3,
        owners=owners,
        replicas=2,
        node_ids={A.key: 4, B.key: 5},
        collections={7: (20, 21)},
    )


def test_each_replica_lists_its_shards_leaders_and_nodes():
    owners = {(0, 0): A, (2, 0): B, (0, 1): B, (2, 1): A}
    first, second = replicas_of(assignment(owners), DOCS)
    assert (first["replica_id"], second["replica_id"]) == (20, 21)
    assert first["collection_id"] == 7 and first["partition_ids"] == [70, 71]
    assert first["node_ids"] == [4, 5]
    leaders = [(s["channel_name"], s["leader_id"], s["leader_address"]) for s in first["shards"]]
    assert leaders == [("dml_0_7v0", 4, "10.0.0.1:1"), ("dml_2_7v1", 5, "10.0.0.2:1")]
    assert [s["node_ids"] for s in first["shards"]] == [[4], [5]]
    assert [s["leader_id"] for s in second["shards"]] == [5, 4]


def test_a_copy_without_a_serving_node_is_channel_not_found():
    with pytest.raises(ChannelNotFound, match=r"channel not found\[channel=dml_2_7v1\]"):
        replicas_of(assignment({(0, 0): A, (2, 0): B, (0, 1): B}), DOCS)


def test_a_collection_never_loaded_has_no_replica():
    with pytest.raises(ReplicaNotFound, match=r"replica not found\[replica=8\]"):
        replicas_of(assignment({}), Loaded(8, [80], ["dml_0_8v0"], [0]))
