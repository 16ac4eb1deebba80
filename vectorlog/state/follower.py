"""`FollowerStateStore`: a read-only view of a RocksDB state store another process (a
running `vectorlog serve`) holds, through a RocksDB secondary instance: no lock, never
writes the store's files, and it sees the commits the primary made up to its open (a
WriteBatch whole or not at all). The read-only commands (`vectorlog collections`) read
rootcoord's and datacoord's state through it."""

from __future__ import annotations

import shutil
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from vectorlog.state.base import StateIterator, StateStore, Transaction
from vectorlog.state.errors import StateStoreOpenError, StateWriteReadOnly
from vectorlog.state.metadata import FORMAT_VERSION, FORMAT_VERSION_KEY, META_CF, decode_version
from vectorlog.state.rocksdb import classify_open_error, prefix_items
from vectorlog.streams.log.secondary import scratch_dir


class FollowerStateStore(StateStore):
    """The state store at `path`, read-only. Raises StateStoreOpenError (naming the path)
    if there is no store there or RocksDB cannot follow it; a transaction raises
    StateWriteReadOnly."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if not (Path(path) / "CURRENT").is_file():
            raise StateStoreOpenError(self.path, "no state store there (no CURRENT file)")
        self._scratch = scratch_dir()
        self._closed = False
        try:
            self._db = self._open()
        except BaseException:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self._meta = self._db.get_column_family(META_CF)
        raw = self._meta_get(FORMAT_VERSION_KEY)
        self._version = FORMAT_VERSION if raw is None else decode_version(raw)

    def _open(self) -> Rdict:
        options = Options(raw_mode=True)
        options.set_max_open_files(-1)  # RocksDB requires it of a secondary instance
        families = {n: Options(raw_mode=True) for n in Rdict.list_cf(self.path)} | {
            META_CF: Options(raw_mode=True)
        }
        families.pop("default", None)
        secondary = AccessType.secondary(self._scratch)
        try:
            return Rdict(self.path, options, column_families=families, access_type=secondary)
        except Exception as exc:  # rocksdict raises plain Exceptions with RocksDB's message
            raise classify_open_error(self.path, exc) from exc

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        value: bytes | None = self._db.get(key)
        return value

    def iter(self) -> StateIterator:
        self._check_open()
        return self._db.iter()

    def transaction(self) -> Transaction:
        raise StateWriteReadOnly(self.path, "a follower of the store only reads")

    @property
    def format_version(self) -> int:
        return self._version

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        del self._meta
        self._db.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _meta_get(self, key: bytes) -> bytes | None:
        self._check_open()
        value: bytes | None = self._meta.get(key)
        return value

    def _meta_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        self._check_open()
        return prefix_items(self._meta, prefix)
