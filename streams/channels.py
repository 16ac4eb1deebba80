"""vchannels, pchannels and primary-key routing (seed 004).

A collection has `shards_num` vchannels; vchannel i of collection c is multiplexed onto the
dml partition (pchannel) `(c + i) % P`, recorded in the CollectionCreated event so the
mapping never has to be recomputed. A row goes to vchannel `hash(pk) % shards_num`, where the
hash is stable across processes, machines and Python versions:
  * INT64 keys: the murmur3 64-bit finalizer (fmix64) of the key as an unsigned 64-bit int,
    low 32 bits;
  * VARCHAR keys: CRC-32 (IEEE, zlib) of the key's UTF-8 bytes.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


def vchannel_name(cluster: str, pchannel: int, collection_id: int, shard: int) -> str:
    """Returns the name of one vchannel, e.g. `vectorlog-dml_2_1099511627776v0`."""
    return f"{cluster}-dml_{pchannel}_{collection_id}v{shard}"


def pchannel_of(vchannel: str) -> int | None:
    """Returns the pchannel a vchannel name (`vchannel_name`) lies on; None if it is not
    such a name."""
    tail = vchannel.rpartition("-dml_")[2].split("_", 1)[0]
    return int(tail) if tail.isdigit() else None


def assign_pchannels(collection_id: int, shards_num: int, num_pchannels: int) -> list[int]:
    """Returns the pchannel (dml partition) of each of a collection's vchannels."""
    return [(collection_id + i) % num_pchannels for i in range(shards_num)]


def hash_int64(keys: np.ndarray) -> np.ndarray:
    """Returns the uint32 fmix64 hash of each int64 key (vectorized)."""
    h = keys.astype(np.int64).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        h ^= h >> _S33
        h *= _C1
        h ^= h >> _S33
        h *= _C2
        h ^= h >> _S33
    return (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def hash_str(keys: Sequence[str]) -> np.ndarray:
    """Returns the uint32 CRC-32 of each key's UTF-8 bytes."""
    return np.fromiter((zlib.crc32(k.encode()) for k in keys), dtype=np.uint32, count=len(keys))


def shard_of(keys: np.ndarray | Sequence[str], shards_num: int) -> np.ndarray:
    """Returns the vchannel index (0..shards_num-1) of each primary key."""
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
        h = hash_int64(keys)
    else:
        h = hash_str(list(keys))
    return (h % np.uint32(shards_num)).astype(np.int64)
