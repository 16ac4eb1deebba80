"""The RocksDB state store when its directory is deleted or replaced under it, or its disk
fills: commits fail with an error saying so, and the old handle never touches a new store at
that path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.streams.fsfaults import ROWS, fill, in_child, small_tmpfs
from vectorlog.core.errors import DataDirGone, DiskFull
from vectorlog.state.errors import (
    StateDirGone,
    StateDiskFull,
    StateStoreNoSpace,
)
from vectorlog.state.rocksdb import RocksDBStateStore


def opened(path: Path, commits: int = 200) -> RocksDBStateStore:
    """A store at `path` with `commits` commits, some flushed to table files, some not."""
    store = RocksDBStateStore(path)
    for i in range(commits):
        with store.transaction() as txn:
            txn.put(b"old%05d" % i, b"." * 1000)
            txn.set_position("t", 0, i + 1)
        if i == commits // 2:
            store.flush()
    return store


def test_commits_fail_once_the_directory_is_deleted(tmp_path: Path) -> None:
    store = opened(tmp_path / "state")
    shutil.rmtree(tmp_path / "state")
    txn = store.transaction()
    txn.put(b"after", b"1")
    with pytest.raises(StateDirGone, match="deleted or moved away") as raised:
        txn.commit()
    assert isinstance(raised.value, DataDirGone)
    assert str(tmp_path / "state") in str(raised.value)
    assert store.get(b"after") is None and store.position("t", 0) == 200
    for maintenance in (store.flush, store.compact):  # they write table files by name too
        with pytest.raises(StateDirGone):
            maintenance()
    store.close()


def test_commits_fail_once_the_directory_is_replaced(tmp_path: Path) -> None:
    store = opened(tmp_path / "state", commits=3)
    os.rename(tmp_path / "state", tmp_path / "moved")
    (tmp_path / "state").mkdir()
    with pytest.raises(StateDirGone, match="replaced by another one"), store.transaction() as txn:
        txn.put(b"after", b"1")
    store.close()


def test_the_old_handle_never_writes_into_a_new_store_at_the_path(tmp_path: Path) -> None:
    path = tmp_path / "state"
    old = opened(path)
    shutil.rmtree(path)
    assert in_child("state", path, "write") == ROWS  # another process creates a new store
    old.close()  # a plain close flushes its memtables into files named by path
    assert in_child("state", path, "read") == ROWS
    reopened = RocksDBStateStore(path)  # this process opens the new store too (issue 31 item 6)
    try:
        assert reopened.position("t", 0) == ROWS and len(list(reopened.items())) == ROWS
    finally:
        reopened.close()


@pytest.mark.slow
def test_a_full_disk_is_reported_as_such(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs") as fs:
        store = opened(fs / "state", commits=3)
        filler = fill(fs)
        for _ in range(2):  # RocksDB refuses every write after a failed one
            full = pytest.raises(StateDiskFull, match="No space left on device")
            with full as raised, store.transaction() as txn:
                txn.put(b"k", b"x" * 4000)
            assert isinstance(raised.value, DiskFull) and str(fs / "state") in str(raised.value)
        store.close()
        with pytest.raises(StateStoreNoSpace, match="disk is full"):
            RocksDBStateStore(fs / "another")
        filler.unlink()
        with RocksDBStateStore(fs / "state") as reopened:
            assert reopened.get(b"k") is None and reopened.position("t", 0) == 3
