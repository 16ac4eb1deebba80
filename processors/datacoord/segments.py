"""Segment assignment for inserts (seed 004): rows go to the growing segment of their
(collection, partition, vchannel) until it holds its estimated capacity (75 % of the maximum
segment size), then a new segment id is taken from the ID allocator.

This is the allocation half of DataCoord only: sealing on flush or lifetime, allocation
expiry and the flushed state machine belong to the flush work and are not here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

MAX_SEGMENT_BYTES = 512 << 20
SEAL_PROPORTION = 0.75


class SegmentAllocator:
    """Hands out (segment id, rows) assignments for growing segments."""

    def __init__(self, new_id: Callable[[], int], max_bytes: int = MAX_SEGMENT_BYTES) -> None:
        self._new_id, self._max_bytes = new_id, max_bytes
        self._lock = threading.Lock()
        self._growing: dict[tuple[int, int, str], list[int]] = {}  # key -> [id, rows]

    def assign(
        self, collection: int, partition: int, vchannel: str, rows: int, row_bytes: int
    ) -> list[tuple[int, int]]:
        """Returns [(segment id, rows)] covering `rows` rows, filling segments in turn."""
        capacity = max(1, int(self._max_bytes * SEAL_PROPORTION) // max(1, row_bytes))
        out, key = [], (collection, partition, vchannel)
        with self._lock:
            while rows > 0:
                seg = self._growing.get(key)
                if seg is None or seg[1] >= capacity:
                    seg = self._growing[key] = [self._new_id(), 0]
                take = min(rows, capacity - seg[1])
                seg[1] += take
                rows -= take
                out.append((seg[0], take))
        return out
