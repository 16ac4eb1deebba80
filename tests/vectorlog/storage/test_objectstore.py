"""The ObjectStore contract, one suite run on every backend, plus what only a local directory
can show (another process crashing mid-put, a full disk, file modes).

`ObjectStoreConformance` holds the tests; a backend subclasses it and says how to make a store
and what it physically holds (temporary files included), eventsourcing's tests/persistence.py
style. Backends: a local directory and a non-local pyarrow file system (pyarrow's in-memory
mock, which takes the object-store code path) through `PyArrowObjectStore`, and the
`MemoryObjectStore` twin.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from pyarrow._fs import _MockFileSystem

from vectorlog.core.errors import VectorlogError
from vectorlog.core.faults import CRASH_EXIT, ENV, CrashPointReached, armed
from vectorlog.storage.errors import (
    InvalidObjectPath,
    ObjectNotFound,
    StorageError,
    StorageFull,
    StoragePermissionDenied,
)
from vectorlog.storage.objectstore import (
    PUT_CRASH_POINT,
    MemoryObjectStore,
    ObjectStore,
    PyArrowObjectStore,
)

CHILD = Path(__file__).with_name("storage_child.py")
PATH = "insert_log/1/2/3/100/7"


class ObjectStoreConformance:
    """Tests every ObjectStore backend passes. Subclasses implement the two hooks."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        raise NotImplementedError

    def stored_names(self, store: Any) -> list[str]:
        """Every name the backend physically holds, temporary files included, sorted."""
        raise NotImplementedError

    # -- put / get -------------------------------------------------------------------------
    def test_what_is_put_is_got_back(self, store: ObjectStore) -> None:
        assert not store.exists(PATH)
        store.put(PATH, b"\x00binlog\xff" * 1000)
        assert store.get(PATH) == b"\x00binlog\xff" * 1000
        assert store.exists(PATH) and store.size(PATH) == 8000
        store.put("empty", b"")
        assert store.get("empty") == b"" and store.size("empty") == 0
        store.put("view", memoryview(bytearray(b"abc")))
        assert store.get("view") == b"abc"

    def test_a_put_replaces_the_whole_object(self, store: ObjectStore) -> None:
        store.put(PATH, b"x" * 5000)
        store.put(PATH, b"short")
        assert store.get(PATH) == b"short" and store.size(PATH) == 5
        assert store.list() == [PATH]

    def test_list_is_recursive_sorted_relative_and_by_folder(self, store: ObjectStore) -> None:
        names = ["insert_log/1/2/3/100/9", "insert_log/10/x", "delta_log/1/2/3/8", "top"]
        for name in [*names, PATH]:
            store.put(name, name.encode())
        assert store.list() == sorted([*names, PATH])
        assert store.list("insert_log/1") == ["insert_log/1/2/3/100/7", "insert_log/1/2/3/100/9"]
        assert store.list("insert_log/1/") == store.list("insert_log/1")
        assert store.list("insert_log/1/2/3/100/7") == []  # an object is not a folder
        assert store.list("nothing/here") == [] and store.list("/") == store.list()

    def test_delete_removes_and_a_missing_object_is_no_error(self, store: ObjectStore) -> None:
        store.put(PATH, b"a")
        store.put("other", b"b")
        store.delete(PATH)
        store.delete(PATH)
        store.delete("never/written")
        assert not store.exists(PATH) and store.list() == ["other"]

    def test_a_missing_object_is_an_error_naming_its_path(self, store: ObjectStore) -> None:
        for read in (store.get, store.size):
            with pytest.raises(ObjectNotFound) as err:
                read("delta_log/9/9/9/1")
            assert err.value.path == "delta_log/9/9/9/1" and "delta_log/9/9/9/1" in str(err.value)
            assert isinstance(err.value, StorageError) and isinstance(err.value, VectorlogError)
        store.put(PATH, b"a")
        with pytest.raises(ObjectNotFound):
            store.get("insert_log/1/2")  # a folder is not an object
        assert not store.exists("insert_log/1/2")

    @pytest.mark.parametrize("bad", ["", "/abs", "a//b", "a/../b", "./a", "a/", ".tmp", "a\\b"])
    def test_paths_must_be_relative_and_normalized(self, store: ObjectStore, bad: str) -> None:
        with pytest.raises(InvalidObjectPath) as err:
            store.put(bad, b"x")
        assert isinstance(err.value, ValueError) and isinstance(err.value, StorageError)
        with pytest.raises(InvalidObjectPath):
            store.get(bad)

    def test_a_path_is_not_both_an_object_and_a_folder(self, store: ObjectStore) -> None:
        store.put("a/b", b"object")
        store.put("x/y/z", b"deep")
        with pytest.raises(StorageError) as err:
            store.put("a/b/c", b"under an object")
        assert "a/b/c" in str(err.value)
        with pytest.raises(StorageError):
            store.put("x/y", b"over a folder")
        assert store.list() == ["a/b", "x/y/z"] and store.get("x/y/z") == b"deep"

    # -- atomicity -------------------------------------------------------------------------
    def test_a_put_cut_short_leaves_the_old_object(self, store: ObjectStore) -> None:
        store.put(PATH, b"old")
        with armed(PUT_CRASH_POINT) as reached, pytest.raises(CrashPointReached):
            store.put(PATH, b"new" * 1000)
        assert PUT_CRASH_POINT in reached
        assert store.get(PATH) == b"old" and store.list() == [PATH]
        with armed(PUT_CRASH_POINT), pytest.raises(CrashPointReached):
            store.put("fresh/object", b"new")
        assert not store.exists("fresh/object")
        assert self.stored_names(store) == [PATH]  # no temporary file left behind

    def test_concurrent_readers_see_whole_objects_only(self, store: ObjectStore) -> None:
        versions = [bytes([65 + i]) * 300_000 for i in range(3)]
        store.put(PATH, versions[0])
        stop = threading.Event()

        def write() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                store.put(PATH, versions[n % 3])

        writer = threading.Thread(target=write)
        writer.start()
        try:
            for _ in range(400):  # the writer keeps replacing the object meanwhile
                data = store.get(PATH)
                assert data in versions, f"a partial object of {len(data)} B was read"
        finally:
            stop.set()
            writer.join()
        assert self.stored_names(store) == [PATH]


# ------------------------------------------------------------------------------ backends


class TestPyArrowLocalStore(ObjectStoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        return PyArrowObjectStore(tmp_path / "storage")

    def stored_names(self, store: Any) -> list[str]:
        root = Path(store.root)
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    def test_objects_are_plain_files_under_the_root(self, tmp_path: Path) -> None:
        store = PyArrowObjectStore(f"file://{tmp_path}/via-uri")
        store.put(PATH, b"binlog")
        assert (tmp_path / "via-uri" / PATH).read_bytes() == b"binlog"
        assert PyArrowObjectStore(str(tmp_path / "via-uri")).get(PATH) == b"binlog"

    def test_a_crash_mid_put_in_another_process_keeps_the_old_object(self, tmp_path: Path) -> None:
        store = PyArrowObjectStore(tmp_path / "storage")
        store.put(PATH, b"old")
        child = run_child("put", store.root, PATH, env={ENV: PUT_CRASH_POINT})
        assert child.returncode == CRASH_EXIT, child.stderr
        assert store.get(PATH) == b"old" and store.list() == [PATH]
        leftovers = [n for n in self.stored_names(store) if n != PATH]
        assert len(leftovers) == 1 and "/." in "/" + leftovers[0]  # a hidden temporary file
        store.put(PATH, b"after")
        assert store.get(PATH) == b"after" and store.list() == [PATH]

    def test_a_full_disk_is_reported_and_keeps_the_old_object(
        self, store: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store.put(PATH, b"old")

        def no_space(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fsync", no_space)
        with pytest.raises(StorageFull) as err:
            store.put(PATH, b"new")
        assert err.value.path == PATH and "No space left on device" in str(err.value)
        monkeypatch.undo()
        assert store.get(PATH) == b"old" and self.stored_names(store) == [PATH]

    def test_a_read_only_directory_refuses_puts_and_reads(self) -> None:
        # root ignores file modes: then the child drops to an unprivileged user (nobody)
        as_user = ("65534",) if os.geteuid() == 0 else ()
        top = Path(tempfile.mkdtemp(prefix="storage-ro-"))
        try:
            store = PyArrowObjectStore(top / "storage")
            store.put(PATH, b"old")
            store.put("secret", b"s")
            for path in [top, *top.rglob("*")]:
                path.chmod(0o555 if path.is_dir() else 0o444)
            (top / "storage" / "secret").chmod(0)
            reported = run_json("put", str(top / "storage"), PATH, *as_user)
            assert reported["error"] == "StoragePermissionDenied", reported
            assert PATH in reported["message"] and "Permission denied" in reported["message"]
            reported = run_json("get", str(top / "storage"), "secret", *as_user)
            assert reported["error"] == "StoragePermissionDenied", reported
            assert store.get(PATH) == b"old"
        finally:
            for path in [top, *top.rglob("*")]:
                path.chmod(path.stat().st_mode | stat.S_IRWXU)
            shutil.rmtree(top)


class TestPyArrowObjectStorePath(ObjectStoreConformance):
    """A non-local pyarrow file system (as S3 would be): temporary object, then move."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        return PyArrowObjectStore("bucket/root", filesystem=_MockFileSystem())

    def stored_names(self, store: Any) -> list[str]:
        selector = pafs.FileSelector(store.root, recursive=True)
        infos = store._fs.get_file_info(selector)
        cut = len(store.root) + 1
        return sorted(i.path[cut:] for i in infos if i.type == pafs.FileType.File)


class TestMemoryObjectStore(ObjectStoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        return MemoryObjectStore()

    def stored_names(self, store: Any) -> list[str]:
        return sorted(store._objects)


# ------------------------------------------------------------------------------ children


def run_child(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def run_json(*args: str) -> dict[str, Any]:
    """Runs one operation in a child process (as the uid, if given); returns its report."""
    child = run_child(*args)
    assert child.returncode == 0, child.stderr
    result: dict[str, Any] = json.loads(child.stdout)
    return result


@pytest.mark.parametrize("cls", [StorageFull, StoragePermissionDenied, ObjectNotFound])
def test_a_storage_error_crosses_a_spark_task_boundary_as_itself(cls: type[StorageError]):
    """A bulk insert's Spark task returns its error to the driver pickled; a full disk there
    raised TypeError (unpickling called __init__ with the message alone), found by the
    disk-full fault campaign."""
    err = cls("insert_log/1/2", "[Errno 28] No space left on device", store="/data")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err)
    assert (back.path, back.cause, back.store) == (err.path, err.cause, err.store)
