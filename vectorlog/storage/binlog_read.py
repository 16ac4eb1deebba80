"""Reader of insert binlogs (Milvus's V1 format, see binlog.py), for the index node: a field's
column back as numpy, every length and offset checked so a damaged file is refused by name.

Only what an index build needs: the descriptor's ids and payload type and the first insert
event's Parquet payload (Milvus's readers read only the first, as its writers write one).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vectorlog.core.errors import VectorlogError
from vectorlog.core.halfvec import to_float32
from vectorlog.storage.binlog import MAGIC, EventTypeCode
from vectorlog.storage.payload import DataTypeCode

_HEADER = struct.Struct("<Qbii")  # timestamp, type code, event length, next position
_DESCRIPTOR_FIXED = struct.Struct("<qqqqQQi")  # 4 ids, start ts, end ts, payload type
_EVENT_FIXED = 16  # start ts, end ts


class CorruptBinlog(VectorlogError):
    """A binlog cannot be read (bad magic, a length past the end, no insert event, a payload
    that is not the declared type); names the file and what is wrong."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"binlog {path!r} is corrupt: {reason}")
        self.path, self.reason = path, reason


@dataclass(frozen=True)
class InsertColumn:
    """One insert binlog: the descriptor's ids and payload type, and the column."""

    collection_id: int
    partition_id: int
    segment_id: int
    field_id: int
    data_type: DataTypeCode
    values: pa.Array


def read_insert_binlog(data: bytes, path: str = "") -> InsertColumn:
    """Returns the column of an insert binlog. Raises CorruptBinlog naming `path`."""
    return read_binlog(data, path, EventTypeCode.INSERT)


def read_binlog(data: bytes, path: str, code: EventTypeCode) -> InsertColumn:
    """Returns the descriptor's ids and the payload column of the first event, which must
    have type `code` (INSERT for insert binlogs, DELETE for delta logs). Raises
    CorruptBinlog naming `path`."""
    try:
        return _read(memoryview(data), path, code)
    except CorruptBinlog:
        raise
    except (struct.error, ValueError, pa.ArrowException, OSError) as exc:
        raise CorruptBinlog(path, f"{type(exc).__name__}: {exc}") from exc


def _read(data: memoryview, path: str, expected: EventTypeCode) -> InsertColumn:
    if len(data) < 4 or struct.unpack_from("<i", data, 0)[0] != MAGIC:
        raise CorruptBinlog(path, "no binlog magic 0xFFFABC at offset 0")
    _, code, length, nxt = _header(data, 4, path)
    if code != EventTypeCode.DESCRIPTOR:
        raise CorruptBinlog(path, f"the first event has type {code}, not the descriptor")
    ids = _DESCRIPTOR_FIXED.unpack_from(data, 4 + _HEADER.size)
    _, code, length, _ = _header(data, nxt, path)
    if code != expected:
        raise CorruptBinlog(path, f"the event at {nxt} has type {code}, not {expected.name}")
    start = nxt + _HEADER.size + _EVENT_FIXED
    payload = data[start : nxt + length]
    table = pq.ParquetFile(pa.BufferReader(pa.py_buffer(payload))).read()  # no dataset import
    if table.num_columns != 1:
        raise CorruptBinlog(path, f"the payload has {table.num_columns} columns, not 1")
    kind = DataTypeCode(ids[6])
    return InsertColumn(ids[0], ids[1], ids[2], ids[3], kind, table.column(0).combine_chunks())


def _header(data: memoryview, at: int, path: str) -> tuple[int, int, int, int]:
    """Returns the event header at `at`, its length and next position checked."""
    if at < 4 or at + _HEADER.size > len(data):
        raise CorruptBinlog(path, f"an event header at {at} runs past the end ({len(data)} B)")
    ts, code, length, nxt = _HEADER.unpack_from(data, at)
    if length < _HEADER.size or at + length > len(data):
        raise CorruptBinlog(path, f"the event at {at} claims {length} B; the file has {len(data)}")
    return ts, code, length, nxt


#: half-float vector codes -> their type's name in core/halfvec.py
HALF_CODES = {
    DataTypeCode.FLOAT16_VECTOR: "FLOAT16_VECTOR",
    DataTypeCode.BFLOAT16_VECTOR: "BFLOAT16_VECTOR",
}


def float_vectors(column: InsertColumn, path: str = "") -> np.ndarray:
    """Returns a FloatVector column as an (n, dim) float32 array (a Float16Vector or
    BFloat16Vector column's values as float32, which holds each exactly). Raises
    CorruptBinlog."""
    values = column.values
    if column.data_type in HALF_CODES and pa.types.is_fixed_size_binary(values.type):
        return to_float32(packed_rows(column, path), HALF_CODES[column.data_type])
    if column.data_type != DataTypeCode.FLOAT_VECTOR or not pa.types.is_fixed_size_binary(
        values.type
    ):
        raise CorruptBinlog(path, f"payload {column.data_type.name} is not a float vector")
    width = values.type.byte_width
    if width % 4 or values.null_count:
        raise CorruptBinlog(path, f"a float vector of {width} B (or a null) cannot be read")
    raw = np.frombuffer(values.buffers()[1], np.uint8)
    raw = raw[values.offset * width : (values.offset + len(values)) * width]
    return raw.view("<f4").reshape(len(values), width // 4)


def packed_rows(column: InsertColumn, path: str = "") -> np.ndarray:
    """Returns a fixed-size binary vector column's rows as (n, row bytes) uint8. Raises
    CorruptBinlog for nulls or another Arrow type."""
    values = column.values
    if not pa.types.is_fixed_size_binary(values.type) or values.null_count:
        raise CorruptBinlog(path, f"payload {column.data_type.name} holds no packed vectors")
    width = values.type.byte_width
    raw = np.frombuffer(values.buffers()[1], np.uint8)
    return raw[values.offset * width : (values.offset + len(values)) * width].reshape(-1, width)


def int64s(column: InsertColumn, path: str = "") -> np.ndarray:
    """Returns an Int64 column (row ids, timestamps, int64 keys) as int64. Raises CorruptBinlog."""
    if column.data_type != DataTypeCode.INT64 or not pa.types.is_int64(column.values.type):
        raise CorruptBinlog(path, f"payload {column.data_type.name} is not Int64")
    return numbers(column.values, np.dtype(np.int64))


def numbers(values: pa.Array, dtype: np.dtype) -> np.ndarray:
    """Returns a fixed-width numeric (or bool) Arrow array without nulls as numpy `dtype`,
    read from its buffers (Arrow's own conversion imports pandas: 0.3 s at the first call)."""
    n, at = len(values), values.offset
    data = values.buffers()[1]
    if data is None or values.null_count:
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=dtype)
    if pa.types.is_boolean(values.type):
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[at : at + n].astype(np.bool_)
    raw = np.frombuffer(data, dtype=values.type.to_pandas_dtype())
    return raw[at : at + n].astype(dtype, copy=False)
