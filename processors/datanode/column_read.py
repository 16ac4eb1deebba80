"""Binlog columns back in the form the dml log carries them (schemas/columns.py), for the query
node's recovery: numbers as numpy arrays of the field's width, VarChar as str, JSON and ARRAY
as JSON texts, float vectors as (n, dim) float32; and a delta log's keys and delete ts.

ARRAY rows are protobuf `schemapb.ScalarField` messages (arrays.py writes them); they are
decoded here by hand, like arrays.py encodes them, without a protobuf dependency.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import orjson

from vectorlog.model import DataType
from vectorlog.processors.datanode.binlog import EventTypeCode
from vectorlog.processors.datanode.binlog_read import (
    CorruptBinlog,
    InsertColumn,
    float_vectors,
    read_binlog,
)
from vectorlog.processors.datanode.payload import DataTypeCode
from vectorlog.processors.datanode.writer import MILVUS_TYPE

NUMPY = {
    DataType.BOOL: np.bool_,
    DataType.INT8: np.int8,
    DataType.INT16: np.int16,
    DataType.INT32: np.int32,
    DataType.INT64: np.int64,
    DataType.FLOAT: np.float32,
    DataType.DOUBLE: np.float64,
}
_U64 = 1 << 64


def field_values(
    column: InsertColumn, dtype: DataType, element: DataType | None = None, path: str = ""
) -> np.ndarray | list[Any]:
    """Returns an insert binlog's column as the dml log carries a field of `dtype` (ARRAY of
    `element`). Raises CorruptBinlog naming `path` if the payload is another type or a value
    cannot be decoded."""
    want = MILVUS_TYPE.get(dtype)
    if want is None or column.data_type not in (want, _alias(want)):
        raise CorruptBinlog(path, f"payload {column.data_type.name} is not {dtype.value}")
    values = column.values
    if dtype in NUMPY:
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=NUMPY[dtype])
    if dtype is DataType.FLOAT_VECTOR:
        return float_vectors(column, path)
    texts = values.to_pylist()
    if dtype is DataType.VARCHAR:
        return texts
    if dtype is DataType.JSON:
        return [t.decode() if isinstance(t, bytes) else t for t in texts]
    return [_array_text(row, element, path) for row in texts]


def _alias(code: DataTypeCode) -> DataTypeCode:
    """VarChar and String are one payload type (Milvus writes either for strings)."""
    return DataTypeCode.STRING if code == DataTypeCode.VARCHAR else code


def read_delta_binlog(data: bytes, path: str = "") -> tuple[list[Any], np.ndarray]:
    """Returns the primary keys and their delete ts (uint64) of a delta log. Raises
    CorruptBinlog naming `path`."""
    column = read_binlog(data, path, EventTypeCode.DELETE)
    texts = column.values.to_pylist()
    try:
        rows = orjson.loads("[" + ",".join(texts) + "]")
        pks = [row["pk"] for row in rows]
        tss = np.array([row["ts"] for row in rows], dtype=np.uint64)
    except (orjson.JSONDecodeError, TypeError, KeyError, OverflowError, ValueError) as exc:
        raise CorruptBinlog(path, f"a delete record is not {{pk, ts}}: {exc}") from exc
    return pks, tss


# -- ARRAY rows: protobuf schemapb.ScalarField ---------------------------------------------


def _array_text(row: bytes, element: DataType | None, path: str) -> str:
    """Returns one ARRAY row as JSON array text. Raises CorruptBinlog."""
    try:
        return json.dumps(_scalar_field(row, element))
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
        raise CorruptBinlog(path, f"an ARRAY row cannot be decoded: {exc}") from exc


def _scalar_field(data: bytes, element: DataType | None) -> list[Any]:
    """Returns the elements of one ScalarField message (its single oneof field)."""
    if not data:
        return []
    tag, at = _varint(data, 0)
    length, at = _varint(data, at)
    body = data[at : at + length]
    if tag & 7 != 2 or at + length != len(data):
        raise ValueError(f"a ScalarField of {len(data)} B with tag {tag}")
    field = tag >> 3
    if field == 6:
        return [s.decode() for s in _repeated(body)]
    raw = b"".join(_repeated(body))  # packed numbers (one run; more are concatenated)
    if field in (4, 5):
        fmt = "<f" if field == 4 else "<d"
        return [v for (v,) in struct.iter_unpack(fmt, raw)]  # FLOAT as float32, as Milvus
    numbers = _varints(raw)
    if field == 1:
        return [bool(v) for v in numbers]
    if field in (2, 3):
        return [v - _U64 if v >= _U64 >> 1 else v for v in numbers]
    raise ValueError(f"ScalarField field {field} for {element}")


def _repeated(body: bytes) -> list[bytes]:
    """Returns the payloads of the length-delimited field-1 entries of a message."""
    out, at = [], 0
    while at < len(body):
        tag, at = _varint(body, at)
        length, at = _varint(body, at)
        if tag != (1 << 3 | 2) or at + length > len(body):
            raise ValueError(f"entry with tag {tag} and length {length}")
        out.append(body[at : at + length])
        at += length
    return out


def _varints(raw: bytes) -> list[int]:
    out, at = [], 0
    while at < len(raw):
        value, at = _varint(raw, at)
        out.append(value)
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """Returns the varint at `at` and the position after it. Raises IndexError/ValueError."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")
