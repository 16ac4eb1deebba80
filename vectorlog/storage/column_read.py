"""Binlog columns back in the form the dml log carries them (schemas/columns.py), for the query
node's recovery: numbers as numpy arrays of the field's width, VarChar as str, JSON and ARRAY
as JSON texts, float vectors as (n, dim) float32; and a delta log's keys and delete ts.

ARRAY rows are protobuf `schemapb.ScalarField` messages (arrays.py writes them); array_read.py
decodes them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.model import DENSE_TYPES, HALF_TYPES, DataType
from vectorlog.core.sparse import check_row
from vectorlog.storage.array_read import InvalidScalarField, scalar_field_values
from vectorlog.storage.binlog import EventTypeCode
from vectorlog.storage.binlog_read import (
    CorruptBinlog,
    InsertColumn,
    float_vectors,
    numbers,
    packed_rows,
    read_binlog,
)
from vectorlog.storage.payload import DataTypeCode
from vectorlog.storage.writer import MILVUS_TYPE

NUMPY = {
    DataType.BOOL: np.bool_,
    DataType.INT8: np.int8,
    DataType.INT16: np.int16,
    DataType.INT32: np.int32,
    DataType.INT64: np.int64,
    DataType.FLOAT: np.float32,
    DataType.DOUBLE: np.float64,
}


EMPTY_DOC = "{}"


def field_values(
    column: InsertColumn,
    dtype: DataType,
    element: DataType | None = None,
    path: str = "",
    nullable: bool = False,
) -> np.ndarray | list[Any]:
    """Returns an insert binlog's column as the dml log carries a field of `dtype` (ARRAY of
    `element`); a `nullable` field's nulls as None in a list. Raises CorruptBinlog naming
    `path` if the payload is another type, a value cannot be decoded, or a field that is not
    nullable has a null."""
    want = MILVUS_TYPE.get(dtype)
    if want is None or column.data_type not in (want, _alias(want)):
        raise CorruptBinlog(path, f"payload {column.data_type.name} is not {dtype.value}")
    values = column.values
    if values.null_count and nullable:
        return _with_nulls(column, dtype, element, path)
    if values.null_count:
        raise CorruptBinlog(path, f"{values.null_count} nulls in a column without nulls")
    if not _arrow_fits(values.type, dtype):
        raise CorruptBinlog(path, f"a Parquet column of {values.type} holds no {dtype.value}")
    if dtype in NUMPY:
        return _narrow(numbers(values, np.dtype(NUMPY[dtype])), values, path)
    if dtype is DataType.FLOAT_VECTOR:
        return float_vectors(column, path)
    if dtype is DataType.SPARSE_FLOAT_VECTOR:
        return _sparse_rows(values, path)
    if dtype in HALF_TYPES or dtype is DataType.BINARY_VECTOR:
        return packed_rows(column, path)
    if dtype is DataType.JSON and _all_empty(values):
        return [EMPTY_DOC] * len(values)  # the dynamic field of rows without dynamic keys
    texts = values.to_pylist()
    if dtype is DataType.VARCHAR:
        return texts
    if dtype is DataType.JSON:
        return _texts(texts, path)
    return [_array_text(row, element, path) for row in texts]


def _sparse_rows(values: pa.Array, path: str) -> list[bytes]:
    """Returns a SparseFloatVector column's rows, each checked as Milvus checks them."""
    rows = values.to_pylist()
    try:
        return [check_row(r) for r in rows]
    except SchemaMismatch as exc:
        raise CorruptBinlog(path, str(exc)) from None


def _with_nulls(
    column: InsertColumn, dtype: DataType, element: DataType | None, path: str
) -> list[Any]:
    """Returns a nullable field's column (Milvus 2.5: an optional Parquet column) as a list
    holding None in its null rows, its other values as `field_values` gives them."""
    values = column.values
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    out: list[Any] = [None] * len(values)
    if valid.any():
        dense = field_values(replace(column, values=values.drop_null()), dtype, element, path)
        dense_list = dense.tolist() if isinstance(dense, np.ndarray) else dense
        for i, v in zip(np.flatnonzero(valid).tolist(), dense_list, strict=True):
            out[i] = v
    return out


def _all_empty(values: pa.Array) -> bool:
    """Returns whether every JSON row is `{}` (one vectorized comparison, no row decoded)."""
    empty = pa.scalar(EMPTY_DOC.encode(), values.type)
    return bool(pc.all(pc.equal(values, empty)).as_py())


def _arrow_fits(kind: pa.DataType, dtype: DataType) -> bool:
    """Returns whether a payload column of Arrow type `kind` can hold `dtype` values."""
    if dtype in NUMPY:
        checks = {"b": pa.types.is_boolean, "i": pa.types.is_integer, "f": pa.types.is_floating}
        return bool(checks[np.dtype(NUMPY[dtype]).kind](kind))
    if dtype in DENSE_TYPES or dtype is DataType.BINARY_VECTOR:
        return bool(pa.types.is_fixed_size_binary(kind))
    return bool(pa.types.is_string(kind) or pa.types.is_binary(kind))


def _narrow(got: np.ndarray, values: pa.Array, path: str) -> np.ndarray:
    """Returns `got`, read at a narrower width than its payload (INT8/INT16 come as int32),
    if every value fits it. Raises CorruptBinlog."""
    if got.dtype.kind != "i" or values.type.bit_width <= got.dtype.itemsize * 8 or not len(got):
        return got
    wide = numbers(values, np.dtype(np.int64))
    info = np.iinfo(got.dtype)
    if wide.min() < info.min or wide.max() > info.max:
        raise CorruptBinlog(path, f"a value outside {got.dtype}: {wide.min()}..{wide.max()}")
    return got


def _texts(texts: list[Any], path: str) -> list[str]:
    """Returns JSON payload rows (bytes, or str) as str. Raises CorruptBinlog."""
    try:
        return [t.decode() if isinstance(t, bytes) else t for t in texts]
    except UnicodeDecodeError as exc:
        raise CorruptBinlog(path, f"a JSON row is not UTF-8: {exc}") from exc


def _array_text(row: bytes, element: DataType | None, path: str) -> str:
    """Returns one ARRAY row as JSON array text. Raises CorruptBinlog."""
    try:
        return json.dumps(scalar_field_values(row, element))
    except InvalidScalarField as exc:
        raise CorruptBinlog(path, f"an ARRAY row cannot be decoded: {exc}") from exc


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
