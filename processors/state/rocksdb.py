"""`RocksDBStateStore`: the state store on RocksDB (rocksdict), the one users run.

State lives in the default column family, positions and the format version in `__meta__`;
a commit is one `WriteBatch` across both, written with `sync=True`. Open failures are
classified from RocksDB's message into the errors of `errors.py`.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from rocksdict import DbClosedError, Options, Rdict, WriteBatch, WriteOptions

from vectorlog.processors.state.base import StateIterator, StateStore, Transaction
from vectorlog.processors.state.errors import (
    StateStoreClosed,
    StateStoreCorrupt,
    StateStoreInUse,
    StateStoreOpenError,
    StateStoreReadOnly,
    StateWriteFailed,
)
from vectorlog.processors.state.metadata import META_CF, LegacyPositions
from vectorlog.streams.rocksopen import OpenFailure, classify

_ERRORS: dict[OpenFailure, type[StateStoreOpenError]] = {
    OpenFailure.IN_USE: StateStoreInUse,
    OpenFailure.CORRUPT: StateStoreCorrupt,
    OpenFailure.READ_ONLY: StateStoreReadOnly,
    OpenFailure.OTHER: StateStoreOpenError,
}


def classify_open_error(path: str, exc: BaseException) -> StateStoreOpenError:
    """Returns the open error `exc` (from RocksDB or the OS) means, naming `path`."""
    kind, message = classify(exc)
    return _ERRORS[kind](path, message)


MAX_TOTAL_WAL_BYTES = 64 << 20


def _column_families(path: Path) -> dict[str, Options]:
    """Every column family the store has, plus `__meta__`, with raw-mode options."""
    names = set(Rdict.list_cf(str(path))) if (path / "CURRENT").exists() else set()
    return {name: Options(raw_mode=True) for name in (names | {META_CF}) - {"default"}}


def _open_rdict(path: Path, max_total_wal_bytes: int) -> Rdict:
    """Opens (creating if missing) the RocksDB at `path`. Raises StateStoreOpenError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        # The meta column family takes a few bytes per commit and would never fill a memtable;
        # RocksDB keeps every WAL file until all column families flushed what it holds, so
        # without this cap the WAL grows with everything ever written (seen: 191 MB of WAL
        # beside 191 MB of tables). Past the cap RocksDB flushes the column families pinning it.
        options.set_max_total_wal_size(max_total_wal_bytes)
        return Rdict(str(path), options, column_families=_column_families(path))
    except Exception as exc:
        raise classify_open_error(str(path), exc) from exc


class RocksDBStateStore(StateStore):
    """A state store in the RocksDB directory `path` (created if missing).

    `legacy_positions` names the format 0 keys to migrate on first open (see `metadata`).
    Raises StateStoreInUse, StateStoreCorrupt, StateStoreReadOnly, StateFormatUnsupported or
    StateStoreOpenError (unclassified), each naming the path and RocksDB's message.
    """

    def __init__(
        self,
        path: str | Path,
        legacy_positions: LegacyPositions = MappingProxyType({}),
        max_total_wal_bytes: int = MAX_TOTAL_WAL_BYTES,
    ) -> None:
        self.path = str(path)
        self._closed = False
        self._db = _open_rdict(Path(path), max_total_wal_bytes)
        self._sync = WriteOptions()
        self._sync.sync = True
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
        """Flushes the memtables to table files. Raises StateStoreClosed."""
        self._check_open()
        self._db.flush()

    def compact(self) -> None:
        """Compacts the whole state key space. Raises StateStoreClosed."""
        self._check_open()
        self._db.compact_range(None, None)

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._db.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- internals ---------------------------------------------------------------------------
    def _write(self, batch: WriteBatch) -> None:
        """Writes `batch` with sync=True. Raises StateStoreClosed, StateWriteFailed."""
        self._check_open()
        try:
            self._db.write(batch, self._sync)
        except DbClosedError as exc:
            raise StateStoreClosed(self.path) from exc
        except Exception as exc:
            raise StateWriteFailed(self.path, str(exc)) from exc

    def _meta_get(self, key: bytes) -> bytes | None:
        self._check_open()
        value: bytes | None = self._db.get_column_family(META_CF).get(key)
        return value

    def _meta_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        self._check_open()
        it = self._db.get_column_family(META_CF).iter()
        it.seek(prefix)
        found = []
        while it.valid() and it.key().startswith(prefix):
            found.append((it.key(), it.value()))
            it.next()
        return found

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

    def _stage_delete(self, key: bytes) -> None:
        self._batch.delete(key)

    def _stage_meta(self, key: bytes, value: bytes) -> None:
        self._batch.put(key, value, self._store._db.get_column_family_handle(META_CF))

    def _write(self) -> None:
        self._store._write(self._batch)

    def _discard(self) -> None:
        self._batch.clear()
