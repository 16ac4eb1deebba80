"""`FetchedAfter`: concurrent callers share one fetch of a value, each getting the answer of a
fetch that began after it called (never an older one).

Some answers are only right for a request if they were asked after the request began: the
end of the ddl topic (every DDL acknowledged before the request is below it) and a Strong
read's timestamp (above every write acknowledged before the read). Such a fetch begun after
several requests began serves them all: under load a proxy asks once per round trip instead
of once per request, and one caller alone asks once per call, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class FetchedAfter(Generic[T]):
    """`get()` returns the value of a `fetch()` begun after `get` was called; calls made while
    one is in flight wait for it to end and share the next one."""

    def __init__(self, fetch: Callable[[], T]) -> None:
        self._fetch = fetch
        self._cond = threading.Condition()
        self._begun = 0  # fetches begun, numbered from 1
        self._running = False
        self._done = 0  # the number of the last fetch that ended
        self._result: tuple[T | None, BaseException | None] = (None, None)
        self.fetches = 0  # fetches made (what `get` saves shows against the calls)
        self.waiting = 0  # calls waiting for a fetch in flight to end

    def get(self) -> T:
        """Returns the value of a fetch begun after this call; raises what that fetch raised."""
        with self._cond:
            need = self._begun + 1
            while self._done < need:
                if not self._running:
                    self._running = True
                    self._begun += 1
                    break
                self.waiting += 1
                self._cond.wait()
                self.waiting -= 1
            else:
                return self._answer()
            mine = self._begun
        try:
            result: tuple[T | None, BaseException | None] = (self._fetch(), None)
        except BaseException as exc:  # shared with the callers waiting for this fetch
            result = (None, exc)
        with self._cond:
            self._running = False
            self._done, self._result = mine, result
            self.fetches += 1
            self._cond.notify_all()
            return self._answer()

    def _answer(self) -> T:
        value, error = self._result
        if error is not None:
            raise error
        return value  # type: ignore[return-value]  # a fetch that did not raise returned it
