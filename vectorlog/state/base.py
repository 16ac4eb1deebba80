"""The `StateStore` interface: a processor's derived state and its consumed log positions,
changed only by a `Transaction` that commits both in one atomic, synced write.

State is an ordered bytes -> bytes map (keys sort bytewise). Positions, per (topic, partition)
the offset of the next record to consume, and the store's format version live in a separate
key space (see `metadata`), so they never mix with a processor's keys. Reads see committed
data only, never what a transaction has staged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Protocol

from vectorlog.core.faults import crash_point
from vectorlog.state.errors import (
    InvalidStateKey,
    StateFormatUnsupported,
    StateStoreClosed,
    TransactionFinished,
)
from vectorlog.state.metadata import (
    FORMAT_VERSION,
    FORMAT_VERSION_KEY,
    FORMAT_VERSIONS,
    POSITION_PREFIX,
    LegacyPositions,
    TopicPartition,
    decode_offset,
    decode_position_key,
    decode_version,
    encode_offset,
    encode_version,
    position_key,
)


class StateIterator(Protocol):
    """A cursor over committed state in key order (rocksdict's `RdictIter` is one).

    After a seek it is on a record if `valid()`; `seek(k)` lands on the first key >= k,
    `seek_for_prev(k)` on the last key <= k. It sees the state as of its creation.
    """

    def valid(self) -> bool: ...
    def seek_to_first(self) -> None: ...
    def seek(self, key: bytes) -> None: ...
    def seek_for_prev(self, key: bytes) -> None: ...
    def next(self) -> None: ...
    def prev(self) -> None: ...
    def key(self) -> bytes: ...
    def value(self) -> bytes: ...


class Transaction(ABC):
    """Changes staged for one commit: state puts and deletes, and consumed positions.

    Nothing staged is visible to reads before `commit()`; `abort()` (or dropping the
    transaction) discards it. Used by one thread; finished by its first commit or abort.
    As a context manager it commits when the block ends normally and aborts otherwise.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._finished = False
        self._staged = 0

    # -- staging ---------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes) -> None:
        """Stages `key` = `value`. Raises InvalidStateKey, TransactionFinished."""
        if self._finished:
            raise TransactionFinished(self._path)
        if type(key) is not bytes or type(value) is not bytes:  # inline: the hot path
            _checked("key", key)
            _checked("value", value)
        self._stage_put(key, value)
        self._staged += 1

    def put_many(self, keys: Sequence[bytes], values: Sequence[bytes]) -> None:
        """Stages `keys[i]` = `values[i]` for every i, as `put` of each would (an index's
        records in bulk: the backend stages them without a Python call per pair). Raises
        InvalidStateKey (a key or value not bytes, or the lengths differ; nothing is staged
        then), TransactionFinished."""
        self._check_open()
        if len(keys) != len(values):
            raise InvalidStateKey(f"{len(keys)} state keys but {len(values)} values")
        for what, items in (("key", keys), ("value", values)):
            if items and set(map(type, items)) != {bytes}:  # a pass in C, not a loop
                for item in items:
                    _checked(what, item)
        self._stage_puts(keys, values)
        self._staged += len(keys)

    def delete(self, key: bytes) -> None:
        """Stages the deletion of `key` (absent or not). Raises InvalidStateKey,
        TransactionFinished."""
        self._check_open()
        self._stage_delete(_checked("key", key))
        self._staged += 1

    def set_position(self, topic: str, partition: int, offset: int) -> None:
        """Stages `offset` as the next offset to consume from (topic, partition).

        Raises InvalidStateKey, TransactionFinished."""
        self._check_open()
        self._stage_meta(position_key(topic, partition), encode_offset(offset))
        self._staged += 1

    def set_format_version(self, version: int) -> None:
        """Stages the store's format version (one of FORMAT_VERSIONS): a processor staging
        records an older build would misread stages the version that build refuses on open.
        Raises InvalidStateKey (an unknown version), TransactionFinished."""
        self._check_open()
        if version not in FORMAT_VERSIONS:
            raise InvalidStateKey(f"format version {version} is not one of {FORMAT_VERSIONS}")
        self._stage_meta(FORMAT_VERSION_KEY, encode_version(version))
        self._staged += 1

    def __len__(self) -> int:
        """Returns how many operations are staged."""
        return self._staged

    @property
    def finished(self) -> bool:
        """Whether the transaction was committed or aborted."""
        return self._finished

    # -- finishing -------------------------------------------------------------------------
    def commit(self) -> None:
        """Commits everything staged, atomically and durably; finishes the transaction.

        The commit order, the one place it is written down:
          1. The caller staged its state changes (`put`, `delete`) in the state key space.
          2. The caller staged the positions it consumed (`set_position`) in the meta key
             space of the same batch.
          3. crash_point("state.commit.before_write"); the batch is written in ONE synced
             write (RocksDB: one WriteBatch, `sync=True`): after a crash, either all of it
             is on disk or none of it is, so state and positions always agree.
          4. crash_point("state.commit.after_write"); `commit` returns. Only now may the
             caller update in-memory views derived from the changes and treat the positions
             as consumed; if `commit` raised, it must do neither.
        A transaction with nothing staged writes nothing.

        Raises TransactionFinished if already finished, StateStoreClosed if the store is
        closed, StateWriteFailed if the write failed (the outcome is then unknown).
        """
        self._check_open()
        self._finished = True
        if not self._staged:
            return
        crash_point("state.commit.before_write")
        self._write()
        crash_point("state.commit.after_write")

    def abort(self) -> None:
        """Discards everything staged and finishes the transaction (no-op if finished)."""
        if not self._finished:
            self._finished = True
            self._discard()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and not self._finished:
            self.commit()
        else:
            self.abort()

    def _check_open(self) -> None:
        if self._finished:
            raise TransactionFinished(self._path)

    # -- the backend's part -----------------------------------------------------------------
    def _stage_format_version(self) -> None:
        """Stages the current format version (used when a store is first opened)."""
        self._stage_meta(FORMAT_VERSION_KEY, encode_version(FORMAT_VERSION))
        self._staged += 1

    @abstractmethod
    def _stage_put(self, key: bytes, value: bytes) -> None: ...

    def _stage_puts(self, keys: Sequence[bytes], values: Sequence[bytes]) -> None:
        """Stages checked pairs of equal-length sequences (a backend may do it in bulk)."""
        for key, value in zip(keys, values, strict=True):
            self._stage_put(key, value)

    @abstractmethod
    def _stage_delete(self, key: bytes) -> None: ...

    @abstractmethod
    def _stage_meta(self, key: bytes, value: bytes) -> None: ...

    @abstractmethod
    def _write(self) -> None:
        """Writes everything staged in one atomic, synced write."""

    @abstractmethod
    def _discard(self) -> None: ...


class StateStore(ABC):
    """A processor's state and consumed positions (see the module docstring).

    Opening a store that has no format version sets it, first migrating a format 0 store
    (its legacy position keys move to the meta key space) in one synced commit; a store
    with another version is refused with StateFormatUnsupported. Safe to share between
    threads; each thread uses its own transactions.
    """

    #: Where the store lives, for messages.
    path: str

    # -- state -------------------------------------------------------------------------------
    @abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """Returns the committed value of `key`, or None. Raises StateStoreClosed."""

    @abstractmethod
    def iter(self) -> StateIterator:
        """Returns a cursor over the committed state, unpositioned. Raises StateStoreClosed."""

    def items(self, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Yields the committed (key, value) pairs whose key starts with `prefix`, in key
        order. Raises StateStoreClosed."""
        it = self.iter()
        it.seek(prefix)
        while it.valid():
            key = it.key()
            if not key.startswith(prefix):
                return
            yield key, it.value()
            it.next()

    @abstractmethod
    def transaction(self) -> Transaction:
        """Returns a new, empty transaction on this store. Raises StateStoreClosed."""

    def synced_once(self) -> AbstractContextManager[None]:
        """Returns a context in which this thread's commits are written without a sync each
        and synced together when it exits without an error (a replay's many small commits:
        a crash inside it loses a tail of them, as a crash before each commit would, and
        the replay resumes from the last one kept). Only for a store no other thread
        commits to meanwhile. Here: every commit is synced as usual."""
        return nullcontext()

    # -- positions and format ----------------------------------------------------------------
    def position(self, topic: str, partition: int) -> int | None:
        """Returns the committed next offset to consume from (topic, partition), or None if
        none was ever committed. Raises InvalidStateKey, StateStoreClosed."""
        raw = self._meta_get(position_key(topic, partition))
        return None if raw is None else decode_offset(raw)

    def positions(self) -> dict[TopicPartition, int]:
        """Returns every committed position, {(topic, partition): next offset}, sorted by
        topic then partition. Raises StateStoreClosed."""
        return {
            decode_position_key(key): decode_offset(raw)
            for key, raw in self._meta_items(POSITION_PREFIX)
        }

    @property
    @abstractmethod
    def format_version(self) -> int:
        """Returns the format version of the open store."""

    # -- lifecycle ---------------------------------------------------------------------------
    @abstractmethod
    def close(self) -> None:
        """Closes the store; unfinished transactions are lost. Idempotent."""

    @property
    @abstractmethod
    def closed(self) -> bool:
        """Whether `close()` was called."""

    def __enter__(self) -> StateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise StateStoreClosed(self.path)

    # -- opening -----------------------------------------------------------------------------
    def _open_format(self, legacy_positions: LegacyPositions) -> int:
        """Returns the format version, setting it on first open (migrating format 0).

        Raises StateFormatUnsupported for a version this code does not know."""
        raw = self._meta_get(FORMAT_VERSION_KEY)
        if raw is None:
            self._migrate(legacy_positions)
            return FORMAT_VERSION
        version = decode_version(raw)
        if version not in FORMAT_VERSIONS:
            raise StateFormatUnsupported(self.path, version, FORMAT_VERSIONS[-1])
        return version

    def _migrate(self, legacy_positions: LegacyPositions) -> None:
        """One synced commit: legacy position keys moved to positions, version set."""
        txn = self.transaction()
        for key, (topic, partition) in legacy_positions.items():
            raw = self.get(key)
            if raw is not None:
                txn.set_position(topic, partition, decode_offset(raw))
                txn.delete(key)
        txn._stage_format_version()
        txn.commit()

    @abstractmethod
    def _meta_get(self, key: bytes) -> bytes | None: ...

    @abstractmethod
    def _meta_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]: ...


def _checked(what: str, data: bytes) -> bytes:
    """Returns `data` if it is bytes; raises InvalidStateKey otherwise."""
    if type(data) is not bytes:
        raise InvalidStateKey(f"state {what}s are bytes, not {type(data).__name__}")
    return data
