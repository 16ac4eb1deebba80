"""Columnar batches as carried by RowsInserted/RowsDeleted: encoding and decoding of columns.

INT8/16/32 travel in Int64Column, FLOAT in DoubleColumn (values already rounded to float32),
ARRAY as one JSON array text per row in JsonColumn (as JSON values are), SPARSE_FLOAT_VECTOR
as one row in Milvus's byte format per row (vectorlog/core/sparse.py). The dynamic field
`$meta` travels as a JsonColumn too, but only when a row of the batch has a dynamic key: a
RowsInserted without it means `{}` for every row (`with_dynamic` puts it back on reading).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from vectorlog.core.added_fields import absent_values, fillable
from vectorlog.core.model import CollectionSchema, DataType
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.registry import NAMESPACE

COLUMN_TYPE = {
    DataType.INT8: "Int64Column",
    DataType.INT16: "Int64Column",
    DataType.INT32: "Int64Column",
    DataType.INT64: "Int64Column",
    DataType.FLOAT: "DoubleColumn",
    DataType.DOUBLE: "DoubleColumn",
    DataType.BOOL: "BoolColumn",
    DataType.VARCHAR: "StringColumn",
    DataType.JSON: "JsonColumn",
    DataType.ARRAY: "JsonColumn",
    DataType.FLOAT_VECTOR: "FloatVectorColumn",
    DataType.SPARSE_FLOAT_VECTOR: "SparseFloatVectorColumn",
    DataType.FLOAT16_VECTOR: "PackedVectorColumn",
    DataType.BFLOAT16_VECTOR: "PackedVectorColumn",
    DataType.BINARY_VECTOR: "PackedVectorColumn",
}


def _json_text(value: Any) -> str:
    """Returns compact JSON text; an empty object (a row without dynamic keys) without
    calling json.dumps."""
    if type(value) is dict and not value:
        return "{}"
    return json.dumps(value, separators=(",", ":"))


#: what a null row holds in its column (its `valid` flag false)
PLACEHOLDER: dict[str, Any] = {"Int64Column": 0, "DoubleColumn": 0.0, "BoolColumn": False}
PLACEHOLDER |= {"StringColumn": "", "JsonColumn": "null"}


def encode_column(
    dtype: DataType, values: Any, dim: int | None = None, arrays: bool = False
) -> tuple[str, dict]:
    """Returns the Avro union value of one column (values: numpy array or list; a list
    holding None, a nullable field's, travels with `valid` flags and placeholders).
    `arrays`: a numpy array's numbers stay that array and vectors a contiguous array, not
    a list and bytes (what EventSerde writes for RowsInserted without a Python object per
    value: schemas/rowswriter.py)."""
    kind = COLUMN_TYPE[dtype]
    name = f"{NAMESPACE}.{kind}"
    if dtype is DataType.FLOAT_VECTOR:
        data = np.ascontiguousarray(values, dtype="<f4")
        return name, {"dim": dim, "data": data if arrays else data.tobytes()}
    if dtype is DataType.SPARSE_FLOAT_VECTOR:  # rows in Milvus's format (core/sparse.py)
        return name, {"rows": list(values)}
    if kind == "PackedVectorColumn":  # (n, bytes per row) uint8: core/halfvec.py
        data = np.ascontiguousarray(values, dtype=np.uint8)
        return name, {"dim": dim, "data": data if arrays else data.tobytes()}
    valid = None
    if isinstance(values, list) and any(v is None for v in values):
        valid = [v is not None for v in values]
        blank = None if dtype in (DataType.JSON, DataType.ARRAY) else PLACEHOLDER[kind]
        values = [blank if v is None else v for v in values]
    if dtype in (DataType.JSON, DataType.ARRAY):
        return name, {"values": [_json_text(v) for v in values], "valid": valid}
    if isinstance(values, np.ndarray) and not (arrays and values.dtype.kind in "biuf"):
        values = values.tolist()
    return name, {"values": values, "valid": valid}


def column_kind(column: Any) -> tuple[str, dict]:
    """Returns (short type name, body) of a decoded or encoded column union value."""
    name, body = column
    return name.rsplit(".", 1)[-1], body


def decode_column(column: Any, num_rows: int) -> Any:
    """Returns the values of a decoded column: a numpy array (numbers, vectors) or a list
    (a column with `valid` flags: a list holding None in its null rows, whatever its type).

    Raises MalformedEvent if its length is not `num_rows`.
    """
    kind, body = column_kind(column)
    if kind == "FloatVectorColumn":
        dim = body["dim"]
        flat = np.frombuffer(body["data"], dtype="<f4")
        if dim <= 0 or flat.size != num_rows * dim:
            raise MalformedEvent(f"vector column has {flat.size} floats, not {num_rows} x {dim}")
        return flat.reshape(num_rows, dim)
    if kind == "PackedVectorColumn":
        raw = np.frombuffer(body["data"], dtype=np.uint8)
        if body["dim"] <= 0 or (num_rows and raw.size % num_rows):
            raise MalformedEvent(f"packed vector column of {raw.size} bytes, {num_rows} rows")
        return raw.reshape(num_rows, -1) if num_rows else raw.reshape(0, 0)
    if kind == "SparseFloatVectorColumn":
        rows = body["rows"]
        if len(rows) != num_rows:
            raise MalformedEvent(f"sparse vector column has {len(rows)} rows, not {num_rows}")
        return list(rows)
    values = body["values"]
    if len(values) != num_rows:
        raise MalformedEvent(f"{kind} has {len(values)} values, not {num_rows}")
    valid = body.get("valid")
    if valid is not None:
        if len(valid) != num_rows:
            raise MalformedEvent(f"{kind} has {len(valid)} valid flags, not {num_rows}")
        return [v if ok else None for v, ok in zip(values, valid, strict=True)]
    if kind == "Int64Column":
        return np.asarray(values, dtype=np.int64)
    if kind == "DoubleColumn":
        return np.asarray(values, dtype=np.float64)
    if kind == "BoolColumn":
        return np.asarray(values, dtype=bool)
    return list(values)


#: column kinds whose values from several events join into one numpy array (`joined_column`)
JOINABLE: dict[str, Any] = {"Int64Column": np.int64, "DoubleColumn": np.float64, "BoolColumn": bool}


def joined_column(columns: list[Any], counts: list[int]) -> np.ndarray | None:
    """Returns one field's encoded columns of consecutive events (`counts[i]` rows in the
    i-th) as one array, what concatenating each one's `decode_column` gives; None unless each
    is a number or bool column without null flags, or float vectors of one dim, holding its
    event's row count (a run of single-row inserts is decoded a field at a time)."""
    chunks = column_chunks(columns, counts)
    if chunks is None or len(chunks) == 1:
        return None if chunks is None else chunks[0]
    return np.concatenate(chunks)


def column_chunks(columns: list[Any], counts: list[int]) -> list[np.ndarray] | None:
    """Returns `joined_column`'s values in chunks that concatenate to them: one array, but
    float vectors as each event's own rows, views of its decoded bytes (not copied: a
    buffer that joins its chunks later, as the data node's binlog write does, copies each
    vector once, not twice). None where `joined_column` gives None."""
    kind, first = column_kind(columns[0])
    if kind == "FloatVectorColumn":
        return _vector_chunks(columns, counts, int(first["dim"]))
    dtype = JOINABLE.get(kind)
    if dtype is None:
        return None
    parts: list[Any] = []
    for column, n in zip(columns, counts, strict=True):
        other, body = column_kind(column)
        if other != kind or body.get("valid") is not None or len(body["values"]) != n:
            return None
        parts.append(body["values"])
    if len(parts) == 1:  # a decode's array (rowsreader.py) is not copied
        return [np.asarray(parts[0], dtype=dtype)]
    return [np.concatenate([np.asarray(p, dtype=dtype) for p in parts])]


def joined_columns(
    schema: CollectionSchema, bodies: list[dict[str, Any]]
) -> tuple[list[int], dict[str, np.ndarray]] | None:
    """Returns the rows of consecutive RowsInserted `bodies` decoded a field at a time: each
    body's row count, and every field's values as one array (`joined_column`); None unless
    each body holds exactly the schema's fields (by name and id), each in its type's column
    kind (COLUMN_TYPE) and joinable (then each body is decoded on its own)."""
    chunked = chunked_columns(schema, bodies)
    if chunked is None:
        return None
    counts, out = chunked
    return counts, {name: c[0] if len(c) == 1 else np.concatenate(c) for name, c in out.items()}


def chunked_columns(
    schema: CollectionSchema, bodies: list[dict[str, Any]]
) -> tuple[list[int], dict[str, list[np.ndarray]]] | None:
    """`joined_columns` with every field's values in chunks (`column_chunks`: float vectors
    as each body's own rows, not copied), None where it gives None."""
    fields = {f.name: f for f in schema.fields}
    counts = [int(b["num_rows"]) for b in bodies]
    by_name: dict[str, list[Any]] = {name: [] for name in fields}
    for body in bodies:
        if len(body["columns"]) != len(fields):
            return None
        for c in body["columns"]:
            f = fields.get(c["field_name"])
            if f is None or f.field_id != c["field_id"]:
                return None
            by_name[f.name].append(c["column"])
    out: dict[str, list[np.ndarray]] = {}
    for name, got in by_name.items():
        if len(got) != len(bodies) or column_kind(got[0])[0] != COLUMN_TYPE[fields[name].dtype]:
            return None
        values = column_chunks(got, counts)
        if values is None:
            return None
        out[name] = values
    return counts, out


def run_row_ids(firsts: list[int], counts: list[int]) -> np.ndarray:
    """Returns the row ids of consecutive RowsInserted events as one array: the i-th event's
    `counts[i]` rows numbered from its `firsts[i]` (its first_row_id) on."""
    starts = np.asarray(firsts, dtype=np.int64) - np.cumsum([0, *counts[:-1]], dtype=np.int64)
    return np.repeat(starts, counts) + np.arange(sum(counts), dtype=np.int64)


def inserts_grouped(events: list[Any], key: Callable[[Any], Any]) -> list[list[Any]]:
    """Returns `events` in order, consecutive RowsInserted events with equal `key(event)`
    grouped (a run a node may apply as one), every other event alone."""
    groups: list[list[Any]] = []
    for event in events:
        last = groups[-1][-1] if groups else None
        if (
            last is not None
            and event.type == last.type == "RowsInserted"
            and key(event) == key(last)
        ):
            groups[-1].append(event)
        else:
            groups.append([event])
    return groups


def _vector_chunks(columns: list[Any], counts: list[int], dim: int) -> list[np.ndarray] | None:
    """`column_chunks` of FloatVectorColumns: each one's (rows, dim) float32 view; None
    unless every one has `dim` and its rows."""
    if dim <= 0:
        return None
    data = []
    for column, n in zip(columns, counts, strict=True):
        kind, body = column_kind(column)
        if kind != "FloatVectorColumn" or body["dim"] != dim or len(body["data"]) != n * dim * 4:
            return None
        data.append(np.frombuffer(body["data"], dtype="<f4").reshape(n, dim))
    return data


def with_dynamic(schema: CollectionSchema, columns: list[dict], num_rows: int) -> list[dict]:
    """Returns a RowsInserted's `columns` with the dynamic field's column added (`{}` for
    every row) if the collection has one and the event left it out (no row had a dynamic
    key, so the writer saved encoding it), and with a column of each field added to the
    collection after the event was written (core/added_fields.py: its default value, else
    null, in every row); else `columns` as they are."""
    present = {c["field_name"] for c in columns}
    added = [
        {
            "field_id": f.field_id,
            "field_name": f.name,
            "column": encode_column(f.dtype, absent_values(f, num_rows)),
        }
        for f in schema.fields
        if f.name not in present and fillable(f)
    ]
    dyn = schema.dynamic
    if dyn is None or dyn.name in present:
        return [*columns, *added] if added else columns
    meta = {
        "field_id": dyn.field_id,
        "field_name": dyn.name,
        "column": encode_column(DataType.JSON, [{}] * num_rows),
    }
    return [*columns, *added, meta]
