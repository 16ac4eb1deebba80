"""Numeric ids of query coordination, as Milvus's: a node id for each registration of a query
node (Milvus's node ids are session ids, new whenever a node starts; here new for each
(name, epoch), so a restart or a re-registration after being declared dead gets a new one)
and a replica id for each copy of a collection loaded with replica_number R. Both come from
counters kept in the assignment on coord, so they are never reused and survive a restart of
the coordinator. Pure functions, tested without processes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: a query node registration: (name, epoch)
NodeKey = tuple[str, int]


def number_nodes(
    current: Mapping[NodeKey, int], next_id: int, live: Iterable[NodeKey]
) -> tuple[dict[NodeKey, int], int]:
    """Returns (the node id of each live registration, the next free id): a registration
    that had one keeps it, the new ones get the next ids in order of (epoch, name)."""
    ids: dict[NodeKey, int] = {}
    for key in sorted(set(live), key=lambda k: (k[1], k[0])):
        if key in current:
            ids[key] = current[key]
        else:
            ids[key], next_id = next_id, next_id + 1
    return ids, next_id


def number_replicas(
    current: Mapping[int, tuple[int, ...]], next_id: int, wanted: Mapping[int, int]
) -> tuple[dict[int, tuple[int, ...]], int]:
    """Returns (the replica ids of each collection in `wanted`, by copy, the next free id):
    a collection keeps the ids of its first `wanted` copies, and more copies get new ids."""
    ids: dict[int, tuple[int, ...]] = {}
    for cid in sorted(wanted):
        kept = list(current.get(cid, ())[: wanted[cid]])
        while len(kept) < wanted[cid]:
            kept.append(next_id)
            next_id += 1
        ids[cid] = tuple(kept)
    return ids, next_id
