"""Reserving ahead (issue 7, item 15): the timestamp oracle and the ID allocator hand out values
below a bound that is durably saved, and save the next bound in the background before they
reach it, so no caller waits for the log or the disk unless the saved bound is actually reached.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from vectorlog.core.errors import VectorlogError

log = logging.getLogger(__name__)

#: after a failed reservation ahead, the next one ahead is not tried before this many seconds
#: (a caller that reaches the bound always tries at once)
RETRY_AHEAD_S = 0.5


class ReservationFailed(VectorlogError):
    """Saving a new bound failed (the log or the state store refused it); names the cause.
    Nothing above the saved bound was handed out."""

    def __init__(self, what: str, bound: int, cause: BaseException) -> None:
        super().__init__(
            f"reserving {what} up to {bound} failed ({type(cause).__name__}: {cause}); "
            "nothing above the saved bound was handed out"
        )
        self.what, self.bound, self.cause = what, bound, cause


class Reserver:
    """Saves bounds one at a time on a background thread. Every method but `close` must be
    called holding `cond` (the owner's lock); `saved` only grows, once a save returned."""

    def __init__(
        self, cond: threading.Condition, save: Callable[[int], None], what: str, saved: int
    ) -> None:
        self._cond, self._save, self.what = cond, save, what
        self.saved = saved
        self.logged = saved  # the largest bound ever passed to `save` (it may be on the log)
        self._started = self._finished = 0  # attempts started, attempts finished
        self._failed: tuple[int, ReservationFailed] | None = None  # attempt, error
        self._retry_at = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self.saves = 0  # bounds saved: for tests and metrics

    def ahead(self, bound: int) -> None:
        """Starts saving `bound` unless a save is running or one failed moments ago."""
        if self._thread is None and not self._closed and time.monotonic() >= self._retry_at:
            self._start(bound)

    def wait_below(self, needed: Callable[[], int], bound: Callable[[], int]) -> None:
        """Returns once `needed()` (re-evaluated after each wait) is below `saved`, starting a
        save of `bound()` whenever none is running. Raises ReservationFailed if a save this
        call started failed (one started before it failing, e.g. while the log was down, makes
        it start its own)."""
        own = self._started + 1  # the first attempt this call can have started
        while needed() >= self.saved:
            if self._closed:
                raise ReservationFailed(self.what, bound(), VectorlogError("closed"))
            if self._thread is None:
                self._start(bound())
            attempt = self._started
            while self._finished < attempt:
                self._cond.wait()
            if self._failed is not None and self._failed[0] == attempt and attempt >= own:
                raise self._failed[1]

    def _start(self, bound: int) -> None:
        self._started += 1
        self.logged = max(self.logged, bound)
        self._thread = threading.Thread(
            target=self._run, args=(self._started, bound), name=f"reserve-{self.what}", daemon=True
        )
        self._thread.start()

    def _run(self, attempt: int, bound: int) -> None:
        error: ReservationFailed | None = None
        try:
            self._save(bound)
        except Exception as exc:
            error = ReservationFailed(self.what, bound, exc)
            error.__cause__ = exc
            log.warning("%s", error)
        with self._cond:
            if error is None:
                self.saved, self.saves = max(self.saved, bound), self.saves + 1
            else:
                self._failed, self._retry_at = (attempt, error), time.monotonic() + RETRY_AHEAD_S
            self._finished, self._thread = attempt, None
            self._cond.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        """Starts no more saves; waits (up to `timeout` s) for one in progress. Call it
        without holding `cond`."""
        with self._cond:
            self._closed, thread = True, self._thread
        if thread is not None:
            thread.join(timeout)
