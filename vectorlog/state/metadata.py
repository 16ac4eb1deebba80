"""What a state store keeps beside its state: the format version and the consumed log positions.

Both live in their own key space (RocksDB: the `__meta__` column family), never in the state's:
    FORMAT_VERSION_KEY                          -> format version, 4 bytes big-endian
    POSITION_PREFIX + topic + b"\\x00" + p(>I)  -> next offset to consume, 8 bytes big-endian
A position is the offset of the next record to consume (the eventsourcing `Tracking` record,
the Kafka committed offset): after applying the record at offset o, the position is o + 1.

Format versions: 0 is the layout before the state store (no meta key space; a processor kept
its position as a raw key among its state), migrated on open; 1 is this layout; 2 is 1 whose
state may hold records a build knowing only 1 would misread without an error (the data node's
primary-key index deltas, processors/datanode/pkindex.py): a store goes from 1 to 2 in the
transaction that first writes one (`Transaction.set_format_version`), so such a build refuses it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from vectorlog.state.errors import InvalidStateKey

#: Name of the RocksDB column family holding the format version and the positions.
META_CF = "__meta__"
#: The format this code writes on a store's first open; a store with a version not in
#: FORMAT_VERSIONS (a newer one) is refused on open.
FORMAT_VERSION = 1
#: The formats this code reads (2: records an older build misreads, written by some processors).
FORMAT_VERSIONS = (1, 2)
FORMAT_VERSION_KEY = b"format_version"
POSITION_PREFIX = b"position\x00"
_SEP = b"\x00"

TopicPartition = tuple[str, int]
LegacyPositions = Mapping[bytes, TopicPartition]
"""Format 0 keys in the state key space holding a position (8 bytes big-endian), and the
(topic, partition) each belongs to: moved into the meta key space when the store is migrated."""


def encode_version(version: int) -> bytes:
    """Returns the stored form of a format version."""
    return struct.pack(">I", version)


def decode_version(raw: bytes) -> int:
    """Returns the format version stored as `raw` (-1 if it is not 4 bytes: unknown)."""
    return int(struct.unpack(">I", raw)[0]) if len(raw) == 4 else -1


def position_key(topic: str, partition: int) -> bytes:
    """Returns the meta key of a (topic, partition). Raises InvalidStateKey."""
    if not isinstance(topic, str) or not topic or "\x00" in topic:
        raise InvalidStateKey(f"topic must be a non-empty str without '\\x00', not {topic!r}")
    if type(partition) is not int or not 0 <= partition < 1 << 32:
        raise InvalidStateKey(f"partition must be an int in [0, 2**32), not {partition!r}")
    return POSITION_PREFIX + topic.encode("utf-8") + _SEP + struct.pack(">I", partition)


def decode_position_key(key: bytes) -> TopicPartition:
    """Returns the (topic, partition) of a meta key made by `position_key`."""
    body = key[len(POSITION_PREFIX) :]
    return body[:-5].decode("utf-8"), int(struct.unpack(">I", body[-4:])[0])


def encode_offset(offset: int) -> bytes:
    """Returns the stored form of a position. Raises InvalidStateKey if out of range."""
    if type(offset) is not int or not 0 <= offset < 1 << 64:
        raise InvalidStateKey(f"offset must be an int in [0, 2**64), not {offset!r}")
    return struct.pack(">Q", offset)


def decode_offset(raw: bytes) -> int:
    """Returns the position stored as `raw` (8 bytes big-endian; empty means 0)."""
    return int(struct.unpack(">Q", raw)[0]) if raw else 0
