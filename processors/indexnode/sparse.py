"""Building the sparse inverted index (SPARSE_INVERTED_INDEX, SPARSE_WAND) of one Flushed
segment's SPARSE_FLOAT_VECTOR field from its insert logs (vectorlog/storage/sparse_index.py
says what the index is and how its file is laid out)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vectorlog.core.model import DataType
from vectorlog.storage import sparse_index
from vectorlog.storage.binlog_read import InsertColumn
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
