"""The directory a RocksDB handle was opened in, pinned: tells whether it was deleted or
replaced since, and closes the handle only while the directory is still its own.

RocksDB names its files by path. A handle whose directory was deleted still writes its WAL
through open descriptors (so writes keep "succeeding"), but its flush on close, its
compactions and its obsolete-file purge create, rewrite and delete files by name: in a new
database created at the same path they overwrite and delete that database's files (seen:
`Corruption: Bad table magic number` on the next open). So once the directory is gone the
owner refuses every write (`gone()` before each write batch: one stat) and the handle is
abandoned at close, never flushed nor closed. An abandoned handle keeps its memory and its
in-process lock until the process exits: reopening that path needs a new process.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any

_abandoned: set[str] = set()
_abandoned_lock = threading.Lock()


class PinnedDir:
    """An open descriptor on a directory and its identity (st_dev, st_ino) at open.

    Holding the descriptor keeps the inode alive, so a directory created later at the same
    path can never get the same identity."""

    def __init__(self, path: str | Path) -> None:
        """Raises OSError if `path` is not an existing directory."""
        self.path = os.path.abspath(path)
        self._fd: int | None = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        st = os.fstat(self._fd)
        self._identity = (st.st_dev, st.st_ino)

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


def close_or_abandon(pinned: PinnedDir, *handles: Any) -> bool:
    """Closes the rocksdict `handles` (column families first, the database last) if their
    directory is still `pinned`; else abandons them. Returns False if abandoned. Closes every
    handle, then raises the first close error (a RocksDB error with its message), if any."""
    try:
        if pinned.gone() is not None:
            abandon(pinned.path, *handles)
            return False
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
    handle is garbage-collected, and interpreter shutdown would collect a plain reference)."""
    for handle in handles:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))
    with _abandoned_lock:
        _abandoned.add(os.path.abspath(path))


def abandoned_note(path: str | Path) -> str:
    """Returns an explanation to add to an "in use" open error if this process abandoned a
    handle on `path` (it still holds that lock), else ""."""
    with _abandoned_lock:
        if os.path.abspath(path) not in _abandoned:
            return ""
    return (
        " (this process had it open when its directory was deleted or replaced: that handle "
        "was abandoned and keeps the lock; restart the process to open this path)"
    )
