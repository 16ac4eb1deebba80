"""Bulk insert of the packed vector types and of BM25 collections, as Milvus 2.5's import
readers take them (internal/util/importutilv2: json/row_parser.go, parquet/field_reader.go,
numpy/util.go):

- JSON rows: a binary vector as its dim / 8 byte values, a half vector as dim numbers, a
  sparse vector as {"index": value} or {"indices": [...], "values": [...]};
- Parquet: binary and half vectors as list<uint8> (dim / 8 and 2 x dim bytes) or binary
  columns (half vectors also as list<float> of dim numbers), sparse vectors as JSON strings or
  struct<indices: list<int>, values: list<float>>;
- NumPy: binary vectors (n, dim / 8) uint8, half vectors (n, 2 x dim) uint8 or (n, dim)
  float32/float64; sparse vectors are not taken ("unsupported importing numpy files");
- a BM25 function's output is derived from its input text; a file giving it is refused with
  Milvus's message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.model import HALF_TYPES, CollectionSchema, DataType, FieldSchema
from vectorlog.core.vector_json import GO_TYPES, from_json, sparse_from_json

PACKED = frozenset(GO_TYPES)


def function_outputs(schema: CollectionSchema) -> set[str]:
    """Returns the names of the fields the collection's functions derive."""
    return {n for fn in schema.functions for n in fn.output_field_names}


def refuse_outputs(schema: CollectionSchema, names: Sequence[str]) -> None:
    """Raises SchemaMismatch (Milvus's import message) if `names` holds a function output."""
    given = sorted(function_outputs(schema) & set(names))
    if given:
        raise SchemaMismatch(f"the field '{given[0]}' is output by function, no need to provide")


def json_rows(schema: CollectionSchema, rows: list[Any]) -> list[Any]:
    """Returns JSON file rows with their packed vector values in vectorlog's row forms.
    Raises SchemaMismatch naming the row for a function output given or a bad value."""
    packed = [f for f in schema.user_fields if f.dtype in PACKED]
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            continue  # rows_to_columns names it
        try:
            refuse_outputs(schema, list(row))
            for f in packed:
                if f.name in row:
                    row[f.name] = from_json(f, row[f.name])
        except SchemaMismatch as exc:
            raise SchemaMismatch(f"row {i}: {exc}") from None
    return rows


def arrow_packed(f: FieldSchema, arr: pa.Array) -> list[Any]:
    """Returns the row values of a packed vector field's Parquet column. Raises
    SchemaMismatch naming the field for a column type Milvus does not take."""
    if arr.null_count:
        row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise SchemaMismatch(f"row {row}: vector field {f.name!r} is null")
    kind = arr.type
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        if pa.types.is_struct(kind):
            return _sparse_structs(f, arr)
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return [sparse_from_json(s) for s in arr.to_pylist()]
    elif pa.types.is_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return list(arr.to_pylist())
    elif _is_list(kind) and pa.types.is_uint8(kind.value_type):
        return _byte_rows(f, arr)
    elif f.dtype in HALF_TYPES and _is_list(kind) and _numeric(kind.value_type):
        return list(arr.to_pylist())  # dim numbers per row
    raise SchemaMismatch(
        f"expected type '{GO_TYPES[f.dtype]}' for field '{f.name}', got a Parquet column of {kind}"
    )


def _is_list(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    )


def _numeric(kind: pa.DataType) -> bool:
    return bool(pa.types.is_floating(kind) or pa.types.is_integer(kind))


def _byte_rows(f: FieldSchema, arr: pa.Array) -> list[bytes]:
    """Returns list<uint8> rows as bytes, each dim / 8 (binary) or 2 x dim (half) long."""
    width = int(f.dim or 0) // 8 if f.dtype is DataType.BINARY_VECTOR else 2 * int(f.dim or 0)
    lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(lengths != width)
    if bad.size:
        row = int(bad[0])
        raise SchemaMismatch(
            f"row {row}: length of vector is not aligned: {lengths[row]} bytes, expected "
            f"{width}, data type: {GO_TYPES[f.dtype]}"
        )
    flat = arr.flatten().to_numpy(zero_copy_only=False).astype(np.uint8)
    return [r.tobytes() for r in flat.reshape(len(arr), width)]


def _sparse_structs(f: FieldSchema, arr: pa.StructArray) -> list[Any]:
    """Returns struct<indices, values> rows as (index, value) pairs lists."""
    names = {arr.type.field(i).name for i in range(arr.type.num_fields)}
    if not {"indices", "values"} <= names:
        raise SchemaMismatch(
            "Invalid parquet struct for SparseFloatVector: 'indices' or 'values' missed"
        )
    indices = arr.field("indices").to_pylist()
    values = arr.field("values").to_pylist()
    out = []
    for i, (idx, val) in enumerate(zip(indices, values, strict=True)):
        if len(idx or []) != len(val or []):
            raise SchemaMismatch(
                f"row {i}: Invalid parquet struct for SparseFloatVector: number of elements of "
                f"'indices' and 'values' mismatched, '{len(idx or [])}' vs '{len(val or [])}'"
            )
        out.append(list(zip(idx or [], val or [], strict=True)))
    return out


def numpy_packed(f: FieldSchema, arr: np.ndarray) -> Any:
    """Returns the rows of a packed vector field's .npy array (Milvus's header checks).
    Raises SchemaMismatch with Milvus's message for a type or shape it refuses."""
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        raise SchemaMismatch(_numpy_unsupported(f.dtype))
    dim = int(f.dim or 0)
    kind = arr.dtype.kind + str(arr.dtype.itemsize)
    half_floats = f.dtype in HALF_TYPES and kind in ("f4", "f8")
    if kind != "u1" and not half_floats:
        raise SchemaMismatch(
            f"expected element type '{GO_TYPES[f.dtype]}' for field '{f.name}', got type "
            f"'{arr.dtype}'"
        )
    if arr.ndim != 2:
        raise SchemaMismatch(
            f"expected shape '2' for {GO_TYPES[f.dtype]} field '{f.name}', got shape '{arr.ndim}'"
        )
    width = dim // 8 if f.dtype is DataType.BINARY_VECTOR else dim if half_floats else 2 * dim
    if arr.shape[1] != width:
        got = arr.shape[1] * 8 if f.dtype is DataType.BINARY_VECTOR else arr.shape[1]
        raise SchemaMismatch(
            f"expected dim '{dim if f.dtype is DataType.BINARY_VECTOR else width}' for "
            f"{GO_TYPES[f.dtype]} field '{f.name}', got dim '{got}'"
        )
    if half_floats:
        return list(arr)  # dim numbers per row
    return [r.tobytes() for r in np.ascontiguousarray(arr)]


def numpy_refusals(schema: CollectionSchema) -> str | None:
    """Returns Milvus's message if the collection has a field NumPy files cannot fill (a
    sparse field no function derives), else None."""
    outputs = function_outputs(schema)
    for f in schema.user_fields:
        if f.dtype is DataType.SPARSE_FLOAT_VECTOR and f.name not in outputs:
            return _numpy_unsupported(f.dtype)
    return None


def _numpy_unsupported(dtype: DataType) -> str:
    return (
        "unsupported importing numpy files for collection with data type: "
        f"{GO_TYPES.get(dtype, dtype.value)}"
    )
