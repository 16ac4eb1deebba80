"""The timestamp oracle (seed 001 s.4): hybrid timestamps with a persisted upper bound.

A hybrid timestamp is `physical_ms << 18 | logical` (46-bit physical milliseconds, 18-bit
logical counter). The oracle hands out strictly increasing timestamps in batches, each below
a durably saved bound; it saves the next bound (`window` ms ahead) in the background before
the clock reaches the saved one. A restarted oracle starts at the saved bound, so it never
returns a timestamp at or below one it returned before, even if the wall clock went backwards.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

from vectorlog.core.hybridts import (  # noqa: F401  (re-exported: the oracle's vocabulary)
    LOGICAL_BITS,
    LOGICAL_MASK,
    MAX_LOGICAL,
    compose,
    logical,
    physical_ms,
    wall_ms,
)
from vectorlog.processors.rootcoord.reserve import Reserver
from vectorlog.state.base import StateStore

TSO_UPPER_KEY = b"tso/upper_bound"


class TimestampOracle:
    """Allocates hybrid timestamps; its upper bound lives in the rootcoord's state store.

    A timestamp is handed out only below a bound that is saved (state store) and logged
    (`on_reserve`). The next bound is saved in the background once the clock comes within
    half a window of the saved one, so stamping goes on meanwhile; a caller waits only when
    the saved bound is reached, and never while a save holds the oracle's lock.
    """

    def __init__(
        self,
        store: StateStore,
        save_window_ms: int = 3000,
        clock: Callable[[], int] = wall_ms,
        on_reserve: Callable[[int], None] | None = None,
    ) -> None:
        """`on_reserve(bound)` runs before a new bound is saved (rootcoord logs it);
        `guard()` (None: nothing) runs before each allocation and raises to refuse it."""
        self._store, self._window, self._clock = store, save_window_ms, clock
        self.on_reserve = on_reserve
        self.guard: Callable[[], None] | None = None
        self._cond = threading.Condition(threading.Lock())
        saved = store.get(TSO_UPPER_KEY)
        bound = struct.unpack(">Q", saved)[0] if saved is not None else 0
        self._reserver = Reserver(self._cond, self._save, "timestamps", bound)
        self._physical, self._logical = bound, 0

    @property
    def saved_bound(self) -> int:
        """Returns the saved bound (ms): every timestamp handed out is below it."""
        return self._reserver.saved

    @property
    def window_ms(self) -> int:
        """Returns how far ahead of the clock a bound is saved."""
        return self._window

    def reach_ms(self) -> int:
        """Returns the largest physical time this oracle has handed out, observed or saved."""
        with self._cond:
            return max(self._physical, self._reserver.saved)

    @property
    def reservations(self) -> int:
        """Returns how many bounds this oracle saved."""
        return self._reserver.saves

    def allocate(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive fresh timestamps (count < 2**18).

        Raises ReservationFailed if the bound was reached and saving the next one failed,
        or what `guard` raises."""
        if not 0 < count < MAX_LOGICAL:
            raise ValueError(f"count must be in 1..{MAX_LOGICAL - 1}, not {count}")
        if self.guard is not None:
            self.guard()
        with self._cond:
            self._reserver.wait_below(lambda: self._advance(count), self._next_bound)
            first = compose(self._physical, self._logical)
            self._logical += count
            if self._physical + self._window // 2 >= self._reserver.saved:
                self._reserver.ahead(self._next_bound())
            return first

    def _advance(self, count: int) -> int:
        """Moves to the clock (never back) and past a full logical counter; returns the
        physical part the next `count` timestamps get."""
        now = self._clock()
        if now > self._physical:
            self._physical, self._logical = now, 0
        if self._logical + count > MAX_LOGICAL:
            self._physical, self._logical = self._physical + 1, 0
        return self._physical

    def _next_bound(self) -> int:
        return max(self._physical, self._reserver.saved) + self._window

    def now(self) -> int:
        """Returns one fresh timestamp."""
        return self.allocate(1)

    def observe(self, ts: int) -> None:
        """Makes every later timestamp greater than `ts` (one seen on the log, say)."""
        with self._cond:
            if (physical_ms(ts), logical(ts)) >= (self._physical, self._logical):
                self._physical, self._logical = physical_ms(ts), logical(ts) + 1
                if self._logical >= MAX_LOGICAL:
                    self._physical, self._logical = self._physical + 1, 0

    def observe_bound(self, bound_ms: int) -> None:
        """Makes every later timestamp's physical part >= `bound_ms`: a reservation read
        from the log that this oracle did not make (its own are at or below what it logged)."""
        with self._cond:
            if bound_ms > max(self._physical, self._reserver.logged):
                self._physical, self._logical = bound_ms, 0

    def close(self) -> None:
        """Reserves no more; waits for a reservation in progress."""
        self._reserver.close()

    def _save(self, bound: int) -> None:
        if self.on_reserve is not None:
            self.on_reserve(bound)
        with self._store.transaction() as txn:
            txn.put(TSO_UPPER_KEY, struct.pack(">Q", bound))
