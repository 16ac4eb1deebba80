"""`RocksDBStateStore`: the state store on RocksDB (rocksdict), the one users run.

State lives in the default column family, positions and the format version in `__meta__`;
a commit is one `WriteBatch` across both, then the WAL synced (`flush_wal(True)`: it lets go
of the GIL while the disk syncs, where a write with sync=True holds it and stalls every
thread of the process; after a crash the batch is there whole or not at all). Open and
write failures are classified from RocksDB's message into the errors of `errors.py`. Once
the directory is deleted or replaced under a running process every write is refused
(`StateDirGone`) and the handle is abandoned at close, never flushed into a new store at
that path (`streams.rocksdir`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType

from rocksdict import DbClosedError, Options, Rdict, WriteBatch, WriteOptions

from vectorlog.state.base import StateIterator, StateStore, Transaction
from vectorlog.state.errors import (
    StateDirGone,
    StateDiskFull,
    StateStoreClosed,
    StateStoreCorrupt,
    StateStoreInUse,
    StateStoreNoSpace,
    StateStoreOpenError,
    StateStoreReadOnly,
    StateWriteFailed,
    StateWriteReadOnly,
)
from vectorlog.state.metadata import META_CF, LegacyPositions
from vectorlog.streams.rocksdir import PinnedDir, abandoned_note, close_or_abandon
from vectorlog.streams.rocksopen import OpenFailure, classify, synced_store_options

LOG = logging.getLogger(__name__)
_ERRORS: dict[OpenFailure, type[StateStoreOpenError]] = {
    OpenFailure.DISK_FULL: StateStoreNoSpace,
    OpenFailure.IN_USE: StateStoreInUse,
    OpenFailure.CORRUPT: StateStoreCorrupt,
    OpenFailure.READ_ONLY: StateStoreReadOnly,
    OpenFailure.OTHER: StateStoreOpenError,
}


#: What a failed write was (anything else: StateWriteFailed, outcome unknown).
_WRITE_ERRORS: dict[OpenFailure, type[StateWriteFailed]] = {
    OpenFailure.DISK_FULL: StateDiskFull,
    OpenFailure.READ_ONLY: StateWriteReadOnly,
}


def classify_open_error(path: str, exc: BaseException) -> StateStoreOpenError:
    """Returns the open error `exc` (from RocksDB or the OS) means, naming `path`."""
    kind, message = classify(exc)
    if kind is OpenFailure.IN_USE:
        message += abandoned_note(path)
    return _ERRORS[kind](path, message)


MAX_TOTAL_WAL_BYTES = 64 << 20


def _column_families(path: Path) -> dict[str, Options]:
    """Every column family the store has, plus `__meta__`, with raw-mode options."""
    names = set(Rdict.list_cf(str(path))) if (path / "CURRENT").exists() else set()
    return {name: Options(raw_mode=True) for name in (names | {META_CF}) - {"default"}}


def _open_rdict(path: Path, max_total_wal_bytes: int) -> tuple[Rdict, PinnedDir]:
    """Opens (creating if missing) the RocksDB at `path`; returns it and its pinned directory.
    Raises StateStoreOpenError."""
    pinned = None
    try:
        path.mkdir(parents=True, exist_ok=True)
        pinned = PinnedDir(path)
        options = synced_store_options()
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        # The meta column family takes a few bytes per commit and would never fill a memtable;
        # RocksDB keeps every WAL file until all column families flushed what it holds, so
        # without this cap the WAL grows with everything ever written (seen: 191 MB of WAL
        # beside 191 MB of tables). Past the cap RocksDB flushes the column families pinning it.
        options.set_max_total_wal_size(max_total_wal_bytes)
        families = _column_families(path)
        return Rdict(pinned.rocks_path, options, column_families=families), pinned
    except Exception as exc:
        if pinned is not None:
            pinned.close()
        raise classify_open_error(str(path), exc) from exc


def prefix_items(family: Rdict, prefix: bytes) -> list[tuple[bytes, bytes]]:
    """Returns the (key, value) pairs of a column family whose key starts with `prefix`, in
    key order."""
    it = family.iter()
    it.seek(prefix)
    found = []
    while it.valid() and it.key().startswith(prefix):
        found.append((it.key(), it.value()))
        it.next()
    return found


class RocksDBStateStore(StateStore):
    """A state store in the RocksDB directory `path` (created if missing).

    `legacy_positions` names the format 0 keys to migrate on first open (see `metadata`).
    Raises StateStoreInUse, StateStoreCorrupt, StateStoreReadOnly, StateStoreNoSpace,
    StateFormatUnsupported or StateStoreOpenError (unclassified), each naming the path and
    RocksDB's message.
    """

    def __init__(
        self,
        path: str | Path,
        legacy_positions: LegacyPositions = MappingProxyType({}),
        max_total_wal_bytes: int = MAX_TOTAL_WAL_BYTES,
    ) -> None:
        self.path = str(path)
        self._closed = False
        self._db, self._dir = _open_rdict(Path(path), max_total_wal_bytes)
        # Kept for the store's life: rocksdict flushes a column family when the Rdict bound to
        # it is dropped, so a fresh one per read would flush `__meta__` on every read.
        self._meta = self._db.get_column_family(META_CF)
        self._wopts = WriteOptions()  # unsynced: `_write` syncs the WAL after, without the GIL
        self._wopts.sync = False
        self._syncing = True  # False inside `synced_once`
        try:
            self._version = self._open_format(legacy_positions)
        except BaseException:
            self.close()
            raise

    # -- state -------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if self._closed:  # inlined check: reads are SnapshotKV's hot path
            raise StateStoreClosed(self.path)
        value: bytes | None = self._db.get(key)
        return value

    def iter(self) -> StateIterator:
        if self._closed:
            raise StateStoreClosed(self.path)
        return self._db.iter()

    def transaction(self) -> Transaction:
        self._check_open()
        return _RocksDBTransaction(self)

    @property
    def format_version(self) -> int:
        return self._version

    # -- maintenance (operators, benchmarks) -------------------------------------------------
    def flush(self) -> None:
        """Flushes the memtables to table files. Raises StateStoreClosed, StateDirGone."""
        self._check_writable()
        self._db.flush()

    def compact(self) -> None:
        """Compacts the whole state key space. Raises StateStoreClosed, StateDirGone."""
        self._check_writable()
        self._db.compact_range(None, None)

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the store; abandons its handle if its directory is gone (see the module)."""
        if self._closed:
            return
        self._closed = True
        try:
            if not close_or_abandon(self._dir, self._meta, self._db):
                LOG.warning("state store %s: its directory is gone; handle abandoned", self.path)
        except Exception as exc:  # a failed flush: every commit is in the synced WAL
            LOG.warning("state store %s: close failed: %s", self.path, exc)

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def synced_once(self) -> Iterator[None]:
        """See StateStore.synced_once: the WAL is synced once at the end. Raises what a
        commit raises, or StateWriteFailed when the final sync fails."""
        syncing, self._syncing = self._syncing, False
        try:
            yield
        finally:
            self._syncing = syncing
        self._check_writable()
        try:
            self._db.flush_wal(True)
        except Exception as exc:
            raise self._write_error(exc) from exc

    # -- internals ---------------------------------------------------------------------------
    def _check_writable(self) -> None:
        """Raises StateStoreClosed, or StateDirGone once the directory is deleted or replaced."""
        self._check_open()
        gone = self._dir.gone()
        if gone is not None:
            raise StateDirGone(self.path, gone)

    def _write(self, batch: WriteBatch) -> None:
        """Writes `batch`, then syncs the WAL (not inside `synced_once`). Raises
        StateStoreClosed, StateDirGone (nothing written), StateDiskFull, StateWriteReadOnly or
        StateWriteFailed (outcome unknown)."""
        self._check_writable()
        try:
            self._db.write(batch, self._wopts)
            if self._syncing:
                self._db.flush_wal(True)
        except DbClosedError as exc:
            raise StateStoreClosed(self.path) from exc
        except Exception as exc:
            raise self._write_error(exc) from exc

    def _write_error(self, exc: Exception) -> StateWriteFailed:
        """Returns the error a failed commit raises."""
        gone = self._dir.gone()
        if gone is not None:
            return StateDirGone(self.path, f"{gone}; {exc}")
        kind, message = classify(exc)
        return _WRITE_ERRORS.get(kind, StateWriteFailed)(self.path, message)

    def _meta_get(self, key: bytes) -> bytes | None:
        self._check_open()
        value: bytes | None = self._meta.get(key)
        return value

    def _meta_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        self._check_open()
        return prefix_items(self._meta, prefix)

    def __repr__(self) -> str:
        return f"RocksDBStateStore({self.path!r}, closed={self._closed})"


class _RocksDBTransaction(Transaction):
    """Stages straight into one raw-mode WriteBatch spanning both column families."""

    def __init__(self, store: RocksDBStateStore) -> None:
        super().__init__(store.path)
        self._store = store
        self._batch = WriteBatch(raw_mode=True)

    def _stage_put(self, key: bytes, value: bytes) -> None:
        self._batch.put(key, value)

    def _stage_puts(self, keys: Sequence[bytes], values: Sequence[bytes]) -> None:
        """Stages the (checked) pairs with no Python bytecode per pair."""
        deque(map(self._batch.put, keys, values), maxlen=0)

    def _stage_delete(self, key: bytes) -> None:
        self._batch.delete(key)

    def _stage_meta(self, key: bytes, value: bytes) -> None:
        self._batch.put(key, value, self._store._db.get_column_family_handle(META_CF))

    def _write(self) -> None:
        self._store._write(self._batch)

    def _discard(self) -> None:
        self._batch.clear()
