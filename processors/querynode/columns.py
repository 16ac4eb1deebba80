"""The scalar fields of a replica's rows as columns, for vectorized filters and output.

Numbers and bools live in typed numpy GrowArrays (INT8/16/32 and FLOAT at their own width),
strings in Arrow string arrays (what the filter evaluator computes on), JSON (the dynamic
`$meta` too) and arrays (both decoded once, on insert) in numpy object GrowArrays. Row i of
every column belongs to row i of the replica.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa

from vectorlog.core.added_fields import absent_values
from vectorlog.core.model import FieldSchema
from vectorlog.processors.querynode.growarray import GrowArray

#: numpy dtypes of the fixed-width scalar types (by DataType name, so new types fit in);
#: strings are Arrow arrays, every other scalar type is held as Python objects
NUMERIC = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FLOAT": np.float32,
    "DOUBLE": np.float64,
}
STRING = "VARCHAR"
#: types whose values are mutable Python objects: copied before they are handed out
MUTABLE = frozenset({"JSON", "ARRAY"})
MAX_CHUNKS = 64  # string chunks kept before they are merged into one array
#: one shared empty document for the rows whose JSON is `{}` (never mutated: reads copy)
EMPTY: dict[str, Any] = {}
EMPTY_TEXT = "{}"


def object_array(values: Iterable[Any], n: int) -> np.ndarray:
    """Returns a 1-d object array of `n` values (lists stay elements, never a 2nd axis)."""
    return np.fromiter(values, dtype=object, count=n)


def decode_json(texts: list[str]) -> list[Any]:
    """Returns the decoded JSON documents `texts`, parsed as one array (about 4x faster
    than one parse each). Raises ValueError if one is not JSON."""
    if not texts:
        return []
    try:
        values = json.loads("[" + ",".join(texts) + "]")
    except ValueError:
        values = None
    if not isinstance(values, list) or len(values) != len(texts):  # find the bad one
        values = [json.loads(t) for t in texts]
    return values


def copy_json(value: Any) -> Any:
    """Returns a deep copy of a decoded JSON value (dicts, lists and immutable scalars)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


class StringColumn:
    """An append-only Arrow string column: one chunk per insert, merged when read."""

    def __init__(self) -> None:
        self._chunks: list[pa.Array] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def extend(self, values: pa.Array) -> None:
        self._chunks.append(values)
        self._n += len(values)
        if len(self._chunks) > MAX_CHUNKS:
            self.view()

    def view(self) -> pa.Array:
        """Returns every row as one Arrow array (merging the chunks appended since)."""
        if len(self._chunks) != 1:
            merged = pa.concat_arrays(self._chunks) if self._chunks else pa.array([], pa.string())
            self._chunks = [merged]
        return self._chunks[0]


class ScalarColumns:
    """Append-only columns of every non-vector field of a collection."""

    def __init__(self, fields: Sequence[FieldSchema]) -> None:
        self.types = {f.name: f.dtype.value for f in fields if not f.is_vector}
        #: nullable fields: numbers held as objects (numpy scalars of the type, None if null)
        self.nullable = frozenset(f.name for f in fields if f.nullable)
        self._cols: dict[str, GrowArray | StringColumn] = {
            name: StringColumn() if kind == STRING else GrowArray(self._dtype(name, kind))
            for name, kind in self.types.items()
        }

    def add(self, f: FieldSchema, rows: int) -> None:
        """Adds a column for field `f` (added to the collection), holding what `rows`
        rows written before it read as: its default value, else None."""
        if f.name in self._cols or f.is_vector:
            return
        self.types[f.name] = f.dtype.value
        if f.nullable:
            self.nullable = self.nullable | {f.name}
        col: GrowArray | StringColumn
        if f.dtype.value == STRING:
            col = StringColumn()
        else:
            col = GrowArray(self._dtype(f.name, f.dtype.value))
        self._cols[f.name] = col
        if rows:
            col.extend(self.stored(f.name, absent_values(f, rows), rows))

    def _dtype(self, name: str, kind: str) -> Any:
        return object if name in self.nullable else NUMERIC.get(kind, object)

    def stored(self, name: str, values: Any, n: int) -> np.ndarray | pa.Array:
        """Returns a decoded column as it is stored: a numpy array of `n` values (JSON
        strings decoded) or an Arrow string array."""
        kind = self.types[name]
        if kind in NUMERIC and name in self.nullable:
            return _nullable_numbers(values, NUMERIC[kind], n)
        if kind in NUMERIC:
            return np.asarray(values, dtype=NUMERIC[kind])
        if kind == STRING:
            return pa.array(values, type=pa.string())
        if kind in MUTABLE:  # JSON and ARRAY travel as JSON texts (None: a null row)
            if values.count(EMPTY_TEXT) == n:  # e.g. $meta of rows without dynamic keys
                return object_array(repeat(EMPTY, n), n)
            values = _decode_nullable(values)
        return object_array(values, n)

    def reserve(self, rows: int) -> None:
        """Makes room for `rows` rows in every numeric column."""
        for col in self._cols.values():
            if isinstance(col, GrowArray):
                col.reserve(rows)

    def extend(self, columns: dict[str, Any]) -> None:
        """Appends the rows of `columns` (as returned by `stored`, one per field)."""
        for name, col in self._cols.items():
            col.extend(columns[name])

    def view(self, name: str) -> np.ndarray | pa.Array:
        """Returns the column of `name`, every row so far, as the filter evaluator takes it
        (numpy, or Arrow for strings; not a copy)."""
        return self._cols[name].view()

    def take(self, names: Iterable[str], rows: np.ndarray) -> dict[str, np.ndarray | pa.Array]:
        """Returns the columns of `names` restricted to `rows` (copies)."""
        return {name: _take(self._cols[name].view(), rows) for name in names}

    def keys(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Returns the values of `name` at `rows` as a numpy array that sorts and compares
        (strings as an object array)."""
        col = _take(self._cols[name].view(), rows)
        return col.to_numpy(zero_copy_only=False) if isinstance(col, pa.Array) else col

    def values(self, name: str, rows: np.ndarray) -> list[Any]:
        """Returns the Python values of `name` at `rows` (JSON and arrays copied)."""
        out = _take(self._cols[name].view(), rows).tolist()
        if self.types[name] in MUTABLE:
            return [copy_json(v) for v in out]
        if name in self.nullable and self.types[name] in NUMERIC:
            return [v.item() if isinstance(v, np.generic) else v for v in out]
        return out


def _take(col: np.ndarray | pa.Array, rows: np.ndarray) -> np.ndarray | pa.Array:
    return col.take(pa.array(rows, type=pa.int64())) if isinstance(col, pa.Array) else col[rows]


def _nullable_numbers(values: Any, dtype: Any, n: int) -> np.ndarray:
    """Returns a nullable numeric column as objects: numpy scalars of `dtype` (so filters
    compare them at the type's width), None in null rows."""
    out = np.full(n, None, dtype=object)
    rows = [i for i, v in enumerate(values) if v is not None]
    if rows:
        typed = np.asarray([values[i] for i in rows], dtype=dtype)
        out[rows] = list(typed)
    return out


def _decode_nullable(texts: list[Any]) -> list[Any]:
    """Returns decoded JSON texts, None where a row is null (None)."""
    if all(t is not None for t in texts):
        return decode_json(texts)
    rows = [i for i, t in enumerate(texts) if t is not None]
    out: list[Any] = [None] * len(texts)
    for i, v in zip(rows, decode_json([texts[i] for i in rows]), strict=True):
        out[i] = v
    return out
