"""The timestamp oracle (seed 001 s.4): hybrid timestamps with a persisted upper bound.

A hybrid timestamp is `physical_ms << 18 | logical` (46-bit physical milliseconds, 18-bit
logical counter). The oracle hands out strictly increasing timestamps in batches. Before it
hands out a physical time at or past the saved bound, it durably saves a new bound `window`
ms ahead; a restarted oracle starts at the saved bound, so it never returns a timestamp at
or below one it returned before, even if the wall clock went backwards.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

from vectorlog.hybridts import (  # noqa: F401  (re-exported: the oracle's vocabulary)
    LOGICAL_BITS,
    LOGICAL_MASK,
    MAX_LOGICAL,
    compose,
    logical,
    physical_ms,
    wall_ms,
)
from vectorlog.processors.state.base import StateStore

TSO_UPPER_KEY = b"tso/upper_bound"


class TimestampOracle:
    """Allocates hybrid timestamps; its upper bound lives in the rootcoord's state store."""

    def __init__(
        self,
        store: StateStore,
        save_window_ms: int = 3000,
        clock: Callable[[], int] = wall_ms,
        on_reserve: Callable[[int], None] | None = None,
    ) -> None:
        """`on_reserve(bound)` runs before a new bound is saved (rootcoord logs it)."""
        self._store, self._window, self._clock = store, save_window_ms, clock
        self.on_reserve = on_reserve
        self._lock = threading.Lock()
        saved = store.get(TSO_UPPER_KEY)
        self._saved = struct.unpack(">Q", saved)[0] if saved is not None else 0
        self._physical, self._logical = self._saved, 0

    def allocate(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive fresh timestamps (count < 2**18)."""
        if not 0 < count < MAX_LOGICAL:
            raise ValueError(f"count must be in 1..{MAX_LOGICAL - 1}, not {count}")
        with self._lock:
            now = self._clock()
            if now > self._physical:
                self._physical, self._logical = now, 0
            if self._logical + count > MAX_LOGICAL:
                self._physical, self._logical = self._physical + 1, 0
            if self._physical >= self._saved:
                self._save(self._physical + self._window)
            first = compose(self._physical, self._logical)
            self._logical += count
            return first

    def now(self) -> int:
        """Returns one fresh timestamp."""
        return self.allocate(1)

    def observe(self, ts: int) -> None:
        """Makes every later timestamp greater than `ts` (one seen on the log, say)."""
        with self._lock:
            if (physical_ms(ts), logical(ts)) >= (self._physical, self._logical):
                self._physical, self._logical = physical_ms(ts), logical(ts) + 1
                if self._logical >= MAX_LOGICAL:
                    self._physical, self._logical = self._physical + 1, 0

    def observe_bound(self, bound_ms: int) -> None:
        """Makes every later timestamp's physical part >= `bound_ms` (a logged reservation)."""
        with self._lock:
            if bound_ms > self._physical:
                self._physical, self._logical = bound_ms, 0

    def _save(self, bound: int) -> None:
        if self.on_reserve is not None:
            self.on_reserve(bound)
        with self._store.transaction() as txn:
            txn.put(TSO_UPPER_KEY, struct.pack(">Q", bound))
        self._saved = bound
