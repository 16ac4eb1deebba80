"""Errors of the data node's storage layer.

`StorageError` and its subclasses: the object store failed; each names the object's path and
the cause (the operating system's or the object store's own message). `InvalidPayload`: values
handed to a binlog or stats writer do not fit the declared Milvus data type; nothing was written.
"""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import InvalidArgument, VectorlogError


class StorageError(VectorlogError):
    """An object store operation failed; `path` is the object's path, `cause` why."""

    what = "failed"

    def __init__(self, path: str, cause: str, *, store: str = "") -> None:
        where = f" in {store}" if store else ""
        super().__init__(f"object {path!r}{where} {self.what}: {cause}")
        self.path, self.cause, self.store = path, cause, store

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as itself: a Spark task (bulk insert, compaction) returns it to the driver,
        which re-raises it (the default pickle would call __init__ with the message alone)."""
        return (_rebuilt, (type(self), self.path, self.cause, self.store))


def _rebuilt(cls: type[StorageError], path: str, cause: str, store: str) -> StorageError:
    return cls(path, cause, store=store)


class ObjectNotFound(StorageError):
    """No object exists at the path."""

    what = "does not exist"


class StoragePermissionDenied(StorageError):
    """The store refused access (file modes, a read-only file system, missing credentials)."""

    what = "cannot be accessed (permission denied)"


class StorageFull(StorageError):
    """The store has no space left (disk full, quota exceeded); the old object, if any, is kept."""

    what = "could not be written (no space left)"


class InvalidObjectPath(StorageError, ValueError):
    """A path is not a relative, normalized object path (empty, absolute, `..`, `//`)."""

    what = "is not a valid object path"


class InvalidPayload(InvalidArgument):
    """Values do not fit the Milvus data type they are to be written as (names both)."""
