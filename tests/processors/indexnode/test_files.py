"""Index files through the object store: the paths of DESIGN.md s.5, a round trip of the
serialized faiss index and its row ids, and deleting one build."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.indexnode.builder import build_index, parse_spec
from vectorlog.processors.indexnode.files import (
    build_paths,
    delete_build,
    read_index_files,
    write_index_files,
)
from vectorlog.storage.errors import ObjectNotFound
from vectorlog.storage.objectstore import MemoryObjectStore, ObjectStore, PyArrowObjectStore


@pytest.fixture(params=["memory", "pyarrow"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    return MemoryObjectStore() if request.param == "memory" else PyArrowObjectStore(tmp_path / "s")


def test_paths_follow_the_storage_layout():
    assert build_paths(1, 2, 3, 44) == (
        "index_files/1/2/3/44/index.faiss",
        "index_files/1/2/3/44/row_ids.npy",
    )


def test_an_index_and_its_row_ids_round_trip(store: ObjectStore):
    x = np.random.default_rng(0).random((1500, 8), dtype=np.float32)
    built = build_index(x, parse_spec("HNSW", "L2", {"M": "8"}))
    row_ids = np.arange(1000, 2500, dtype=np.int64)
    paths = build_paths(1, 2, 3, 44)
    write_index_files(store, paths, built.index, row_ids)
    index, ids = read_index_files(store, *paths)
    assert isinstance(index, faiss.IndexHNSWFlat) and index.ntotal == 1500
    assert ids.dtype == np.int64 and np.array_equal(ids, row_ids)
    _, positions = index.search(x[7:8], 1)
    assert ids[positions[0, 0]] == 1007
    raw = np.load(Path(store.root) / paths[1]) if isinstance(store, PyArrowObjectStore) else ids
    assert np.array_equal(raw, row_ids)  # a plain .npy any numpy reads


def test_deleting_a_build_removes_its_files_only(store: ObjectStore):
    index = build_index(np.eye(4, dtype=np.float32), parse_spec("FLAT", "IP", {})).index
    first, second = build_paths(1, 2, 3, 44), build_paths(1, 2, 3, 45)
    for paths in (first, second):
        write_index_files(store, paths, index, np.arange(4))
    delete_build(store, first[0])
    checksums = f"{second[0].rsplit('/', 1)[0]}/checksums.json"
    assert store.list("index_files") == sorted([*second, checksums])
    with pytest.raises(ObjectNotFound):
        read_index_files(store, *first)
    delete_build(store, first[0])  # again: nothing left, no error


def test_a_build_whose_bytes_changed_is_refused(store: ObjectStore):
    index = build_index(np.eye(4, dtype=np.float32), parse_spec("FLAT", "IP", {})).index
    paths = build_paths(1, 2, 3, 44)
    write_index_files(store, paths, index, np.arange(4))
    for path in paths:
        good = store.get(path)
        store.put(path, good[:-1] + bytes([good[-1] ^ 1]))
        with pytest.raises(InvalidArgument, match="checksum mismatch"):
            read_index_files(store, *paths)
        store.put(path, good)
    assert read_index_files(store, *paths)[0].ntotal == 4
