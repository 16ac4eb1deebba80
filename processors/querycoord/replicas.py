"""What GetReplicas answers (Milvus's ReplicaInfo and ShardReplica), read off the query
assignment: for each replica id a loaded collection has, the node ids serving its copy and,
per shard (dml vchannel), the leader node id and address and the nodes serving it. The unit
served is a pchannel with its Flushed segments, so a shard's leader is the only node serving
it in its replica."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vectorlog.processors.querycoord.assignment import Assignment
from vectorlog.processors.querycoord.errors import ChannelNotFound, ReplicaNotFound

#: the resource group every query node is in (Milvus's default one; vectorlog has no others)
DEFAULT_RESOURCE_GROUP = "__default_resource_group"


@dataclass(frozen=True)
class Loaded:
    """What GetReplicas needs of a collection: its id, partition ids, shards and their
    pchannels (in the same order)."""

    collection_id: int
    partition_ids: list[int]
    vchannels: list[str]
    pchannels: list[int]


def replicas_of(a: Assignment, c: Loaded) -> list[dict[str, Any]]:
    """Returns one dict per replica of collection `c` (replica_id, collection_id,
    partition_ids, node_ids, resource_group, shards: channel_name, leader_id,
    leader_address, node_ids). Raises ReplicaNotFound if it was never loaded,
    ChannelNotFound if a shard of a replica has no node serving it now."""
    ids = a.collections.get(c.collection_id)
    if not ids:
        raise ReplicaNotFound(c.collection_id)
    out: list[dict[str, Any]] = []
    for copy, replica_id in enumerate(ids):
        shards = []
        for vchannel, p in zip(c.vchannels, c.pchannels, strict=True):
            owner = a.owners.get((p, copy))
            node_id = a.node_ids.get(owner.key) if owner is not None else None
            if owner is None or node_id is None:
                raise ChannelNotFound(vchannel)
            shards.append(_shard(vchannel, node_id, owner.address))
        out.append(_replica(replica_id, c, shards))
    return out


def single_node(c: Loaded, node_id: int = 1, address: str = "") -> list[dict[str, Any]]:
    """Returns the one replica of collection `c` in the embedded mode, where one in-process
    query node (`node_id`) serves every shard: its replica id is the collection's id."""
    shards = [_shard(v, node_id, address) for v in c.vchannels]
    return [_replica(c.collection_id, c, shards)]


def _shard(channel: str, node_id: int, address: str) -> dict[str, Any]:
    return {
        "channel_name": channel,
        "leader_id": node_id,
        "leader_address": address,
        "node_ids": [node_id],
    }


def _replica(replica_id: int, c: Loaded, shards: list[dict[str, Any]]) -> dict[str, Any]:
    nodes = sorted({int(s["leader_id"]) for s in shards})
    return {
        "replica_id": replica_id,
        "collection_id": c.collection_id,
        "partition_ids": list(c.partition_ids),
        "node_ids": nodes,
        "resource_group": DEFAULT_RESOURCE_GROUP,
        "shards": shards,
    }
