"""The ID allocator (seed 001 s.10.1 AllocId): unique int64 ids handed out in batches.

Ids come from a range reserved durably in the rootcoord's state store; a restarted allocator
starts after the last reserved range, so an id is never handed out twice.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

from vectorlog.processors.state.base import StateStore

ID_UPPER_KEY = b"idalloc/upper_bound"
FIRST_ID = 1 << 40  # leaves small ids free for system use and readable in logs


class IdAllocator:
    """Hands out unique int64 ids; reserves `batch` ids per durable write."""

    def __init__(
        self,
        store: StateStore,
        batch: int = 100_000,
        on_reserve: Callable[[int], None] | None = None,
    ) -> None:
        """`on_reserve(upper)` runs before a new range is saved (rootcoord logs it)."""
        self._store, self._batch, self.on_reserve = store, batch, on_reserve
        self._lock = threading.Lock()
        saved = store.get(ID_UPPER_KEY)
        self._next = self._upper = struct.unpack(">Q", saved)[0] if saved else FIRST_ID

    def allocate(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive fresh ids."""
        if count < 1:
            raise ValueError(f"count must be positive, not {count}")
        with self._lock:
            if self._next + count > self._upper:
                self._reserve(self._next + count + self._batch)
            first = self._next
            self._next += count
            return first

    def observe(self, upper: int) -> None:
        """Makes every later id >= `upper` (a reservation read back from the log)."""
        with self._lock:
            if upper > self._next:
                self._next = self._upper = upper

    def _reserve(self, upper: int) -> None:
        if self.on_reserve is not None:
            self.on_reserve(upper)
        with self._store.transaction() as txn:
            txn.put(ID_UPPER_KEY, struct.pack(">Q", upper))
        self._upper = upper
