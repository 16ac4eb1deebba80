"""Building the indexes faiss's float indexes do not cover, of one Flushed segment from its
insert logs: the sparse inverted index (SPARSE_INVERTED_INDEX, SPARSE_WAND) of a
SPARSE_FLOAT_VECTOR field (vectorlog/storage/sparse_index.py says what it is and how its file
is laid out), and faiss's binary indexes (BIN_FLAT, BIN_IVF_FLAT) of a BINARY_VECTOR field."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import faiss
import numpy as np

from vectorlog.core.model import DataType
from vectorlog.storage import sparse_index
from vectorlog.storage.binlog_read import InsertColumn, packed_rows
from vectorlog.storage.column_read import field_values


def build_sparse(
    logs: Iterable[tuple[InsertColumn, str]], params: dict[str, Any]
) -> tuple[bytes, int, dict[str, str]]:
    """Returns (the index file's bytes, its rows, the effective params) of a segment's
    sparse insert logs ((column, path) each, in row order). Raises CorruptBinlog for a log
    that holds no valid sparse rows, InvalidArgument for a bad drop_ratio_build."""
    drop = sparse_index.ratio(params, "drop_ratio_build")
    rows: list[bytes] = []
    for column, path in logs:
        rows.extend(field_values(column, DataType.SPARSE_FLOAT_VECTOR, path=path))
    postings = sparse_index.build(rows, drop)
    return sparse_index.serialize(postings), len(rows), {"drop_ratio_build": str(drop)}


def build_binary(
    logs: Iterable[tuple[InsertColumn, str]], kind: str, params: dict[str, Any], min_rows: int
) -> tuple[bytes, int, str, dict[str, str]]:
    """Returns (the faiss binary index's bytes, its rows, the type built, effective params)
    of a segment's BINARY_VECTOR insert logs: BIN_IVF_FLAT as faiss's IndexBinaryIVF (nlist
    capped to rows // 39; below `min_rows` rows, BIN_FLAT as Milvus builds small segments),
    BIN_FLAT as IndexBinaryFlat."""
    parts = [packed_rows(column, path) for column, path in logs]
    x = np.ascontiguousarray(np.concatenate(parts)) if parts else np.zeros((0, 1), np.uint8)
    dim = 8 * x.shape[1]
    nlist = max(1, min(int(params.get("nlist", 128)), len(x) // 39))
    if kind == "BIN_IVF_FLAT" and len(x) >= min_rows:
        index: Any = faiss.IndexBinaryIVF(faiss.IndexBinaryFlat(dim), dim, nlist)
        index.train(x)
        built, out = "BIN_IVF_FLAT", {"nlist": str(nlist)}
    else:
        index, built, out = faiss.IndexBinaryFlat(dim), "BIN_FLAT", {}
    index.add(x)
    return faiss.serialize_index_binary(index).tobytes(), len(x), built, out
