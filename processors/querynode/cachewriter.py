"""Writes the query node's segment cache entries (mmapcache.py) off the read path: while a
segment grows its entry grows with it (growentry.py), a few chunks of rows at a time on the
writer's thread, so the seal of a segment of 1M rows writes only its last rows and commits."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from vectorlog.core.faults import crash_point
from vectorlog.processors.querynode.growentry import GrowingEntry
from vectorlog.processors.querynode.mmapcache import SegmentCache

log = logging.getLogger(__name__)
Lock = Any  # a context manager: the lock of the replica a segment is in
Key = tuple[int, int, int]  # collection, segment, vector field
Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]
#: seconds between two rounds of appending the rows growing segments gained
GROW_EVERY_S = 0.5


class SegmentRows(Protocol):
    """Where an entry's rows come from: one segment's field, as it is now."""

    token: tuple[int, int]  # equal while rows already read stay what they were
    dim: int
    metric: str

    def read(self, start: int, upto: int | None) -> Chunk | None:
        """Returns copies of the next rows from `start` (a bounded chunk, before `upto`),
        or None if the segment changed (its rows read before are not valid any more).
        Called with its replica's lock."""


class CacheWriter:
    """Writes, grows and deletes entries in order on its own thread (and `write_now` on the
    caller's), so a start or a read never waits for the disk; `idle`, if set, runs on that
    thread every GROW_EVERY_S (cacheload.py: grows the entries of growing segments)."""

    def __init__(self, cache: SegmentCache) -> None:
        self.cache = cache
        self.idle: Callable[[], None] | None = None
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()
        self._disk = threading.Lock()  # one writer of the files at a time, and of `_growing`
        self._growing: dict[Key, GrowingEntry] = {}

    def write(self, key: Key, rows: SegmentRows, lock: Lock, upto: int) -> None:
        """Queues the write of a segment's entry of `upto` rows (a failure is logged)."""
        self._put(lambda: self.write_now(key, rows, lock, upto))

    def drop(self, collection_id: int, segment_ids: list[int]) -> None:
        """Queues the deletion of segments' entries (after the writes queued before)."""
        self._put(lambda: self._dropped(collection_id, set(segment_ids)))

    def drop_collection(self, collection_id: int) -> None:
        """Queues the deletion of every entry of a collection."""
        self._put(lambda: self._dropped(collection_id, None))

    def then(self, job: Callable[[], None]) -> None:
        """Runs `job` once the writes queued before are done: the query node starts loading
        segment indexes so (an index that reconstructs exactly frees the segment's flat
        storage: written first, the next start maps it)."""
        self._put(job)

    def start(self) -> None:
        """Starts the thread (for `idle`) if it is not running."""
        self._put(lambda: None)

    def close(self) -> None:
        """Returns once every queued write and deletion is done; entries still growing are
        abandoned (their temporary files deleted)."""
        with self._mutex:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._work.put(None)
        if thread is not None:
            thread.join()
        with self._disk:
            for entry in self._growing.values():
                entry.abandon()
            self._growing.clear()

    def _put(self, job: Callable[[], None]) -> None:
        with self._mutex:
            self._work.put(job)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="querynode-cache", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                job = self._work.get(timeout=GROW_EVERY_S)
            except queue.Empty:
                job = self.idle or _nothing
            if job is None:
                return
            try:
                job()
            except Exception as exc:  # a cache is an optimization: the binlogs stay the truth
                log.warning("query node cache: %s", exc)

    def grow(self, key: Key, rows: SegmentRows, lock: Lock) -> None:
        """Appends the rows a growing segment gained to its entry's temporary files (starting
        them); call on the writer's thread (from `idle`). Raises OSError."""
        with self._disk:
            if key in self._growing or not self.cache.exists(*key):
                self._advance(key, rows, lock, None)

    def write_now(self, key: Key, rows: SegmentRows, lock: Lock, upto: int) -> None:
        """Writes a segment's entry of `upto` rows on the calling thread unless it has one of
        that many rows already; the rows its growing entry holds are not written again. A
        failure is logged."""
        try:
            with self._disk:
                if self.cache.exists(*key, upto):
                    return
                began = time.monotonic()
                got = self._advance(key, rows, lock, upto)
                if got is None or got[0].rows != upto:
                    return  # the segment changed (or holds other rows): not written
                entry, tail = got[0], upto - got[1]
                del self._growing[key]
                entry.commit()
            log.info(
                "query node cache: segment %d field %d written, %d rows (%d at its seal) in %.2f s",
                key[1], key[2], upto, tail, time.monotonic() - began,
            )  # fmt: skip
        except Exception as exc:  # a cache is an optimization: the binlogs stay the truth
            log.warning("query node cache: %s", exc)

    def _advance(
        self, key: Key, rows: SegmentRows, lock: Lock, upto: int | None
    ) -> tuple[GrowingEntry, int] | None:
        """Returns the growing entry of `key` with the rows of `rows` up to `upto` (None:
        every row it has) appended and the rows it held before, or None (abandoned) if the
        segment changed. Call with `_disk`."""
        entry = self._growing.get(key)
        past = entry is not None and upto is not None and upto < entry.rows
        if entry is not None and (entry.token != rows.token or past):
            self._growing.pop(key).abandon()
            entry = None
        if entry is None:
            entry = GrowingEntry(self.cache.base(*key), rows.dim, rows.metric, rows.token)
            self._growing[key] = entry
        before = entry.rows
        while upto is None or entry.rows < upto:
            with lock:  # the segment's storage does not change while a chunk is copied out
                got = rows.read(entry.rows, upto)
            if got is None:
                self._growing.pop(key).abandon()
                return None
            if not len(got[0]):
                break
            try:
                entry.append(*got)
            except BaseException:  # a chunk half appended: its files are not aligned any more
                self._growing.pop(key).abandon()
                raise
            crash_point("querynode.cache.appended")
        return entry, before

    def _dropped(self, collection_id: int, segment_ids: set[int] | None) -> None:
        with self._disk:
            for key in [k for k in self._growing if k[0] == collection_id]:
                if segment_ids is None or key[1] in segment_ids:
                    self._growing.pop(key).abandon()
            if segment_ids is None:
                self.cache.drop_collection(collection_id)
            else:
                self.cache.drop(collection_id, sorted(segment_ids))


def _nothing() -> None:
    """The idle job when there is none."""
