"""Index files in the object store: one build's serialized faiss index and row ids under
`index_files/{collection}/{partition}/{segment}/{build_id}/` (DESIGN.md s.5).

`index.faiss` is `faiss.serialize_index(index)`; `row_ids.npy` is an int64 `.npy` array:
position i of the index is the segment's binlog row i, whose row id is row_ids[i]. Each file is
put atomically; a build is complete only once a SegmentIndexed event names both (files of a
build nothing reports are orphans the index node deletes at recovery).
"""

from __future__ import annotations

import io

import faiss
import numpy as np

from vectorlog.processors.datanode.service import INDEX_FILES, ObjectStore, index_files_prefix

INDEX_FILE, ROW_ID_FILE = "index.faiss", "row_ids.npy"


def build_paths(
    collection_id: int, partition_id: int, segment_id: int, build_id: int
) -> tuple[str, str]:
    """Returns (index file, row id file) of one build, relative to the storage root."""
    folder = index_files_prefix(collection_id, partition_id, segment_id, build_id)
    return f"{folder}/{INDEX_FILE}", f"{folder}/{ROW_ID_FILE}"


def collection_folder(collection_id: int) -> str:
    """Returns the folder holding every index file of a collection."""
    return f"{INDEX_FILES}/{int(collection_id)}"


def write_index_files(
    store: ObjectStore, paths: tuple[str, str], index: faiss.Index, row_ids: np.ndarray
) -> None:
    """Writes the index and its row ids (each atomically). Raises StorageError."""
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(row_ids, dtype="<i8"), allow_pickle=False)
    store.put(paths[1], out.getvalue())
    store.put(paths[0], faiss.serialize_index(index).data)  # its buffer: no second copy


def read_index_files(
    store: ObjectStore, index_file: str, row_id_file: str
) -> tuple[faiss.Index, np.ndarray]:
    """Returns (index, row ids) of a build. Raises StorageError (ObjectNotFound if missing)."""
    index = faiss.deserialize_index(np.frombuffer(store.get(index_file), dtype=np.uint8))
    row_ids = np.load(io.BytesIO(store.get(row_id_file)), allow_pickle=False)
    return index, row_ids


def delete_build(store: ObjectStore, index_file: str) -> None:
    """Deletes every file of the build whose index file is `index_file` (missing ones too)."""
    folder = index_file.rsplit("/", 1)[0]
    for path in store.list(folder):
        store.delete(path)
