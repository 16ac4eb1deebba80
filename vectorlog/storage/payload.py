"""A binlog event's payload: a column's values as the Parquet file Milvus 2.3.5 writes.

Milvus's payload writer (Arrow Go v12 behind internal/storage's payload writer) writes one
required column `val` of the Arrow type its milvusDataTypeToArrowType gives (bool,
int8/16/32/64, float32/64, string for VarChar/String, binary for JSON and for Array (one
proto.Marshal'ed schemapb.ScalarField per row: see arrays.py),
fixed_size_binary(4*dim) of little-endian float32 for FloatVector, fixed_size_binary(dim/8) for
BinaryVector, binary for SparseFloatVector: one row in Milvus's (uint32 index, float32 value)
pairs format each, as Milvus 2.4+'s AddSparseFloatVectorToPayload writes them), ZSTD,
dictionary encoding, one row group, format 2.6, data page v1.

pyarrow writes the same except one footer detail: Arrow C++ leaves INT32/INT64 columns without
the Int(32|64, signed) logical type (and INT_32/INT_64 converted type) that Arrow Go writes.
`parquet_payload` adds both to the footer's schema so the files match Milvus's field by field.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vectorlog.core.sparse import dim_of
from vectorlog.storage.errors import InvalidPayload


class DataTypeCode(IntEnum):
    """Milvus's schemapb.DataType codes (the descriptor's payload data type)."""

    BOOL = 1
    INT8 = 2
    INT16 = 3
    INT32 = 4
    INT64 = 5
    FLOAT = 10
    DOUBLE = 11
    STRING = 20
    VARCHAR = 21
    ARRAY = 22
    JSON = 23
    BINARY_VECTOR = 100
    FLOAT_VECTOR = 101
    FLOAT16_VECTOR = 102
    BFLOAT16_VECTOR = 103
    SPARSE_FLOAT_VECTOR = 104


#: Parquet options matching Milvus's payload writer: format 2.6, data page v1, no stored schema.
#: A column's dictionary falls back to plain pages past 64 KiB (Parquet's rule, at a lower
#: limit than the 1 MiB default): a segment's row ids and keys, all distinct, took twice the
#: CPU and 2.5 x the bytes dictionary-encoded; columns of few values keep their dictionary.
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": True,
    "dictionary_pagesize_limit": 64 << 10,
    "write_statistics": True,
    "data_page_version": "1.0",
    "version": "2.6",
    "store_schema": False,
}
_NUMERIC: dict[DataTypeCode, tuple[np.dtype[Any], int]] = {
    DataTypeCode.BOOL: (np.dtype(np.bool_), 1),
    DataTypeCode.INT8: (np.dtype(np.int8), 1),
    DataTypeCode.INT16: (np.dtype(np.int16), 2),
    DataTypeCode.INT32: (np.dtype(np.int32), 4),
    DataTypeCode.INT64: (np.dtype(np.int64), 8),
    DataTypeCode.FLOAT: (np.dtype(np.float32), 4),
    DataTypeCode.DOUBLE: (np.dtype(np.float64), 8),
}
_STRINGS = frozenset({DataTypeCode.STRING, DataTypeCode.VARCHAR})
#: the Arrow type of a column of each type (a column of nulls only needs it)
_ARROW_TYPES: dict[DataTypeCode, pa.DataType] = {
    k: pa.from_numpy_dtype(dt) for k, (dt, _) in _NUMERIC.items()
} | {DataTypeCode.STRING: pa.string(), DataTypeCode.VARCHAR: pa.string()}
_VECTORS = frozenset(
    {
        DataTypeCode.FLOAT_VECTOR,
        DataTypeCode.BINARY_VECTOR,
        DataTypeCode.FLOAT16_VECTOR,
        DataTypeCode.BFLOAT16_VECTOR,
    }
)
#: bytes per dimension of each vector type (BinaryVector: 1/8)
_WIDTH = {DataTypeCode.FLOAT_VECTOR: 4.0, DataTypeCode.BINARY_VECTOR: 0.125}
_WIDTH |= {DataTypeCode.FLOAT16_VECTOR: 2.0, DataTypeCode.BFLOAT16_VECTOR: 2.0}
#: Per-row overhead Milvus counts in original_size for strings and JSON (a Go string header).
_VARLEN_ROW_OVERHEAD = 16
#: What Milvus adds to a vector column's original_size (its dim).
_VECTOR_OVERHEAD = 4
#: Arrow type -> (Parquet converted type code, bit width) of the annotation Arrow Go writes.
_INT_ANNOTATIONS = {pa.int32(): (17, 32), pa.int64(): (18, 64)}


def data_type(code: Any) -> DataTypeCode:
    """Returns the DataTypeCode of `code`; raises InvalidPayload for an unknown code."""
    try:
        return DataTypeCode(code)
    except ValueError as exc:
        raise InvalidPayload(f"{code!r} is not a Milvus data type code") from exc


def payload_array(kind: DataTypeCode, values: Any, dim: int | None = None) -> pa.Array:
    """Returns `values` as the Arrow array Milvus's payload writer would build.

    `values`: numbers or bools (a numpy array or a list), a (n, dim) array for FloatVector,
    a (n, dim/8) uint8 array for BinaryVector, str for VarChar/String, bytes or str (raw JSON
    text) for JSON, bytes (ScalarField protobuf, see arrays.scalar_field_rows) for Array.
    Raises InvalidPayload if they do not fit, are empty, or the type has no binlog form.
    """
    kind = data_type(kind)
    if kind not in _VECTORS and isinstance(values, list) and None in values:
        array = _with_nulls(kind, values, dim)
    elif kind in _NUMERIC:
        array = pa.array(_numbers(kind, values))
    elif kind in _STRINGS:
        array = _arrow(_strings(kind, values), pa.string(), kind)
    elif kind == DataTypeCode.JSON:
        array = _arrow([_json_bytes(v) for v in values], pa.binary(), kind)
    elif kind == DataTypeCode.ARRAY:
        array = _arrow([_row_bytes(v) for v in values], pa.binary(), kind)
    elif kind in _VECTORS:
        array = _vectors(kind, values, dim)
    elif kind == DataTypeCode.SPARSE_FLOAT_VECTOR:  # rows in Milvus's format (core/sparse.py)
        array = _arrow([bytes(v) for v in values], pa.binary(), kind)
    else:
        raise InvalidPayload(f"Milvus data type {kind.name} has no binlog writer here")
    if len(array) == 0:
        raise InvalidPayload(f"a binlog needs at least one {kind.name} row (Milvus's too)")
    return array


def _with_nulls(kind: DataTypeCode, values: list[Any], dim: int | None) -> pa.Array:
    """Returns a nullable field's column with nulls where `values` holds None (its other
    values as `payload_array` takes them)."""
    rows = [i for i, v in enumerate(values) if v is not None]
    valid = np.zeros(len(values), dtype=bool)
    valid[rows] = True
    if not rows:
        arrow_type = _ARROW_TYPES.get(kind) or pa.binary()
        return pa.nulls(len(values), arrow_type)
    dense = payload_array(kind, [values[i] for i in rows], dim)
    positions = np.cumsum(valid) - 1
    return dense.take(pa.array(positions, mask=~valid))


def payload_size(kind: DataTypeCode, array: pa.Array) -> int:
    """Returns the `original_size` Milvus records for the column `array` of type `kind`."""
    if kind in _NUMERIC:
        return len(array) * _NUMERIC[kind][1]
    if kind in _VECTORS:
        return len(array) * int(array.type.byte_width) + _VECTOR_OVERHEAD
    if kind == DataTypeCode.SPARSE_FLOAT_VECTOR:
        return sparse_proto_size(array)
    total = pc.sum(pc.binary_length(array)).as_py() or 0
    return int(total) + _VARLEN_ROW_OVERHEAD * len(array)


def sparse_proto_size(array: pa.Array) -> int:
    """Returns the size of the rows `array` as one serialized schemapb.SparseFloatArray
    (Milvus's SparseFloatVectorFieldData.GetMemorySize: proto.Size of contents and dim, the
    dim one past the largest index)."""
    lengths = pc.binary_length(array).to_numpy(zero_copy_only=False).astype(np.int64)
    size = int(sum(1 + _varint_len(n) + n for n in lengths.tolist()))
    dim = dim_of(row.as_py() for row in array)
    return size + (1 + _varint_len(dim) if dim else 0)


def _varint_len(n: int) -> int:
    """Returns the bytes of `n` as a protobuf varint."""
    return max(1, (int(n).bit_length() + 6) // 7)


def parquet_payload(array: pa.Array, nullable: bool = False) -> bytes:
    """Returns a whole Parquet file of `array` as one column `val` in one row group,
    ZSTD-compressed, dictionary-encoded, without key-value metadata (Milvus's payload):
    required, or optional for a nullable field (its nulls in the definition levels, as
    Milvus 2.5's payload writer writes them)."""
    return bytes(parquet_buffer(array, nullable))


def parquet_buffer(array: pa.Array, nullable: bool = False) -> bytes | pa.Buffer:
    """Returns `parquet_payload`'s file as bytes or, for a column written as it is (no int
    annotation to patch), as the writer's own buffer: not copied into bytes (a binlog joins
    it into its file, one copy instead of two of a segment's vectors)."""
    schema = pa.schema([pa.field("val", array.type, nullable=nullable)])
    table = pa.Table.from_arrays([array], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=max(1, len(array)), **PARQUET_OPTIONS)
    annotation = _INT_ANNOTATIONS.get(array.type)
    if annotation is None:
        return sink.getvalue()
    return annotate_int_column(sink.getvalue().to_pybytes(), *annotation)


# ---------------------------------------------------------------------------------- values


def _numbers(kind: DataTypeCode, values: Any) -> np.ndarray:
    """Returns `values` as a 1-d array of the type's numpy dtype, refusing lossy casts."""
    target, _ = _NUMERIC[kind]
    try:
        given = np.asarray(values)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidPayload(f"values are not a {kind.name} column: {exc}") from exc
    if given.ndim != 1:
        raise InvalidPayload(f"a {kind.name} column is 1-d, got shape {given.shape}")
    if given.dtype == target or given.size == 0:
        return given.astype(target, copy=False)
    allowed = {"b": "b", "i": "iu", "f": "iuf"}[target.kind]
    if given.dtype.kind not in allowed:
        raise InvalidPayload(f"{given.dtype} values cannot be written as {kind.name}")
    converted = given.astype(target)
    if target.kind == "i" and not np.array_equal(converted, given):
        raise InvalidPayload(f"values out of the {kind.name} range")
    return converted


def _vectors(kind: DataTypeCode, values: Any, dim: int | None) -> pa.Array:
    """Returns vectors as fixed_size_binary rows: LE float32 (FloatVector), packed bits (Binary)."""
    floats = kind == DataTypeCode.FLOAT_VECTOR  # else rows of bytes: (n, row bytes) uint8
    try:
        rows = np.ascontiguousarray(values, dtype="<f4" if floats else "u1")
    except (ValueError, TypeError) as exc:
        raise InvalidPayload(f"values are not a {kind.name} column: {exc}") from exc
    width = None if dim is None else (dim if floats else int(dim * _WIDTH[kind]))
    fits = rows.ndim == 2 and rows.shape[1] >= 1 and width in (None, rows.shape[1])
    if not fits or (dim is not None and kind == DataTypeCode.BINARY_VECTOR and dim % 8):
        raise InvalidPayload(f"a {kind.name} column of dim {dim} cannot be {rows.shape}")
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(rows.itemsize * rows.shape[1]), len(rows), [None, pa.py_buffer(rows)]
    )


def _arrow(values: list[Any], arrow_type: pa.DataType, kind: DataTypeCode) -> pa.Array:
    try:
        return pa.array(values, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError) as exc:
        raise InvalidPayload(f"values are not a {kind.name} column: {exc}") from exc


def _strings(kind: DataTypeCode, values: Any) -> list[str]:
    strings = list(values)
    wrong = next((v for v in strings if not isinstance(v, str)), None)
    if wrong is not None:
        raise InvalidPayload(f"a {kind.name} value is a str, not {type(wrong).__name__}")
    return strings


def _row_bytes(value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidPayload(
            f"an Array row is ScalarField protobuf bytes, not {type(value).__name__}"
        )
    return bytes(value)


def _json_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        try:
            return value.encode()
        except UnicodeEncodeError as exc:
            raise InvalidPayload(f"a JSON value is not valid Unicode: {exc}") from exc
    raise InvalidPayload(
        f"a JSON value is raw JSON text (bytes or str), not {type(value).__name__}"
    )


# ---------------------------------------------------------------------------------- footer
# The footer is a Thrift compact-protocol FileMetaData: field 2 is the schema, a list of
# SchemaElement structs (root, then `val`). SchemaElement field 6 is converted_type (i32),
# field 10 logicalType (a union; its field 10 INTEGER is IntType {1: i8 bitWidth, 2: bool}).

_STOP, _BOOL_TRUE, _BYTE, _I32, _STRUCT, _LIST = 0, 1, 3, 5, 12, 9


def annotate_int_column(parquet: bytes, converted_type: int, bit_width: int) -> bytes:
    """Returns `parquet` with the Int(bit_width, signed) logical type and `converted_type`
    added to its single leaf column's schema element (footer rewritten, pages untouched)."""
    footer_length = int.from_bytes(parquet[-8:-4], "little")
    start = len(parquet) - 8 - footer_length
    footer = parquet[start:-8]
    stop, last_field = _leaf_element_stop(footer)
    fields = _field_header(last_field, 6, _I32) + _varint(_zigzag(converted_type))
    fields += _field_header(6, 10, _STRUCT) + _field_header(0, 10, _STRUCT)
    fields += _field_header(0, 1, _BYTE) + bytes([bit_width]) + _field_header(1, 2, _BOOL_TRUE)
    fields += bytes([_STOP, _STOP])
    patched = footer[:stop] + fields + footer[stop:]
    return parquet[:start] + patched + len(patched).to_bytes(4, "little") + b"PAR1"


def _leaf_element_stop(footer: bytes) -> tuple[int, int]:
    """Returns (offset of the STOP byte, last field id) of schema element 1 in the footer."""
    reader = _Compact(footer)
    last = 0
    while True:
        field_type, last = reader.field(last)
        if field_type == _STOP:
            raise InvalidPayload("Parquet footer without a schema")
        if last == 2 and field_type == _LIST:
            size, _ = reader.list_header()
            if size != 2:
                raise InvalidPayload(f"a payload has one column, its schema has {size} elements")
            reader.skip_struct()
            return reader.struct_stop()
        reader.skip(field_type)


class _Compact:
    """Just enough of a Thrift compact-protocol reader to skip to a struct's end."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        result, shift = 0, 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def field(self, last: int) -> tuple[int, int]:
        """Returns (type, id) of the next field header; type 0 is the struct's STOP."""
        header = self.byte()
        if header == _STOP:
            return _STOP, last
        delta, field_type = header >> 4, header & 0x0F
        field_id = last + delta if delta else _unzigzag(self.varint())
        return field_type, field_id

    def list_header(self) -> tuple[int, int]:
        header = self.byte()
        size = header >> 4
        return (self.varint() if size == 15 else size), header & 0x0F

    def struct_stop(self) -> tuple[int, int]:
        """Skips a struct's fields; returns (offset of its STOP byte, its last field id)."""
        last = 0
        while True:
            field_type, field_id = self.field(last)
            if field_type == _STOP:
                return self.pos - 1, last
            self.skip(field_type)
            last = field_id

    def skip_struct(self) -> None:
        self.struct_stop()

    def skip(self, field_type: int) -> None:
        if field_type in (1, 2):  # bools live in the field header
            return
        if field_type == _BYTE:
            self.pos += 1
        elif field_type in (4, 5, 6):
            self.varint()
        elif field_type == 7:
            self.pos += 8
        elif field_type == 8:
            length = self.varint()  # read before `pos` is: the varint moves it
            self.pos += length
        elif field_type in (_LIST, 10):
            self._skip_list()
        elif field_type == _STRUCT:
            self.skip_struct()
        else:
            raise InvalidPayload(f"unexpected Thrift type {field_type} in a Parquet footer")

    def _skip_list(self) -> None:
        size, element = self.list_header()
        for _ in range(size):
            if element in (1, 2):
                self.pos += 1  # list bools take a byte each
            else:
                self.skip(element)


def _field_header(last: int, field_id: int, field_type: int) -> bytes:
    delta = field_id - last
    if 0 < delta <= 15:
        return bytes([delta << 4 | field_type])
    return bytes([field_type]) + _varint(_zigzag(field_id))


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append(n & 0x7F | 0x80)
        n >>= 7
