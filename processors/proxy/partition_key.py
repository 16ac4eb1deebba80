"""Partition key routing as Milvus does it (typeutil.HashKey2Partitions): a row goes to
partition `_default_{hash(key) % n}` of a collection created with `n` partitions, where the
hash is murmur3-32 (seed 0) of an INT64 key's 8 little-endian bytes, masked to 31 bits, or the
CRC-32 (IEEE) of a VARCHAR key's first 100 UTF-8 bytes. A filter that names the key's values
(`key == v`, `key in [...]`, their `or`s, and any `and` holding one) reads only their
partitions."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import DEFAULT_PARTITION, CollectionInfo, DataType

if TYPE_CHECKING:
    from vectorlog.expr import Expr

#: Milvus's messages for partition names given to a collection with a partition key
NAMED_PARTITIONS = (
    "not support manually specifying the partition names if partition key mode is used"
)
_NAME = re.compile(rf"{DEFAULT_PARTITION}_(\d+)")
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
#: Milvus hashes at most this many bytes of a VARCHAR key (substringLengthForCRC)
CRC_PREFIX = 100


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmur3_int64(keys: np.ndarray) -> np.ndarray:
    """Returns Milvus's Hash32Int64 of each key: murmur3 x86-32 (seed 0) of its 8
    little-endian bytes, & 0x7fffffff (vectorized)."""
    words = np.ascontiguousarray(keys, dtype="<i8").view("<u4").reshape(-1, 2).astype(np.uint32)
    h = np.zeros(len(words), np.uint32)
    with np.errstate(over="ignore"):
        for i in (0, 1):
            k = _rotl(words[:, i] * _C1, 15) * _C2
            h = _rotl(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h & np.uint32(0x7FFFFFFF)


def crc_strings(keys: Sequence[str]) -> np.ndarray:
    """Returns Milvus's HashString2Uint32 of each key: CRC-32 of its first 100 bytes."""
    out = (zlib.crc32(k.encode()[:CRC_PREFIX]) for k in keys)
    return np.fromiter(out, dtype=np.uint32, count=len(keys))


def partition_index(dtype: DataType, keys: Any) -> Any:
    """Returns the hash of each key (before the modulo), as Milvus computes it."""
    if dtype is DataType.INT64:
        return murmur3_int64(np.asarray(keys, dtype=np.int64))
    return crc_strings(list(keys))


def ordered_partitions(info: CollectionInfo) -> list[int]:
    """Returns the ids of a partition-key collection's partitions in suffix order (the
    order the hash modulo indexes, as Milvus's RearrangePartitionsForPartitionKey)."""
    found = {}
    for name, pid in info.partitions.items():
        m = _NAME.fullmatch(name)
        if m:
            found[int(m.group(1))] = pid
    return [found[i] for i in sorted(found)]


def route(info: CollectionInfo, keys: Any) -> Iterator[tuple[int, np.ndarray]]:
    """Yields (partition id, row indices) for every partition that receives rows of `keys`
    (the key column of an insert)."""
    field = info.schema.partition_key
    assert field is not None
    parts = ordered_partitions(info)
    of = partition_index(field.dtype, keys) % np.uint32(len(parts))
    for i in np.unique(of).tolist():
        yield parts[i], np.flatnonzero(of == i)


def read_partitions(
    info: CollectionInfo, names: list[str] | None, expr: Expr | None
) -> list[int] | None:
    """Returns the partitions a read of a partition-key collection reads: those of the key
    values `expr` restricts the key to, or None (every one). Raises InvalidArgument if the
    read names partitions (Milvus's message)."""
    field = info.schema.partition_key
    assert field is not None
    if names:
        raise InvalidArgument(NAMED_PARTITIONS)
    values = None if expr is None else expr.key_values(field.name)
    if values is None:
        return None
    parts = ordered_partitions(info)
    of = partition_index(field.dtype, values) % np.uint32(len(parts))
    return sorted({parts[i] for i in of.tolist()})
