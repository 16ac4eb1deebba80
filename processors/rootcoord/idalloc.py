"""The ID allocator (seed 001 s.10.1 AllocId): unique int64 ids handed out in batches.

Ids come from a range reserved durably in the rootcoord's state store (and logged); a restarted
allocator starts after the last reserved range, so an id is never handed out twice.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

from vectorlog.processors.rootcoord.reserve import Reserver
from vectorlog.state.base import StateStore

ID_UPPER_KEY = b"idalloc/upper_bound"
FIRST_ID = 1 << 40  # leaves small ids free for system use and readable in logs


class IdAllocator:
    """Hands out unique int64 ids; reserves `batch` ids per durable write, the next range in
    the background once half of the current one is used (a caller waits only when the saved
    range is used up)."""

    def __init__(
        self,
        store: StateStore,
        batch: int = 100_000,
        on_reserve: Callable[[int], None] | None = None,
    ) -> None:
        """`on_reserve(upper)` runs before a new range is saved (rootcoord logs it);
        `guard()` (None: nothing) runs before each allocation and raises to refuse it."""
        self._store, self._batch, self.on_reserve = store, batch, on_reserve
        self.guard: Callable[[], None] | None = None
        self._cond = threading.Condition(threading.Lock())
        saved = store.get(ID_UPPER_KEY)
        self._next = struct.unpack(">Q", saved)[0] if saved else FIRST_ID
        self._reserver = Reserver(self._cond, self._reserve, "ids", self._next)

    @property
    def saved_upper(self) -> int:
        """Returns the saved upper bound: every id handed out is below it."""
        return self._reserver.saved

    def allocate(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive fresh ids.

        Raises ReservationFailed if the saved range was used up and saving the next failed,
        or what `guard` raises."""
        if count < 1:
            raise ValueError(f"count must be positive, not {count}")
        if self.guard is not None:
            self.guard()
        with self._cond:
            self._reserver.wait_below(
                lambda: self._next + count - 1, lambda: self._next + count + self._batch
            )
            first = self._next
            self._next += count
            if self._next + self._batch // 2 >= self._reserver.saved:
                self._reserver.ahead(max(self._next, self._reserver.saved) + self._batch)
            return first

    def observe(self, upper: int) -> None:
        """Makes every later id >= `upper`: a reservation read from the log that this
        allocator did not make (its own are at or below what it logged)."""
        with self._cond:
            if upper > max(self._next, self._reserver.logged):
                self._next = upper

    def close(self) -> None:
        """Reserves no more; waits for a reservation in progress."""
        self._reserver.close()

    def _reserve(self, upper: int) -> None:
        if self.on_reserve is not None:
            self.on_reserve(upper)
        with self._store.transaction() as txn:
            txn.put(ID_UPPER_KEY, struct.pack(">Q", upper))
