"""The write guard: a per-collection reader-writer exclusion between DML and drops (issue 7).

A write (insert, upsert, delete) holds its collection shared from its last check of the meta
through its stamp and its append; `drop_collection` / `drop_partition` hold it exclusively
around theirs. So every write is stamped and appended entirely before a drop (a smaller ts:
readable as of its ts) or entirely after it (its check fails: nothing appended). Drops are
preferred: once one waits, new writes of that collection wait behind it. In-process: one
process runs one rootcoord.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class WriteGuard:
    """Shared holds for writes, exclusive holds for drops, per collection id."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._writes: dict[int, int] = {}  # collection id -> writes holding it
        self._dropping: set[int] = set()  # collections a drop holds or waits for

    def acquire_write(self, collection_id: int) -> None:
        """Returns once no drop of the collection holds or awaits the guard; holds it shared."""
        with self._cond:
            while collection_id in self._dropping:
                self._cond.wait()
            self._writes[collection_id] = self._writes.get(collection_id, 0) + 1

    def release_write(self, collection_id: int) -> None:
        with self._cond:
            left = self._writes[collection_id] - 1
            if left:
                self._writes[collection_id] = left
                return
            del self._writes[collection_id]
            if collection_id in self._dropping:
                self._cond.notify_all()

    @contextlib.contextmanager
    def dropping(self, collection_id: int) -> Iterator[None]:
        """Holds the collection exclusively: enters once every write holding it has exited,
        and keeps new writes of it waiting until the block exits."""
        with self._cond:
            while collection_id in self._dropping:
                self._cond.wait()
            self._dropping.add(collection_id)
        try:
            with self._cond:
                while self._writes.get(collection_id):
                    self._cond.wait()
            yield
        finally:
            with self._cond:
                self._dropping.discard(collection_id)
                self._cond.notify_all()
