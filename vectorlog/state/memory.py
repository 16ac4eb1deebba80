"""`MemoryStateStore`: an in-memory twin of the RocksDB store, for unit tests only.

It passes the same conformance suite, so a test of a processor can run without a directory.
It is never selectable by users (no configuration names it): it forgets everything with the
process. A restart is simulated by opening a new store on the same `MemoryDisk`.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right

from vectorlog.state.base import StateIterator, StateStore, Transaction
from vectorlog.state.metadata import LegacyPositions


class MemoryDisk:
    """What a MemoryStateStore keeps: the state and the meta key space, as plain dicts."""

    def __init__(self) -> None:
        self.state: dict[bytes, bytes] = {}
        self.meta: dict[bytes, bytes] = {}
        self.lock = threading.Lock()


class MemoryStateStore(StateStore):
    """A state store on `disk` (a fresh one if None); `legacy_positions` as in RocksDB's."""

    def __init__(
        self,
        disk: MemoryDisk | None = None,
        legacy_positions: LegacyPositions | None = None,
        path: str = "<memory>",
    ) -> None:
        self.path, self.disk = path, disk if disk is not None else MemoryDisk()
        self._closed = False
        self._version = self._open_format(legacy_positions or {})

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        return self.disk.state.get(key)

    def iter(self) -> StateIterator:
        self._check_open()
        with self.disk.lock:
            return _SortedIterator(sorted(self.disk.state.items()))

    def transaction(self) -> Transaction:
        self._check_open()
        return _MemoryTransaction(self)

    @property
    def format_version(self) -> int:
        return self._version

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def _meta_get(self, key: bytes) -> bytes | None:
        self._check_open()
        return self.disk.meta.get(key)

    def _meta_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        self._check_open()
        with self.disk.lock:
            return sorted((k, v) for k, v in self.disk.meta.items() if k.startswith(prefix))


class _MemoryTransaction(Transaction):
    """Stages operations in a list; the write applies them all under the disk's lock."""

    def __init__(self, store: MemoryStateStore) -> None:
        super().__init__(store.path)
        self._store = store
        self._ops: list[tuple[dict[bytes, bytes], bytes, bytes | None]] = []

    def _stage_put(self, key: bytes, value: bytes) -> None:
        self._ops.append((self._store.disk.state, key, value))

    def _stage_delete(self, key: bytes) -> None:
        self._ops.append((self._store.disk.state, key, None))

    def _stage_meta(self, key: bytes, value: bytes) -> None:
        self._ops.append((self._store.disk.meta, key, value))

    def _write(self) -> None:
        self._store._check_open()
        with self._store.disk.lock:
            for target, key, value in self._ops:
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value

    def _discard(self) -> None:
        self._ops.clear()


class _SortedIterator:
    """A StateIterator over a snapshot: (key, value) pairs sorted by key."""

    def __init__(self, items: list[tuple[bytes, bytes]]) -> None:
        self._keys = [k for k, _ in items]
        self._values = [v for _, v in items]
        self._i = -1

    def valid(self) -> bool:
        return 0 <= self._i < len(self._keys)

    def seek_to_first(self) -> None:
        self._i = 0

    def seek(self, key: bytes) -> None:
        self._i = bisect_left(self._keys, key)

    def seek_for_prev(self, key: bytes) -> None:
        self._i = bisect_right(self._keys, key) - 1

    def next(self) -> None:
        if self.valid():
            self._i += 1

    def prev(self) -> None:
        if self.valid():
            self._i -= 1

    def key(self) -> bytes:
        return self._keys[self._i]

    def value(self) -> bytes:
        return self._values[self._i]
