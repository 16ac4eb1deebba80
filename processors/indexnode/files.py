"""Index files in the object store: one build's serialized faiss index and row ids under
`index_files/{collection}/{partition}/{segment}/{build_id}/` (DESIGN.md s.5).

`index.faiss` is `faiss.serialize_index(index)` (a scalar index: `index.arrow`, an Arrow IPC
file, see scalar.py); `row_ids.npy` is an int64 `.npy` array:
position i of the index is the segment's binlog row i, whose row id is row_ids[i];
`checksums.json` holds the xxh3-64 digest of each of the two (`verify_build` checks them as a
reader gets the files: a build written before checksums existed has none and is not checked).
Each file is put atomically, the index last; a build is complete only once a SegmentIndexed
event names both (files of a build nothing reports are orphans the index node deletes at
recovery).
"""

from __future__ import annotations

import io
import json
from typing import Any

import faiss
import numpy as np
import xxhash

from vectorlog.core.errors import InvalidArgument
from vectorlog.storage import (
    INDEX_FILES,
    ObjectNotFound,
    ObjectStore,
    index_files_prefix,
)

INDEX_FILE, ROW_ID_FILE, CHECKSUM_FILE = "index.faiss", "row_ids.npy", "checksums.json"
SCALAR_FILE = "index.arrow"


def build_paths(
    collection_id: int, partition_id: int, segment_id: int, build_id: int, scalar: bool = False
) -> tuple[str, str]:
    """Returns (index file, row id file) of one build (`scalar`: a scalar index's),
    relative to the storage root."""
    folder = index_files_prefix(collection_id, partition_id, segment_id, build_id)
    return f"{folder}/{SCALAR_FILE if scalar else INDEX_FILE}", f"{folder}/{ROW_ID_FILE}"


def build_files(index_file: str, row_id_file: str) -> tuple[str, str, str]:
    """Returns every file of the build whose index and row id files are these: both and
    its checksums file (an orphan sweep that kept only the two would delete the checksums
    of a live build, and its reads would then go unchecked)."""
    return index_file, row_id_file, _checksum_path(index_file)


def collection_folder(collection_id: int) -> str:
    """Returns the folder holding every index file of a collection."""
    return f"{INDEX_FILES}/{int(collection_id)}"


def write_index_files(
    store: ObjectStore, paths: tuple[str, str], index: faiss.Index, row_ids: np.ndarray
) -> None:
    """Writes the index and its row ids (each atomically). Raises StorageError."""
    write_build(store, paths, faiss.serialize_index(index), row_ids)


def write_build(store: ObjectStore, paths: tuple[str, str], data: Any, row_ids: np.ndarray) -> None:
    """Writes a build's index bytes (any buffer), its row ids and their checksums (each
    atomically, the index last). Raises StorageError."""
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(row_ids, dtype="<i8"), allow_pickle=False)
    ids = out.getvalue()
    sums = {_name(paths[0]): _digest(data), ROW_ID_FILE: _digest(ids)}
    store.put(paths[1], ids)
    store.put(_checksum_path(paths[0]), json.dumps(sums).encode())
    store.put(paths[0], memoryview(data).cast("B"))  # its buffer: no second copy


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _digest(data: Any) -> str:
    """Returns the xxh3-64 hex digest of a buffer (bytes, a contiguous numpy array)."""
    return str(xxhash.xxh3_64_hexdigest(memoryview(data)))


def _checksum_path(index_file: str) -> str:
    return f"{index_file.rsplit('/', 1)[0]}/{CHECKSUM_FILE}"


def verify_build(store: Any, index_file: str, data: Any, row_ids: Any) -> None:
    """Checks a build's index and row id bytes (any buffers) against its checksums file
    (`store.get(path) -> bytes`; a build without one is not checked). Raises InvalidArgument
    naming the file that does not match, StorageError if the checksums cannot be read."""
    try:
        sums = json.loads(store.get(_checksum_path(index_file)))
    except ObjectNotFound:
        return  # written before index files had checksums
    except ValueError:
        raise InvalidArgument(f"the checksums of index build {index_file!r} are garbled") from None
    for name, got in ((_name(index_file), data), (ROW_ID_FILE, row_ids)):
        if not isinstance(sums, dict) or sums.get(name) != _digest(got):
            raise InvalidArgument(f"{name} of index build {index_file!r}: checksum mismatch")


def read_index_files(
    store: ObjectStore, index_file: str, row_id_file: str
) -> tuple[faiss.Index, np.ndarray]:
    """Returns (index, row ids) of a build. Raises StorageError (ObjectNotFound if missing),
    InvalidArgument if a file does not match its checksum."""
    data, ids = store.get(index_file), store.get(row_id_file)
    verify_build(store, index_file, data, ids)
    index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    row_ids = np.load(io.BytesIO(ids), allow_pickle=False)
    return index, row_ids


def delete_build(store: ObjectStore, index_file: str) -> None:
    """Deletes every file of the build whose index file is `index_file` (missing ones too)."""
    folder = index_file.rsplit("/", 1)[0]
    for path in store.list(folder):
        store.delete(path)
