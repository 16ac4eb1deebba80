"""Building a scalar index (INVERTED, BITMAP, STL_SORT, TRIE, AUTOINDEX on a scalar field; a
JSON path index; an ARRAY element index) of one segment's field from its insert logs.

Every type is built as one structure: the field's values sorted, each with the position of its
row in the segment (binlog row i); null rows are left out and NaN sorts last. A JSON index
holds the values at its `json_path` cast to its `json_cast_type` (rows holding no such value
are left out); an ARRAY index (or a JSON index cast to ARRAY_*) holds each distinct element of
a row once. The values are what the query node's filter compares (integers widened to int64,
FLOAT kept float32, JSON numbers cast to double), so the index answers exactly as a scan.

The file is an Arrow IPC file: columns `value` and `pos` (int64), and in the schema metadata
`kind` ("values" or "elements") and `class` ("num", "str" or "bool"). A JSON-cast index
(`json_cast_type` JSON) holds every boolean, number and string at its path: class "json",
columns `value_bool`, `value_num`, `value_str` (one set a row) and `pos`, each kind sorted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from vectorlog.core.model import DataType
from vectorlog.core.scalar_index import JSON_CAST, JSON_PATH, json_keys
from vectorlog.expr.jsonview import BOOL, FLOAT, INT, LIST, STR, JsonView
from vectorlog.storage.binlog_read import InsertColumn
from vectorlog.storage.column_read import NUMPY, field_values
from vectorlog.storage.payload import DataTypeCode
from vectorlog.storage.writer import MILVUS_TYPE

DATA_TYPE = {code: dtype for dtype, code in MILVUS_TYPE.items()} | {
    DataTypeCode.STRING: DataType.VARCHAR
}
#: a JSON cast type -> (the class of its values, whether it indexes list elements)
CASTS = {
    "BOOL": ("bool", False),
    "DOUBLE": ("num", False),
    "VARCHAR": ("str", False),
    "ARRAY_BOOL": ("bool", True),
    "ARRAY_DOUBLE": ("num", True),
    "ARRAY_VARCHAR": ("str", True),
}
_CODES = {"bool": (BOOL,), "num": (INT, FLOAT), "str": (STR,)}
_ARROW = {"bool": pa.bool_(), "num": pa.float64(), "str": pa.string()}
_CLASSES = ("bool", "num", "str")


def build_scalar(
    columns: Iterable[InsertColumn | list[Any]],
    index: dict[str, Any],
    dtype: DataType | None = None,
) -> tuple[bytes, int]:
    """Returns (the Arrow IPC file, the segment's rows) of a scalar index (an IndexCreated
    body) over a field's insert logs in row order; a list stands for the values of rows
    written before the field was added (its default or None), `dtype` the field's type.
    Raises CorruptBinlog if a log is not of one scalar type, ValueError if the type of
    the values is unknown (no logs and no `dtype`) or not scalar."""
    values: list[Any] = []
    for column in columns:
        if isinstance(column, list):
            values.extend(column)
            continue
        dtype = DATA_TYPE.get(column.data_type)
        if dtype is None or dtype is DataType.FLOAT_VECTOR:
            raise ValueError(f"a scalar index cannot index a {column.data_type.name} column")
        part = field_values(column, dtype, None, "", nullable=True)
        values.extend(part.tolist() if isinstance(part, np.ndarray) else part)
    if dtype is None:
        raise ValueError("the field has no insert logs")
    params = index.get("params", {})
    if dtype is DataType.JSON:
        cast = params[JSON_CAST].strip().upper()
        keys = json_keys(params.get(JSON_PATH, index["field_name"]), index["field_name"])
        docs = [None if t is None else json.loads(t) for t in values]
        view = JsonView(docs, keys, len(docs))
        table = _json_cast(view) if cast == "JSON" else _from_view(view, *CASTS[cast])
    elif dtype is DataType.ARRAY:
        lists = [None if t is None else json.loads(t) for t in values]
        table = _from_view(JsonView(lists, (), len(lists)), _element_class(lists), True)
    else:
        table = _plain(values, dtype)
    return _ipc(table), len(values)


def _plain(values: list[Any], dtype: DataType) -> pa.Table:
    """Returns the sorted (value, pos) table of a BOOL, number or VARCHAR column."""
    pos = np.asarray([i for i, v in enumerate(values) if v is not None], dtype=np.int64)
    present = [values[i] for i in pos]
    if dtype is DataType.VARCHAR:
        ranks = sorted(range(len(present)), key=present.__getitem__)
        strings = {"value": pa.array([present[i] for i in ranks], pa.string()), "pos": pos[ranks]}
        return pa.table(strings).replace_schema_metadata({"kind": "values", "class": "str"})
    array: np.ndarray = np.asarray(present, dtype=NUMPY[dtype])
    if array.dtype.kind in "iu":
        array = array.astype(np.int64)  # as the filter widens integers
    order = np.argsort(array, kind="stable")
    cls = "bool" if dtype is DataType.BOOL else "num"
    table = {"value": pa.array(array[order]), "pos": pos[order]}
    return pa.table(table).replace_schema_metadata({"kind": "values", "class": cls})


def _element_class(lists: list[Any]) -> str:
    """Returns the class of an ARRAY field's elements (from its first element)."""
    for row in lists:
        for v in row or ():
            return "bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "num"
    return "num"


def _from_view(view: JsonView, cls: str, elements: bool) -> pa.Table:
    """Returns the sorted (value, pos) table of the values (or list elements) of class `cls`
    in a JSON view."""
    if elements:
        pairs = [
            (v, int(i))
            for i in view.rows_of(LIST)
            for v in dict.fromkeys(x for x in view.values[i] if _is(x, cls))
        ]
    else:
        pairs = [(view.values[i], int(i)) for i in view.rows_of(*_CODES[cls])]
    if cls == "num" and not elements:
        pairs = [(_double(v), p) for v, p in pairs]  # cast to double, as Milvus casts
    pairs.sort(key=lambda p: p[0])
    kind = _ARROW[cls]
    if cls == "num" and elements and all(type(v) is int for v, _ in pairs):
        kind = pa.int64()  # whole numbers keep their precision
    table = {
        "value": pa.array([v for v, _ in pairs], kind),
        "pos": pa.array([p for _, p in pairs], pa.int64()),
    }
    meta = {"kind": "elements" if elements else "values", "class": cls}
    return pa.table(table).replace_schema_metadata(meta)


def _json_cast(view: JsonView) -> pa.Table:
    """Returns the table of a JSON-cast index: the booleans, numbers (as double) and strings
    at the path, each kind sorted in its own column (`value_bool`, `value_num`,
    `value_str`, one set a row) with its row's position."""
    parts = {cls: _from_view(view, cls, False) for cls in _CLASSES}
    columns: dict[str, pa.Array] = {}
    for cls in _CLASSES:
        chunks = [
            t.column("value").combine_chunks() if c == cls else pa.nulls(t.num_rows, _ARROW[cls])
            for c, t in parts.items()
        ]
        columns[f"value_{cls}"] = pa.chunked_array(chunks, _ARROW[cls]).combine_chunks()
    columns["pos"] = pa.concat_arrays([t.column("pos").combine_chunks() for t in parts.values()])
    return pa.table(columns).replace_schema_metadata({"kind": "values", "class": "json"})


def _double(value: int | float) -> float:
    """Returns a JSON number as a double (integers beyond its range: infinite)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _is(value: Any, cls: str) -> bool:
    kind = type(value)
    if cls == "num":
        return kind is int or kind is float
    return kind is (bool if cls == "bool" else str)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())
