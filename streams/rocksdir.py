"""The directory a RocksDB handle was opened in, pinned: tells whether it was deleted or
replaced since, and closes the handle only while the directory is still its own.

RocksDB names its files by path. A handle whose directory was deleted still writes its WAL
through open descriptors (so writes keep "succeeding"), but its flush on close, its
compactions and its obsolete-file purge create, rewrite and delete files by name: in a new
database created at the same path they overwrite and delete that database's files (seen:
`Corruption: Bad table magic number` on the next open). So once the directory is gone the
owner refuses every write (`gone()` before each write batch: one stat) and the handle is
abandoned at close, never flushed nor closed, with its pinned descriptor.

An abandoned handle keeps RocksDB's in-process lock on `<path>/LOCK` (a table keyed by the
path string) until the process exits; its file lock is on the deleted directory's LOCK file.
So a new database at that path is opened through `/proc/self/fd/<fd>` of its own pinned
descriptor (`PinnedDir.rocks_path`): another string for the lock table, naming the new
directory's inode, so RocksDB's own file lock still guards it against other processes. As the
lock table no longer guards against a second handle on one directory in this process,
`PinnedDir` does: a directory (by inode) already pinned here is refused as in use.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any

from vectorlog.core.errors import VectorlogError

_abandoned: set[str] = set()
_abandoned_lock = threading.Lock()
#: (st_dev, st_ino) of every directory pinned in this process (abandoned ones for good: their
#: descriptors stay open, so their inodes are never reused)
_pinned: set[tuple[int, int]] = set()
_PROC_FD = "/proc/self/fd"


class DirInUse(VectorlogError, OSError):
    """The directory is open (pinned) by another handle of this process already. An OSError
    too, with RocksDB's own message, so the open failure is classified as RocksDB's is."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}/LOCK: lock hold by current process (it has it open already)")


class PinnedDir:
    """An open descriptor on a directory and its identity (st_dev, st_ino) at open.

    Holding the descriptor keeps the inode alive, so a directory created later at the same
    path can never get the same identity."""

    def __init__(self, path: str | Path) -> None:
        """Raises OSError if `path` is not an existing directory."""
        self.path = os.path.abspath(path)
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        st = os.fstat(fd)
        self._identity = (st.st_dev, st.st_ino)
        with _abandoned_lock:
            if self._identity in _pinned:
                os.close(fd)
                raise DirInUse(self.path)
            _pinned.add(self._identity)
        self._fd: int | None = fd

    @property
    def rocks_path(self) -> str:
        """Returns the path to open RocksDB with: `path`, or, where this process abandoned a
        handle (which keeps the lock table's entry for `path`), the pinned descriptor's
        /proc/self/fd path."""
        with _abandoned_lock:
            abandoned = self.path in _abandoned
        if abandoned and self._fd is not None and os.path.isdir(_PROC_FD):
            return f"{_PROC_FD}/{self._fd}"
        return self.path

    def gone(self) -> str | None:
        """Returns how the directory at `path` stopped being the one opened (deleted or moved
        away, or replaced), or None while it still is (or cannot be checked)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "its directory was deleted or moved away while open"
        except OSError:
            return None  # e.g. a parent lost its search permission: not evidence of a new dir
        if (st.st_dev, st.st_ino) != self._identity:
            return "its directory was replaced by another one while open"
        return None

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
            with _abandoned_lock:
                _pinned.discard(self._identity)


def close_or_abandon(pinned: PinnedDir, *handles: Any) -> bool:
    """Closes the rocksdict `handles` (column families first, the database last) if their
    directory is still `pinned`; else abandons them with `pinned` (never closed). Returns
    False if abandoned. Closes every handle, then raises the first close error (a RocksDB
    error with its message), if any."""
    if pinned.gone() is not None:
        abandon(pinned.path, *handles)
        return False
    try:
        failed: Exception | None = None
        for handle in handles:
            try:
                handle.close()  # a failed flush still closes the handle
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed
        return True
    finally:
        pinned.close()


def abandon(path: str, *handles: Any) -> None:
    """Leaks `handles` for good: never flushed, closed or freed (rocksdict flushes even when a
    handle is garbage-collected, and interpreter shutdown would collect a plain reference).
    The next open of `path` in this process goes through `PinnedDir.rocks_path`."""
    for handle in handles:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))
    with _abandoned_lock:
        _abandoned.add(os.path.abspath(path))


def abandoned_note(path: str | Path) -> str:
    """Returns an explanation to add to an "in use" open error if this process abandoned a
    handle on `path` (it still holds that lock; met only where /proc is missing), else ""."""
    with _abandoned_lock:
        if os.path.abspath(path) not in _abandoned:
            return ""
    return (
        " (this process had it open when its directory was deleted or replaced: that handle "
        "was abandoned and keeps the lock; restart the process to open this path)"
    )
