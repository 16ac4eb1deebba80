"""The embedded log's size index: how many bytes a partition holds from any offset on, without
reading its records (for retention by size, `streams.retention`).

Key layout (next to the records' in `streams.log.embedded`):
    SIZE + topic + SEP + partition(4) + offset(8)  -> u64 position: the stored bytes (frames)
                                                      of the partition's records before it
Written in the same WriteBatch as its record and deleted with it, so the bytes held from
offset `o` on are `end position - position(o)`: one point read. A data dir written before the
index existed gets it at open (`backfill`, one scan of each partition).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from rocksdict import Rdict, WriteBatch

SIZE = b"\x04b:"
SEP = b"\x00"
#: index entries written per batch by `backfill`
BACKFILL_BATCH = 10_000


def size_key(topic: str, partition: int, offset: int) -> bytes:
    """Returns the key of one record's position."""
    return SIZE + topic.encode() + SEP + struct.pack(">IQ", partition, offset)


def packed(position: int) -> bytes:
    """Returns the stored form of a position."""
    return struct.pack(">Q", position)


def position_at(db: Rdict, topic: str, partition: int, offset: int) -> int | None:
    """Returns the position of the record at `offset`, or None if it has no index entry."""
    raw = db.get(size_key(topic, partition, offset))
    return None if raw is None else int(struct.unpack(">Q", bytes(raw))[0])


def backfill(
    write: Callable[[WriteBatch], None],
    topic: str,
    partition: int,
    sizes: Iterable[tuple[int, int]],
) -> int:
    """Writes the index entries of a partition's records, `sizes` being their (offset, stored
    length) in offset order, `BACKFILL_BATCH` per `write`; returns the end position (the
    first record's is 0). Raises what `write` raises."""
    pos, wb, n = 0, WriteBatch(raw_mode=True), 0
    for offset, length in sizes:
        wb.put(size_key(topic, partition, offset), packed(pos))
        pos, n = pos + length, n + 1
        if n % BACKFILL_BATCH == 0:
            write(wb)
            wb = WriteBatch(raw_mode=True)
    if n % BACKFILL_BATCH:
        write(wb)
    return pos
