"""Errors of the state stores, rooted in `StateError`; each names the store's path."""

from __future__ import annotations

from vectorlog.core.errors import DataDirGone, DiskFull, VectorlogError


class StateError(VectorlogError):
    """Base of every error a state store raises."""


class StateStoreOpenError(StateError):
    """A state store could not be opened; `cause` is the underlying (RocksDB) message.

    Raised as such only when the failure fits none of the subclasses below.
    """

    what = "could not be opened"

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"state store {path} {self.what}: {cause}")
        self.path, self.cause = path, cause


class StateStoreInUse(StateStoreOpenError):
    """Another process, or another open store in this process, holds the store's lock."""

    what = (
        "is in use (another process, or another open store in this process, holds its lock: "
        "close that one first)"
    )


class StateStoreCorrupt(StateStoreOpenError):
    """The store's files are damaged or missing (CURRENT, MANIFEST, a table file)."""

    what = (
        "is corrupt (its files are damaged or missing; it is derived from the log: move the "
        "directory away and it is rebuilt on the next start)"
    )


class StateStoreReadOnly(StateStoreOpenError):
    """The store cannot be written: permission denied or a read-only file system."""

    what = "cannot be written (permission denied or a read-only file system)"


class StateStoreNoSpace(StateStoreOpenError, DiskFull):
    """The store could not be opened: the disk is full."""

    what = "could not be opened: the disk is full (free space, then open it again)"


class StateFormatUnsupported(StateStoreOpenError):
    """The store was written in a format version this code does not know (a newer one)."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        self.what = (
            f"has state format version {found}; this vectorlog reads version {supported} "
            "(was it written by a newer vectorlog?)"
        )
        super().__init__(path, f"format version {found} != {supported}")
        self.found, self.supported = found, supported


class StateStoreClosed(StateError):
    """The store was used after `close()`."""

    def __init__(self, path: str) -> None:
        super().__init__(f"state store {path} is closed")
        self.path = path


class TransactionFinished(StateError):
    """A transaction was used after its `commit()` or `abort()`."""

    def __init__(self, path: str) -> None:
        super().__init__(f"transaction on state store {path} is already committed or aborted")


class StateWriteFailed(StateError):
    """A commit's write failed; raised as such (whether it landed is unknown until the store
    is reopened) unless a subclass says more."""

    what = "failed (outcome unknown)"

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"commit to state store {path} {self.what}: {cause}")
        self.path, self.cause = path, cause


class StateDiskFull(StateWriteFailed, DiskFull):
    """A commit failed because the disk is full; nothing of it was written."""

    what = (
        "failed, the disk is full; nothing was written. RocksDB refuses every later write "
        "of this open store: free space, then restart the process"
    )


class StateWriteReadOnly(StateWriteFailed):
    """A commit failed: the file system is read-only or refused permission."""

    what = "failed, the file system is read-only or refused permission; nothing was written"


class StateDirGone(StateWriteFailed, DataDirGone):
    """The store's directory was deleted or replaced while open: every write is refused."""

    what = (
        "refused, nothing was written (close it and open a new one to use what is now at that path)"
    )


class InvalidStateKey(StateError, ValueError):
    """A key, value, topic, partition or offset given to a transaction is not storable."""
