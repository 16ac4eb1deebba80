"""Validation of insert/delete requests against a collection's schema, before anything is written.

Rows (MilvusClient style: a list of dicts) become typed columns. Every error names the field
and the row index that is wrong: a missing or unknown field, a wrong type, an integer outside
its type's range (INT8 -128..127 ...), a FLOAT beyond float32, a vector of the wrong dimension
or with a NaN, an over-long string, an ARRAY over max_capacity or with an element of another
type, a primary key given to an auto_id field, a primary key repeated within the request.
With the dynamic field, the keys of a row outside the schema become its `$meta` document (no
`$meta` column when no row has such a key: see schemas/columns.with_dynamic).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core import sparse
from vectorlog.core.binvec import binary_rows
from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.core.halfvec import half_rows, to_float32
from vectorlog.core.model import (
    HALF_TYPES,
    INT_RANGES,
    META,
    CollectionSchema,
    DataType,
    FieldSchema,
)
from vectorlog.processors.proxy.arrays import array_values, float32s
from vectorlog.processors.proxy.columnar import ColumnBatch
from vectorlog.processors.proxy.functions import derived, function_outputs

INT64_MIN, INT64_MAX = INT_RANGES[DataType.INT64]
Columns = dict[str, Any]

MAX_JSON_DEPTH = 64  # nesting of a JSON field value


@dataclass(frozen=True)
class Validated:
    """Rows already checked against `schema` as columns, in `rows_to_columns`'s output form
    (the ingest consumer's columnar decoding: processors/proxy/ingest/columnar.py)."""

    schema: CollectionSchema
    columns: Columns
    num_rows: int

    def __len__(self) -> int:
        return self.num_rows


def rows_to_columns(
    schema: CollectionSchema, rows: Sequence[dict[str, Any]] | Validated, upsert: bool = False
) -> Columns:
    """Returns {field name: values} for every user-supplied field (of `Validated` rows: their
    columns, if checked against this very schema). Raises SchemaMismatch.

    An upsert names its rows, so it needs the primary key even when it is auto_id.
    """
    if isinstance(rows, ColumnBatch):
        return _batch_columns(schema, rows, upsert)
    if isinstance(rows, Validated):
        if rows.schema != schema:
            raise SchemaMismatch("the collection's schema changed since the rows were checked")
        return dict(rows.columns)
    if isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, Sequence) or not rows:
        raise SchemaMismatch("insert needs a non-empty list of rows (dicts)")
    outputs = function_outputs(schema, rows)
    fields = [
        f
        for f in schema.user_fields
        if (upsert or not (f.is_primary and f.auto_id)) and f.name not in outputs
    ]
    rows = _with_optional(fields, rows)
    raw = _extract(rows, [f.name for f in fields])
    if raw is None:  # the slow path names the first bad row
        if schema.dynamic is not None:
            raw = _split_dynamic(schema, rows, {f.name for f in fields}, upsert)
        else:
            _check_keys(schema, rows, {f.name for f in fields}, upsert)
            raw = {f.name: [r[f.name] for r in rows] for f in fields}
    elif schema.dynamic is not None:  # no key outside the schema: $meta left out (all {})
        return derived({f.name: _column(f, raw[f.name]) for f in fields}, schema)
    columns = {f.name: _column(f, raw[f.name]) for f in fields}
    if schema.dynamic is not None:
        columns[META] = _dynamic(schema.dynamic, raw[META])
    return derived(columns, schema)


def _batch_columns(schema: CollectionSchema, batch: ColumnBatch, upsert: bool) -> Columns:
    """Returns the validated columns of a columnar insert (the dynamic field left out: its
    rows are all {}). Raises SchemaMismatch for an unknown or missing field, an auto_id key
    supplied, a column of another length (Milvus's message) or a bad value."""
    outputs = {n for fn in schema.functions for n in fn.output_field_names}
    given, n = batch.columns, batch.num_rows
    supplied = sorted(outputs & given.keys())
    if supplied:
        raise SchemaMismatch(
            f"field {supplied[0]!r} is the output of a BM25 function: its value is derived "
            "from the input text, not given"
        )
    fields = [
        f
        for f in schema.user_fields
        if (upsert or not (f.is_primary and f.auto_id)) and f.name not in outputs
    ]
    pk = schema.primary
    if pk.auto_id and not upsert and pk.name in given:
        raise SchemaMismatch(f"primary key {pk.name!r} is auto_id; do not supply it")
    unknown = sorted(given.keys() - {f.name for f in fields})
    if unknown:
        raise SchemaMismatch(f"unknown field(s) {unknown}")
    if n <= 0:
        raise SchemaMismatch("insert needs a non-empty list of rows (dicts)")
    out: Columns = {}
    for f in fields:
        values = given.get(f.name)
        if values is None:
            if not (f.nullable or f.default_value is not None):
                raise SchemaMismatch(f"missing field(s) {[f.name]}")
            values = [None] * n
        if len(values) != n:
            raise SchemaMismatch(
                f"the num_rows ({len(values)}) of field ({f.name}) is not equal to passed "
                f"num_rows ({n})"
            )
        out[f.name] = _column(f, values)
    return derived(out, schema)


def _dynamic(f: FieldSchema, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the `$meta` documents; raises SchemaMismatch naming the row of one that is
    not JSON (the empty ones, rows without dynamic keys, need no check)."""
    for i, doc in enumerate(docs):
        for key, value in doc.items():
            if isinstance(key, str) and not _text(key):
                raise SchemaMismatch(
                    f"row {i}: a dynamic field name (kept in {f.name!r}) is not valid Unicode "
                    "text (a lone surrogate?)"
                )
            try:
                _json(f, [value])
            except SchemaMismatch as exc:
                problem = str(exc).split(" is not JSON: ", 1)[-1]
                raise SchemaMismatch(
                    f"row {i}: dynamic field {key!r} (kept in {f.name!r}) is not JSON: {problem}"
                ) from None
    return docs


def _text(s: str) -> bool:
    """Returns whether `s` encodes as UTF-8 (no lone surrogate)."""
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def _extract(rows: Sequence[Any], names: list[str]) -> dict[str, list[Any]] | None:
    """Returns the values per field if every row is a dict with exactly `names`, else None."""
    if not all(type(r) is dict for r in rows) or {len(r) for r in rows} != {len(names)}:
        return None
    try:  # same size and every name present: no row has a missing or unknown field
        return {name: [r[name] for r in rows] for name in names}
    except KeyError:
        return None


def _check_keys(
    schema: CollectionSchema, rows: Sequence[Any], expected: set[str], upsert: bool
) -> None:
    for i, row in enumerate(rows):
        if _check_row(schema, i, row, expected, upsert):
            raise SchemaMismatch(f"row {i}: unknown field(s) {sorted(row.keys() - expected)}")


def _check_row(
    schema: CollectionSchema, i: int, row: Any, expected: set[str], upsert: bool
) -> bool:
    """Returns whether `row` has keys outside `expected`. Raises SchemaMismatch for a
    non-dict, a missing field or an auto_id primary key supplied."""
    if not isinstance(row, dict):
        raise SchemaMismatch(f"row {i} is a {type(row).__name__}, not a dict")
    if row.keys() == expected:
        return False
    pk = schema.primary
    if pk.auto_id and not upsert and pk.name in row:
        raise SchemaMismatch(f"row {i}: primary key {pk.name!r} is auto_id; do not supply it")
    missing = sorted(expected - row.keys())
    if missing:
        raise SchemaMismatch(f"row {i}: missing field(s) {missing}")
    return True


def _split_dynamic(
    schema: CollectionSchema, rows: Sequence[Any], expected: set[str], upsert: bool
) -> dict[str, list[Any]]:
    """Returns the values per field and, under META, each row's keys outside the schema (its
    dynamic fields) as a dict. Raises SchemaMismatch as `_check_keys`, and for a row naming
    `$meta` itself."""
    raw: dict[str, list[Any]] = {name: [] for name in (*expected, META)}
    for i, row in enumerate(rows):
        extra = _check_row(schema, i, row, expected, upsert)
        if extra and META in row:
            raise SchemaMismatch(f"row {i}: {META!r} is the dynamic field; give its keys instead")
        for name in expected:
            raw[name].append(row[name])
        raw[META].append({k: v for k, v in row.items() if k not in expected} if extra else {})
    return raw


def _with_optional(fields: list[FieldSchema], rows: Sequence[Any]) -> Sequence[Any]:
    """Returns the rows with None for each nullable or defaulted field a row leaves out
    (Milvus stores null, or the default, for it)."""
    optional = [f.name for f in fields if f.nullable or f.default_value is not None]
    if not optional:
        return rows
    return [
        {**dict.fromkeys((k for k in optional if k not in r), None), **r}
        if type(r) is dict and not r.keys() >= set(optional)
        else r
        for r in rows
    ]


def _column(f: FieldSchema, values: list[Any]) -> Any:
    """Returns a field's validated column: a defaulted field's None rows take the default;
    a nullable field's column with a None is a list holding None in those rows."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return _typed(f, values)  # a numeric column: no None in it
    if f.default_value is not None:
        values = [f.default_value if v is None else v for v in values]
    if not f.nullable or all(v is not None for v in values):
        return _typed(f, values)
    rows = [i for i, v in enumerate(values) if v is not None]
    out: list[Any] = [None] * len(values)
    if rows:
        typed = _typed(f, [values[i] for i in rows])
        for i, v in zip(
            rows, typed.tolist() if isinstance(typed, np.ndarray) else typed, strict=True
        ):
            out[i] = v
    return out


def _typed(f: FieldSchema, values: list[Any]) -> Any:
    floats = _finite_floats(f, values)
    if floats is not None:
        return floats
    if f.dtype is DataType.FLOAT_VECTOR:
        return vectors(f, values)
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return sparse_rows(f, values)
    if f.dtype in HALF_TYPES:
        return half_rows(f.name, f.dtype.value, f.dim or 0, values)
    if f.dtype is DataType.BINARY_VECTOR:
        return binary_rows(f.name, f.dim or 0, values)
    if f.dtype in INT_RANGES:
        return _ints(f, values)
    if f.dtype is DataType.FLOAT:
        return float32s(f, values)
    if f.dtype is DataType.ARRAY:
        return array_values(f, values)
    if f.dtype is DataType.DOUBLE:
        return _checked(
            f,
            values,
            lambda v: (
                isinstance(v, (int, float, np.number))
                and not isinstance(v, (bool, np.bool_))
                and math.isfinite(v)
            ),
            "a finite number",
            np.float64,
        )
    if f.dtype is DataType.BOOL:
        return _checked(f, values, lambda v: isinstance(v, (bool, np.bool_)), "a bool", bool)
    if f.dtype is DataType.VARCHAR:
        if f.is_primary and "" in values:
            raise SchemaMismatch(f"row {values.index('')}: primary key {f.name!r} is empty")
        return _strings(f, values)
    return _json(f, values)


def _finite_floats(f: FieldSchema, values: Any) -> np.ndarray | None:
    """Returns a FLOAT / DOUBLE column given as a float array, converted, if every value is
    finite at the field's width; None otherwise (the checks name the bad row)."""
    width = {DataType.FLOAT: np.float32, DataType.DOUBLE: np.float64}.get(f.dtype)
    if width is None or not isinstance(values, np.ndarray) or values.dtype.kind != "f":
        return None
    with np.errstate(over="ignore"):
        out = values.astype(width)
    return out if out.ndim == 1 and bool(np.isfinite(out).all()) else None


def _checked(f: FieldSchema, values: list[Any], ok: Any, what: str, dtype: Any) -> np.ndarray:
    for i, v in enumerate(values):
        if not ok(v):
            raise SchemaMismatch(f"row {i}: field {f.name!r} must be {what}, got {v!r}")
    return np.asarray(values, dtype=dtype)


def _fits(arr: np.ndarray, f: FieldSchema) -> bool:
    """Whether every value of an integer array is in the field's range by its type alone
    (empty, or int64 values of an INT64 field: no min/max pass)."""
    return not arr.size or (arr.dtype == np.int64 and f.dtype is DataType.INT64)


def _ints(f: FieldSchema, values: list[Any]) -> np.ndarray:
    """Returns the integers of an INT8/16/32/64 field as int64. Raises SchemaMismatch naming
    the first row that is not an integer or is outside the type's range."""
    lo, hi = INT_RANGES[f.dtype]
    arr = np.asarray(values)
    fast = (
        arr.dtype.kind == "i"
        and arr.ndim == 1
        and (isinstance(values, np.ndarray) or {bool, np.bool_}.isdisjoint(map(type, values)))
    )
    if fast and (_fits(arr, f) or lo <= arr.min() <= arr.max() <= hi):  # numpy sees True as 1
        return arr.astype(np.int64, copy=False)  # an int64 column as it is: no copy
    kind = f.dtype.value
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise SchemaMismatch(f"row {i}: field {f.name!r} must be an {kind}, got {v!r}")
        if not lo <= int(v) <= hi:
            raise SchemaMismatch(
                f"row {i}: field {f.name!r} value {v} is outside {kind} ({lo}..{hi})"
            )
    return np.asarray([int(v) for v in values], dtype=np.int64)


def _strings(f: FieldSchema, values: list[Any]) -> list[str]:
    limit = f.max_length or 65_535
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise SchemaMismatch(f"row {i}: field {f.name!r} must be a string, got {v!r}")
        try:
            size = len(v.encode())
        except UnicodeEncodeError:
            raise SchemaMismatch(
                f"row {i}: field {f.name!r} is not valid Unicode text (a lone surrogate?): {v!r}"
            ) from None
        if size > limit:
            raise SchemaMismatch(  # Milvus's words (proxy/validate_util.go), bytes of UTF-8
                f"field {f.name!r}: length of varchar field {f.name} exceeds max length, "
                f"row number: {i}, length: {size}, max length: {limit}"
            )
    return values


def _json(f: FieldSchema, values: list[Any]) -> list[Any]:
    for i, v in enumerate(values):
        problem = _json_problem(v)
        if problem is None:
            try:  # not ASCII-escaped: a lone surrogate (in a key too) fails to encode
                json.dumps(v, allow_nan=False, ensure_ascii=False).encode()
            except UnicodeEncodeError:
                problem = "a string holds a lone surrogate (not valid Unicode text)"
            except (TypeError, ValueError) as exc:
                problem = str(exc)
        if problem:
            raise SchemaMismatch(f"row {i}: field {f.name!r} is not JSON: {problem}")
    return values


def _json_problem(value: Any) -> str | None:
    """Returns why a value is not a JSON document json.dumps would keep as given (non-string
    keys, nesting deeper than MAX_JSON_DEPTH), walking it without recursion; else None."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(v, dict):
            bad = next((k for k in v if not isinstance(k, str)), None)
            if bad is not None:
                return f"object key {bad!r} is not a string"
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend((x, depth + 1) for x in v)
    return None


def vectors(f: FieldSchema, values: list[Any] | np.ndarray) -> np.ndarray:
    """Returns an (n, dim) float32 array. Raises SchemaMismatch naming the bad row."""
    try:
        raw = np.asarray(values)
        if raw.dtype == np.float32:
            arr: np.ndarray | None = raw
        else:
            with np.errstate(over="ignore"):  # a value beyond float32 becomes inf: refused below
                arr = raw.astype(np.float32, copy=False) if raw.dtype.kind in "iuf" else None
    except (ValueError, TypeError):
        arr = None
    if arr is None or arr.ndim != 2 or arr.shape[1] != f.dim:
        raise SchemaMismatch(_bad_vector(f, values))
    flat = arr.reshape(-1)
    if math.isfinite(float(flat.dot(flat))):  # no NaN, inf or overflowing norm in any row
        return arr
    if not np.isfinite(arr).all():
        row = int(np.where(~np.isfinite(arr).all(axis=1))[0][0])
        raise SchemaMismatch(f"row {row}: vector field {f.name!r} has a NaN or infinite value")
    with np.errstate(over="ignore"):
        norms = np.einsum("ij,ij->i", arr, arr)  # float32: distances must not overflow
    if not np.isfinite(norms).all():
        row = int(np.where(~np.isfinite(norms))[0][0])
        raise SchemaMismatch(
            f"row {row}: vector field {f.name!r} is too large (its squared norm overflows float32)"
        )
    return arr


def sparse_rows(f: FieldSchema, values: Any) -> list[bytes]:
    """Returns a sparse field's rows in Milvus's format (vectorlog/core/sparse.py). Raises
    SchemaMismatch naming the field and the bad row."""
    try:
        return sparse.rows_of(values)
    except SchemaMismatch as exc:
        raise SchemaMismatch(f"sparse vector field {f.name!r}: {exc}") from None


def sparse_queries(f: FieldSchema, data: Any) -> list[bytes]:
    """Returns a search's query rows for sparse field `f` (one row, a dict, is one query).
    Raises InvalidArgument naming what is wrong with them."""
    if isinstance(data, dict) or (hasattr(data, "shape") and not hasattr(data, "__len__")):
        data = [data]
    try:
        return sparse.rows_of(data)
    except SchemaMismatch as exc:
        raise InvalidArgument(f"search data: {exc}") from None
    except TypeError:
        raise InvalidArgument(
            f"search data must be a list of sparse vectors, not {data!r:.60}"
        ) from None


def half_queries(f: FieldSchema, data: Any) -> np.ndarray:
    """Returns a search's FLOAT16/BFLOAT16 queries (bytes, half arrays or numbers) as
    float32 rows. Raises InvalidArgument naming what is wrong with them."""
    if isinstance(data, (bytes, np.ndarray)) and (isinstance(data, bytes) or data.ndim == 1):
        data = [data]
    try:
        rows = half_rows(f.name, f.dtype.value, f.dim or 0, list(data))
    except SchemaMismatch as exc:
        raise InvalidArgument(f"search data: {exc}") from None
    except TypeError:
        raise InvalidArgument(f"search data must be a list of vectors, not {data!r:.60}") from None
    return to_float32(rows, f.dtype.value)


def binary_queries(f: FieldSchema, data: Any) -> np.ndarray:
    """Returns a search's BINARY_VECTOR queries as (nq, dim / 8) uint8. Raises
    InvalidArgument naming what is wrong with them."""
    if isinstance(data, (bytes, np.ndarray)) and (isinstance(data, bytes) or data.ndim == 1):
        data = [data]
    try:
        return binary_rows(f.name, f.dim or 0, list(data))
    except SchemaMismatch as exc:
        raise InvalidArgument(f"search data: {exc}") from None
    except TypeError:
        raise InvalidArgument(f"search data must be a list of vectors, not {data!r:.60}") from None


def _bad_vector(f: FieldSchema, values: list[Any] | np.ndarray) -> str:
    for i, v in enumerate(values):
        if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__"):
            return f"row {i}: vector field {f.name!r} must be a list of {f.dim} floats, got {v!r}"
        if len(v) != f.dim:
            return f"row {i}: vector field {f.name!r} has dim {len(v)}, expected {f.dim}"
        if not all(isinstance(x, (int, float, np.number)) and not isinstance(x, bool) for x in v):
            return f"row {i}: vector field {f.name!r} must hold numbers only"
    return f"vector field {f.name!r}: values are not an (n, {f.dim}) array of floats"


def primary_keys(f: FieldSchema, ids: Any) -> Any:
    """Returns validated primary keys (int64 array or list of str). Raises SchemaMismatch."""
    if isinstance(ids, (int, str, np.integer)):
        ids = [ids]
    if ids is None or isinstance(ids, (bytes, dict)) or not hasattr(ids, "__iter__"):
        raise SchemaMismatch(f"primary keys for {f.name!r} must be a key or a list, not {ids!r}")
    ids = list(ids)
    if not ids:
        raise SchemaMismatch(f"no primary keys given for {f.name!r}")
    if f.dtype is DataType.INT64:
        return _ints(f, ids)
    return _strings(f, ids)


def _distinct_ints(keys: np.ndarray) -> bool:
    """Returns whether a 1-d integer array holds no value twice (ascending keys, the usual
    batch, without sorting)."""
    if keys.ndim != 1:
        return False
    return bool((keys[1:] > keys[:-1]).all()) or len(np.unique(keys)) == len(keys)


def check_unique(pk: FieldSchema, keys: Any) -> None:
    """Raises SchemaMismatch if a primary key repeats within one request (Milvus's upsert
    message first). Integer keys in an array are checked in numpy (no Python int per row);
    only a batch with a repeat is walked to name its first one."""
    if isinstance(keys, np.ndarray) and keys.dtype.kind == "i" and _distinct_ints(keys):
        return
    seen: set[Any] = set()
    for i, k in enumerate(keys.tolist() if isinstance(keys, np.ndarray) else keys):
        if k in seen:
            raise SchemaMismatch(
                "duplicate primary keys are not allowed in the same batch: "
                f"row {i}: primary key {pk.name!r} value {k!r} repeats"
            )
        seen.add(k)
