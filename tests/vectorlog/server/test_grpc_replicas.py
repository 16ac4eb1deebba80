"""pymilvus's describe_replica and the ORM's Collection.get_replicas (GetReplicas) on a served
embedded cluster (both log backends): one replica on the one in-process query node, a shard
per vchannel of the collection. Milvus Lite does not serve GetReplicas (UNIMPLEMENTED), so
there is no differential test; the process cluster's replicas are tested in
tests/vectorlog/cluster/test_scaleout.py."""

from __future__ import annotations

import pytest
from pymilvus import Collection, MilvusException, connections

from tests.vectorlog.server.conftest import Served


def test_describe_replica_names_the_collection_and_its_shards(served: Served) -> None:
    m = served.milvus
    m.create_collection("rep_one", dimension=4, num_shards=2)
    m.create_partition("rep_one", "p1")
    desc = m.describe_collection("rep_one")
    found = m.describe_replica("rep_one")
    assert len(found) == 1
    (replica,) = found
    assert replica.id == desc["collection_id"]  # embedded: the collection's one copy
    assert replica.group_nodes == (1,)
    assert replica.resource_group == "__default_resource_group"
    channels = {s.channel_name for s in replica.shards}
    assert len(channels) == 2  # a shard per vchannel
    assert all(s.shard_leader == 1 and s.shard_nodes == {1} for s in replica.shards)


def test_orm_get_replicas_answers_the_same(served: Served) -> None:
    served.milvus.create_collection("rep_orm", dimension=4)
    alias = f"rep_{served.server.port}"
    connections.connect(alias, uri=f"http://{served.address}")
    try:
        groups = Collection("rep_orm", using=alias).get_replicas().groups
    finally:
        connections.disconnect(alias)
    assert [g.id for g in groups] == [served.milvus.describe_collection("rep_orm")["collection_id"]]
    assert groups[0].group_nodes == (1,)


def test_describe_replica_of_a_missing_collection_is_code_100(served: Served) -> None:
    with pytest.raises(MilvusException) as err:
        served.milvus.describe_replica("rep_missing")
    assert err.value.code == 100
