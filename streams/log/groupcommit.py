"""Group commit: concurrent appends to one log written as one durable write.

Each caller queues its request and waits. The first caller that finds no write under way
becomes the leader: it takes every request queued so far (its own included), commits them
with one call (one synced RocksDB write for the embedded log), hands each request its own
result, and wakes the others; a request queued while that write ran is taken by the next
leader. Each caller still returns only once its own records are durable, and a failed write
fails every request it carried (none of them was written: the write is one batch).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Req = TypeVar("Req")
Res = TypeVar("Res")


@dataclass
class _Pending(Generic[Req, Res]):
    request: Req
    result: Res | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class GroupStats:
    """How many requests were committed, in how many writes (a ratio above 1 is the gain)."""

    requests: int = 0
    writes: int = 0
    largest_group: int = 0


@dataclass
class GroupCommit(Generic[Req, Res]):
    """Runs `commit(requests) -> results` (one result per request, in order) for groups of
    concurrent `submit` calls; `commit` raising fails the whole group."""

    commit: Callable[[Sequence[Req]], list[Res]]
    stats: GroupStats = field(default_factory=GroupStats)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _queue: list[_Pending[Req, Res]] = field(default_factory=list)
    _leading: bool = False

    @property
    def queued(self) -> int:
        """Returns how many requests wait for the next write."""
        with self._cond:
            return len(self._queue)

    def submit(self, request: Req) -> Res:
        """Returns `request`'s result once the write that carried it completed. Raises what
        that write raised. A caller that finds no write under way and none queued commits
        its request alone at once (`_alone`)."""
        with self._cond:
            alone = not self._leading and not self._queue
            if alone:
                self._leading = True
            else:
                mine: _Pending[Req, Res] = _Pending(request)
                self._queue.append(mine)
                while self._leading and not mine.done:
                    self._cond.wait()
                if not mine.done:
                    self._leading, group, self._queue = True, self._queue, []
        if alone:
            return self._alone(request)
        if not mine.done:
            self._lead(group)
        if mine.error is not None:
            raise mine.error
        return mine.result  # type: ignore[return-value]

    def _alone(self, request: Req) -> Res:
        """Commits `request` as a group of its own (this caller leads: no _Pending, no
        hand-out), then lets the next leader in; returns its result once written."""
        try:
            return self.commit([request])[0]
        finally:
            with self._cond:
                self._written(1)

    def _lead(self, group: list[_Pending[Req, Res]]) -> None:
        """Commits `group` and hands out its results, then lets the next leader in."""
        try:
            results = self.commit([p.request for p in group])
            for p, res in zip(group, results, strict=True):
                p.result = res
        except BaseException as exc:  # every request of the group fails with the write
            for p in group:
                p.error = exc
        finally:
            with self._cond:
                for p in group:
                    p.done = True
                self._written(len(group))

    def _written(self, size: int) -> None:
        """Counts a write of `size` requests and lets the next leader in. Call with `_cond`."""
        self.stats.requests += size
        self.stats.writes += 1
        self.stats.largest_group = max(self.stats.largest_group, size)
        self._leading = False
        self._cond.notify_all()
