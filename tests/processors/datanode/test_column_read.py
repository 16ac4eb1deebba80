"""Binlog columns back in the dml log's form (column_read.py), for the query node's recovery:
every field type the writer writes reads back equal; delta logs give their keys and ts;
a payload of another type, or a damaged ARRAY row or delete record, is refused by name."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from vectorlog.model import DataType
from vectorlog.processors.datanode.arrays import scalar_field_rows
from vectorlog.processors.datanode.binlog import DataTypeCode, delta_binlog, insert_binlog
from vectorlog.processors.datanode.binlog_read import CorruptBinlog, read_insert_binlog
from vectorlog.processors.datanode.column_read import field_values, read_delta_binlog
from vectorlog.processors.datanode.writer import MILVUS_TYPE

IDS = {"collection_id": 1, "partition_id": 2, "segment_id": 3}


def written(dtype: DataType, values: Any, dim: int | None = None) -> bytes:
    return insert_binlog(
        **IDS, field_id=100, data_type=MILVUS_TYPE[dtype], values=values, start_ts=5,
        end_ts=9, write_ts=10, dim=dim,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (DataType.BOOL, np.array([True, False, True])),
        (DataType.INT8, np.array([-128, 0, 127], dtype=np.int8)),
        (DataType.INT16, np.array([-32768, 5, 32767], dtype=np.int16)),
        (DataType.INT32, np.array([-(2**31), 0, 2**31 - 1], dtype=np.int32)),
        (DataType.INT64, np.array([-(2**63), 0, 2**63 - 1], dtype=np.int64)),
        (DataType.FLOAT, np.array([0.1, -2.5, 3e38], dtype=np.float32)),
        (DataType.DOUBLE, np.array([0.1, -2.5, 1e308])),
    ],
)
def test_numbers_read_back_at_their_own_width(dtype: DataType, values: np.ndarray):
    got = field_values(read_insert_binlog(written(dtype, values)), dtype)
    assert isinstance(got, np.ndarray) and got.dtype == values.dtype
    assert np.array_equal(got, values)


def test_strings_json_and_vectors_read_back_as_the_log_carries_them():
    texts = ["", "héllo ✓", "a" * 300]
    assert (
        field_values(read_insert_binlog(written(DataType.VARCHAR, texts)), DataType.VARCHAR)
        == texts
    )
    docs = ['{"a": [1, {"b": null}]}', "{}", '"x"']
    assert field_values(read_insert_binlog(written(DataType.JSON, docs)), DataType.JSON) == docs
    v = np.random.default_rng(0).random((4, 8), dtype=np.float32)
    got = field_values(
        read_insert_binlog(written(DataType.FLOAT_VECTOR, v, 8)), DataType.FLOAT_VECTOR
    )
    assert np.array_equal(got, v)


@pytest.mark.parametrize(
    ("element", "rows"),
    [
        (DataType.BOOL, [[True, False], [], [True]]),
        (DataType.INT8, [[-128, 127], [0]]),
        (DataType.INT32, [[-(2**31), 2**31 - 1], []]),
        (DataType.INT64, [[-(2**63), 2**63 - 1, -1]]),
        (DataType.FLOAT, [[0.1, -2.5], [1e30]]),
        (DataType.DOUBLE, [[0.1, -1e300]]),
        (DataType.VARCHAR, [["", "é", "x" * 200], []]),
    ],
)
def test_arrays_read_back_as_json_array_texts(element: DataType, rows: list[list[Any]]):
    raw = scalar_field_rows(element, [json.dumps(r) for r in rows])
    column = read_insert_binlog(written(DataType.ARRAY, raw))
    if element is DataType.FLOAT:  # stored as float32, read back as its float32 value
        rows = [[float(np.float32(v)) for v in r] for r in rows]
    assert [json.loads(t) for t in field_values(column, DataType.ARRAY, element)] == rows


def test_delta_logs_give_keys_and_delete_ts():
    for pks, kind in (
        ([1, -5, 2**62], DataTypeCode.INT64),
        (["a", 'é"q', ""], DataTypeCode.VARCHAR),
    ):
        raw = delta_binlog(**IDS, pks=pks, tss=[7, 8, 2**63], pk_type=kind, write_ts=10)
        keys, tss = read_delta_binlog(raw, "d")
        assert keys == pks and tss.dtype == np.uint64 and tss.tolist() == [7, 8, 2**63]


def test_another_type_or_a_damaged_row_is_refused_naming_the_file():
    column = read_insert_binlog(written(DataType.INT64, np.arange(3)))
    with pytest.raises(CorruptBinlog, match="'f'.*INT64 is not VARCHAR"):
        field_values(column, DataType.VARCHAR, path="f")
    bad = read_insert_binlog(written(DataType.ARRAY, [b"\x0a\x05\x01"]))
    with pytest.raises(CorruptBinlog, match="'g'.*ARRAY row"):
        field_values(bad, DataType.ARRAY, DataType.INT64, path="g")
    with pytest.raises(CorruptBinlog, match="'h'.*DELETE|'h'.*not"):
        read_delta_binlog(written(DataType.INT64, np.arange(3)), "h")
