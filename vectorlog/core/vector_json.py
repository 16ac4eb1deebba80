"""Milvus's JSON forms of the packed vector types, as its REST v2 bodies and bulk insert files
carry them, turned into the row forms vectorlog's validation takes (core/binvec.py,
core/halfvec.py, core/sparse.py).

- BINARY_VECTOR: its dim / 8 byte values (numbers 0..255), or the base64 text of its bytes
  (Go's JSON of []byte);
- FLOAT16_VECTOR / BFLOAT16_VECTOR: dim numbers (rounded to the type), or the base64 text of
  its bytes;
- SPARSE_FLOAT_VECTOR: {"index": value, ...}, or {"indices": [...], "values": [...]}
  (typeutil.CreateSparseFloatRowFromMap), or either as JSON text (a Parquet string column).

Bytes (Avro `bytes`, Parquet binary) are each type's own row bytes: Milvus's sparse row format,
packed bits, little-endian half values.

Every function returns a value the insert validation then checks (dims, ranges, order), and
raises SchemaMismatch with Milvus's words for what only the JSON form can get wrong.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from vectorlog.core.binvec import binary_rows
from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.halfvec import half_rows
from vectorlog.core.model import HALF_TYPES, DataType, FieldSchema
from vectorlog.core.sparse import row_of

#: Milvus's names of the packed vector types, as its messages print them
GO_TYPES = {
    DataType.BINARY_VECTOR: "BinaryVector",
    DataType.FLOAT16_VECTOR: "Float16Vector",
    DataType.BFLOAT16_VECTOR: "BFloat16Vector",
    DataType.SPARSE_FLOAT_VECTOR: "SparseFloatVector",
}


def from_json(f: FieldSchema, value: Any) -> Any:
    """Returns one row's value of field `f` in vectorlog's row form (other types: as given).
    Raises SchemaMismatch with Milvus's message for a bad JSON form."""
    if f.dtype is DataType.BINARY_VECTOR:
        return _binary(f, value)
    if f.dtype in HALF_TYPES:
        return _decoded(f, value) if isinstance(value, str) else value
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return sparse_from_json(value)
    return value


def _binary(f: FieldSchema, value: Any) -> Any:
    """Returns a binary row given as byte values or base64 text as its bytes."""
    if isinstance(value, str):
        return _decoded(f, value)
    if not isinstance(value, list):
        return value
    dim = int(f.dim or 0)
    if len(value) != dim // 8:
        raise SchemaMismatch(
            f"expected dim '{dim}' for field '{f.name}' with type 'BinaryVector', got dim "
            f"'{len(value) * 8}'"
        )
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= 255:
            raise SchemaMismatch(
                f"expected type 'BinaryVector' for field '{f.name}', got type "
                f"'{type(x).__name__}' with value '{x}' (a byte value 0..255)"
            )
    return bytes(value)


def _decoded(f: FieldSchema, text: str) -> bytes:
    """Returns the bytes of a vector given as base64 text. Raises SchemaMismatch."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SchemaMismatch(
            f"invalid vector field: {f.name}: {GO_TYPES[f.dtype]} value {text[:40]!r} is not "
            "base64 text of its bytes"
        ) from None


def sparse_from_json(value: Any) -> Any:
    """Returns a sparse row given as JSON text, {"indices", "values"} or {index: value} as
    (index, value) pairs or a dict `core/sparse.py` takes. Raises SchemaMismatch."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise SchemaMismatch(f"Invalid JSON string for SparseFloatVector: {exc}") from None
    if not isinstance(value, dict) or not {"indices", "values"} <= value.keys():
        return value
    indices, values = value["indices"], value["values"]
    if len(value) != 2 or not isinstance(indices, list) or not isinstance(values, list):
        raise SchemaMismatch("Invalid JSON input for sparse float vector: indices and values")
    if len(indices) != len(values):
        raise SchemaMismatch(
            f"length of indices and values must be the same, got {len(indices)} and {len(values)}"
        )
    return list(zip(indices, values, strict=True))


def packed_row(f: FieldSchema, value: Any) -> bytes:
    """Returns one row of packed vector field `f`, given in any form `from_json` or the
    insert validation takes, as its bytes (Milvus's row format; dim / 8 or 2 x dim bytes).
    Raises SchemaMismatch naming what is wrong with it."""
    value = from_json(f, value)
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return row_of(value)
    if f.dtype is DataType.BINARY_VECTOR:
        return binary_rows(f.name, int(f.dim or 0), [value])[0].tobytes()
    return half_rows(f.name, f.dtype.value, int(f.dim or 0), [value])[0].tobytes()
