"""The object store the data node writes binlogs to: the `ObjectStore` contract, a `pyarrow.fs`
backend (a local directory or any pyarrow URI such as `s3://bucket/prefix`) and an in-memory twin
for unit tests.

The contract:
- paths are relative, `/`-separated and normalized (`insert_log/1/2/3/100/7`); names starting
  with `.` are reserved for the store's temporary files;
- `put` is atomic: a reader sees the old object or the new one, never part of one, and a put
  that fails or is cut short (an exception, a crash) leaves the old object as it was;
- `list(prefix)` returns every object under the folder `prefix` (all objects for ""),
  recursively, as sorted relative paths; temporary files are never listed;
- `delete` of a missing object is not an error (as in S3), so a cleanup retried after a crash
  succeeds;
- a path cannot be an object and a folder at once (as on a file system);
- failures raise `StorageError` subclasses naming the path and the cause: `ObjectNotFound`,
  `StoragePermissionDenied`, `StorageFull`, `InvalidObjectPath`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Protocol

import pyarrow.fs as pafs

from vectorlog.core.faults import crash_point
from vectorlog.storage.errors import (
    InvalidObjectPath,
    ObjectNotFound,
    StorageError,
    StorageFull,
    StoragePermissionDenied,
)

#: What `put` accepts: any contiguous bytes-like object.
Data = bytes | bytearray | memoryview
#: Passed once a put's bytes are written (to a temporary object) and before they are published.
PUT_CRASH_POINT = "storage.put.before_publish"
#: Part of every temporary file's name (`.{name}.tmp-{random}`), beside its final path.
TEMP_MARKER = ".tmp-"


class ObjectStore(Protocol):
    """Where binlogs live. See the module docstring for the contract every backend keeps."""

    def put(self, path: str, data: Data) -> None:
        """Stores `data` at `path` atomically, replacing any object there."""
        ...

    def get(self, path: str) -> bytes:
        """Returns the object at `path`; raises ObjectNotFound if there is none."""
        ...

    def exists(self, path: str) -> bool:
        """Returns whether an object exists at `path`."""
        ...

    def list(self, prefix: str = "") -> list[str]:
        """Returns the sorted paths of every object under the folder `prefix`."""
        ...

    def delete(self, path: str) -> None:
        """Deletes the object at `path`, if any."""
        ...

    def size(self, path: str) -> int:
        """Returns the object's size in bytes; raises ObjectNotFound if there is none."""
        ...


def check_path(path: str) -> str:
    """Returns `path` if it is a valid object path, else raises InvalidObjectPath."""
    if not isinstance(path, str) or not path:
        raise InvalidObjectPath(repr(path), "an object path is a non-empty str")
    reason = ""
    if path.startswith("/") or "\\" in path or "\x00" in path:
        reason = "it must be relative, '/'-separated, without NUL"
    elif any(part in ("", ".", "..") for part in path.split("/")):
        reason = "it must be normalized (no empty, '.' or '..' parts, no trailing '/')"
    elif any(part.startswith(".") for part in path.split("/")):
        reason = "names starting with '.' are reserved for temporary files"
    if reason:
        raise InvalidObjectPath(path, reason)
    return path


def check_prefix(prefix: str) -> str:
    """Returns a folder prefix without its trailing '/' ("" for everything), else raises."""
    if prefix in ("", "/"):
        return ""
    return check_path(prefix[:-1] if prefix.endswith("/") else prefix)


def is_temp(path: str) -> bool:
    """Returns whether `path` names a store's temporary file."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") and TEMP_MARKER in name


class PyArrowObjectStore:
    """An ObjectStore on `pyarrow.fs`: a local directory (created if missing) or any URI that
    `pyarrow.fs.FileSystem.from_uri` accepts (`s3://bucket/prefix?region=...`, `gs://...`,
    `file:///...`). Pass `filesystem` to use a configured pyarrow FileSystem with root path
    `uri_or_dir`.

    Local puts write a temporary file beside the target, fsync it, rename it over the target
    and fsync the directory. Other file systems write a temporary object and move it into
    place (on S3 a server-side copy: the object appears whole or not at all).
    """

    def __init__(
        self, uri_or_dir: str | os.PathLike[str], *, filesystem: pafs.FileSystem | None = None
    ) -> None:
        location = os.fspath(uri_or_dir)
        if filesystem is not None:
            self._fs, root = filesystem, location
        elif "://" in location:
            self._fs, root = pafs.FileSystem.from_uri(location)
        else:
            self._fs, root = pafs.LocalFileSystem(), os.path.abspath(location)
        self._local = isinstance(self._fs, pafs.LocalFileSystem)
        self.root = root if root in ("", "/") else root.rstrip("/")
        self._prefix = self.root if self.root in ("", "/") else self.root + "/"
        self.location = location
        if self._local:
            with self._oserrors(self.root):
                _makedirs_synced(self.root)

    def __repr__(self) -> str:
        return f"PyArrowObjectStore({self.location!r})"

    def put(self, path: str, data: Data) -> None:
        """Stores `data` at `path` atomically (see the class docstring)."""
        full = self._full(check_path(path))
        directory, slash, name = full.rpartition("/")
        temp = f"{directory}{slash}.{name}{TEMP_MARKER}{uuid.uuid4().hex}"
        directory = directory or slash  # an object at the top of a local root "/"
        try:
            with self._oserrors(path):
                if self._local:
                    _put_local(directory, temp, full, data)
                else:
                    self._put_remote(directory, temp, full, data)
        except BaseException:
            _quietly(lambda: self._fs.delete_file(temp))
            raise

    def _put_remote(self, directory: str, temp: str, full: str, data: Data) -> None:
        if directory:
            self._fs.create_dir(directory, recursive=True)
        with self._fs.open_output_stream(temp) as out:
            out.write(data)
        crash_point(PUT_CRASH_POINT)
        if self._fs.get_file_info(full).type == pafs.FileType.Directory:
            raise IsADirectoryError(errno.EISDIR, "a folder is in the way", full)
        self._fs.move(temp, full)

    def get(self, path: str) -> bytes:
        """Returns the object at `path`; raises ObjectNotFound if there is none."""
        full = self._full(check_path(path))
        with self._oserrors(path), self._fs.open_input_file(full) as f:
            return bytes(f.readall())

    def exists(self, path: str) -> bool:
        """Returns whether an object (not a folder) exists at `path`."""
        return self._info(path).type == pafs.FileType.File

    def size(self, path: str) -> int:
        """Returns the object's size in bytes; raises ObjectNotFound if there is none."""
        info = self._info(path)
        if info.type != pafs.FileType.File:
            raise ObjectNotFound(path, "no such object", store=self.location)
        return int(info.size)

    def list(self, prefix: str = "") -> list[str]:
        """Returns the sorted relative paths of every object under the folder `prefix`."""
        folder = check_prefix(prefix)
        selector = pafs.FileSelector(self._full(folder), recursive=True, allow_not_found=True)
        with self._oserrors(folder or "/"):
            try:
                infos = self._fs.get_file_info(selector)
            except NotADirectoryError:
                return []
        cut = len(self._prefix)
        files = (i.path[cut:] for i in infos if i.type == pafs.FileType.File)
        return sorted(p for p in files if not is_temp(p))

    def delete(self, path: str) -> None:
        """Deletes the object at `path`; a missing object is not an error."""
        full = self._full(check_path(path))
        with self._oserrors(path), contextlib.suppress(FileNotFoundError):
            self._fs.delete_file(full)

    def _info(self, path: str) -> pafs.FileInfo:
        full = self._full(check_path(path))
        with self._oserrors(path):
            return self._fs.get_file_info(full)

    def _full(self, path: str) -> str:
        return self._prefix + path if path else self.root

    @contextlib.contextmanager
    def _oserrors(self, path: str) -> Iterator[None]:
        """Raises the StorageError for an OSError inside the block, naming `path`."""
        try:
            yield
        except OSError as exc:
            raise storage_error(path, exc, self.location) from exc


def storage_error(path: str, exc: OSError, store: str = "") -> StorageError:
    """Returns the StorageError subclass for an OSError: by its errno, or else by the object
    store's error code in the message (S3's ACCESS_DENIED, NoSuchKey, quota)."""
    cause = str(exc) or type(exc).__name__
    if exc.errno is not None:
        kind = _BY_ERRNO.get(exc.errno, StorageError)
    else:
        upper = cause.upper().replace("_", "").replace(" ", "")
        kind = next((k for word, k in _BY_MESSAGE if word in upper), StorageError)
    return kind(path, cause, store=store)


_BY_ERRNO: dict[int, type[StorageError]] = {
    errno.ENOENT: ObjectNotFound,
    errno.EACCES: StoragePermissionDenied,
    errno.EPERM: StoragePermissionDenied,
    errno.EROFS: StoragePermissionDenied,
    errno.ENOSPC: StorageFull,
    errno.EDQUOT: StorageFull,
    errno.EFBIG: StorageFull,
}
_BY_MESSAGE: list[tuple[str, type[StorageError]]] = [
    ("ACCESSDENIED", StoragePermissionDenied),
    ("NOSUCHKEY", ObjectNotFound),
    ("ISADIRECTORY", ObjectNotFound),
    ("NOTAREGULARFILE", ObjectNotFound),
    ("PATHDOESNOTEXIST", ObjectNotFound),
    ("QUOTA", StorageFull),
]


def _put_local(directory: str, temp: str, full: str, data: Data) -> None:
    """Writes `temp`, fsyncs it, renames it over `full` and fsyncs the directory."""
    _makedirs_synced(directory)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    crash_point(PUT_CRASH_POINT)
    os.replace(temp, full)
    _fsync_dir(directory)


def _makedirs_synced(directory: str) -> None:
    """Creates `directory` and its missing parents, fsyncing each parent that gained one."""
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(directory)
    if parent != directory:
        _makedirs_synced(parent)
    try:
        os.mkdir(directory)
    except FileExistsError:
        if not os.path.isdir(directory):
            raise
        return
    _fsync_dir(parent)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _quietly(action: Callable[[], object]) -> None:
    """Runs a cleanup action, ignoring any error (the original one is being raised)."""
    with contextlib.suppress(Exception):
        action()


class MemoryObjectStore:
    """The ObjectStore contract in a dict of this process, FOR UNIT TESTS ONLY: nothing is
    durable and nothing is shared with other processes. Thread-safe."""

    location = "memory"

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, path: str, data: Data) -> None:
        """Stores a copy of `data` at `path` (atomic: one dict assignment)."""
        check_path(path)
        copy = bytes(data)
        crash_point(PUT_CRASH_POINT)
        with self._lock:
            self._check_no_conflict(path)
            self._objects[path] = copy

    def _check_no_conflict(self, path: str) -> None:
        parts = path.split("/")
        parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
        blocked = next((p for p in parents if p in self._objects), None)
        if blocked is None and any(key.startswith(path + "/") for key in self._objects):
            blocked = path
        if blocked is not None:
            raise StorageError(path, f"{blocked!r} is both an object and a folder", store="memory")

    def get(self, path: str) -> bytes:
        """Returns the object at `path`; raises ObjectNotFound if there is none."""
        check_path(path)
        with self._lock:
            data = self._objects.get(path)
        if data is None:
            raise ObjectNotFound(path, "no such object", store=self.location)
        return data

    def exists(self, path: str) -> bool:
        """Returns whether an object exists at `path`."""
        check_path(path)
        with self._lock:
            return path in self._objects

    def size(self, path: str) -> int:
        """Returns the object's size in bytes; raises ObjectNotFound if there is none."""
        return len(self.get(path))

    def list(self, prefix: str = "") -> list[str]:
        """Returns the sorted paths of every object under the folder `prefix`."""
        folder = check_prefix(prefix)
        with self._lock:
            keys = list(self._objects)
        return sorted(k for k in keys if not folder or k.startswith(folder + "/"))

    def delete(self, path: str) -> None:
        """Deletes the object at `path`; a missing object is not an error."""
        check_path(path)
        with self._lock:
            self._objects.pop(path, None)
