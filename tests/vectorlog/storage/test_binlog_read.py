"""The product's insert binlog reader (binlog_read.py), for the index node: what the writer
wrote reads back exactly; damaged files are refused naming the file and the fault."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vectorlog.storage.binlog import DataTypeCode, insert_binlog
from vectorlog.storage.binlog_read import (
    CorruptBinlog,
    float_vectors,
    int64s,
    read_insert_binlog,
)

IDS: dict[str, Any] = {"collection_id": 1, "partition_id": 2, "segment_id": 3}


def vectors_binlog(v: np.ndarray) -> bytes:
    return insert_binlog(
        **IDS, field_id=101, data_type=DataTypeCode.FLOAT_VECTOR, values=v,
        start_ts=5, end_ts=9, write_ts=10, dim=v.shape[1],
    )  # fmt: skip


def test_vectors_and_row_ids_read_back_exactly():
    v = np.random.default_rng(0).random((300, 12), dtype=np.float32)
    column = read_insert_binlog(vectors_binlog(v), "p")
    assert (column.collection_id, column.partition_id, column.segment_id, column.field_id) == (
        1, 2, 3, 101,
    )  # fmt: skip
    assert np.array_equal(float_vectors(column), v)
    ids = np.arange(7, 307, dtype=np.int64)
    raw = insert_binlog(
        **IDS, field_id=0, data_type=DataTypeCode.INT64, values=ids, start_ts=5, end_ts=9,
        write_ts=10,
    )  # fmt: skip
    assert np.array_equal(int64s(read_insert_binlog(raw)), ids)
    with pytest.raises(CorruptBinlog, match="not Int64"):
        int64s(column, "p")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:40], "runs past the end|claims"),
        (lambda b: b"\x00" + b[1:], "no binlog magic"),
        (lambda b: b[:-20], "claims"),
        (lambda b: b[:-200] + b"\x00" * 200, "ArrowInvalid|Parquet|corrupt"),
    ],
)
def test_a_damaged_binlog_is_refused_naming_the_file(damage, message):
    data = vectors_binlog(np.ones((50, 4), dtype=np.float32))
    with pytest.raises(CorruptBinlog, match=f"binlog 'insert_log/x'.*({message})"):
        read_insert_binlog(damage(data), "insert_log/x")
