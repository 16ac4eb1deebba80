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
from typing import Any

import numpy as np

from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.model import INT_RANGES, META, CollectionSchema, DataType, FieldSchema
from vectorlog.processors.proxy.arrays import array_values, float32s

INT64_MIN, INT64_MAX = INT_RANGES[DataType.INT64]
Columns = dict[str, Any]

MAX_JSON_DEPTH = 64  # nesting of a JSON field value


def rows_to_columns(
    schema: CollectionSchema, rows: Sequence[dict[str, Any]], upsert: bool = False
) -> Columns:
    """Returns {field name: values} for every user-supplied field. Raises SchemaMismatch.

    An upsert names its rows, so it needs the primary key even when it is auto_id.
    """
    if isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, Sequence) or not rows:
        raise SchemaMismatch("insert needs a non-empty list of rows (dicts)")
    fields = [f for f in schema.user_fields if upsert or not (f.is_primary and f.auto_id)]
    rows = _with_optional(fields, rows)
    raw = _extract(rows, [f.name for f in fields])
    if raw is None:  # the slow path names the first bad row
        if schema.dynamic is not None:
            raw = _split_dynamic(schema, rows, {f.name for f in fields}, upsert)
        else:
            _check_keys(schema, rows, {f.name for f in fields}, upsert)
            raw = {f.name: [r[f.name] for r in rows] for f in fields}
    elif schema.dynamic is not None:  # no key outside the schema: $meta left out (all {})
        return {f.name: _column(f, raw[f.name]) for f in fields}
    columns = {f.name: _column(f, raw[f.name]) for f in fields}
    if schema.dynamic is not None:
        columns[META] = _dynamic(schema.dynamic, raw[META])
    return columns


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
    if f.dtype is DataType.FLOAT_VECTOR:
        return vectors(f, values)
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


def _checked(f: FieldSchema, values: list[Any], ok: Any, what: str, dtype: Any) -> np.ndarray:
    for i, v in enumerate(values):
        if not ok(v):
            raise SchemaMismatch(f"row {i}: field {f.name!r} must be {what}, got {v!r}")
    return np.asarray(values, dtype=dtype)


def _ints(f: FieldSchema, values: list[Any]) -> np.ndarray:
    """Returns the integers of an INT8/16/32/64 field as int64. Raises SchemaMismatch naming
    the first row that is not an integer or is outside the type's range."""
    lo, hi = INT_RANGES[f.dtype]
    arr = np.asarray(values)
    fast = (
        arr.dtype.kind == "i" and arr.ndim == 1 and {bool, np.bool_}.isdisjoint(map(type, values))
    )
    if fast and (not arr.size or lo <= arr.min() <= arr.max() <= hi):  # numpy sees True as 1
        return arr.astype(np.int64)
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


def vectors(f: FieldSchema, values: list[Any]) -> np.ndarray:
    """Returns an (n, dim) float32 array. Raises SchemaMismatch naming the bad row."""
    try:
        raw = np.asarray(values)
        with np.errstate(over="ignore"):  # a value beyond float32 becomes inf: refused below
            arr = raw.astype(np.float32, copy=False) if raw.dtype.kind in "iuf" else None
    except (ValueError, TypeError):
        arr = None
    if arr is None or arr.ndim != 2 or arr.shape[1] != f.dim:
        raise SchemaMismatch(_bad_vector(f, values))
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


def _bad_vector(f: FieldSchema, values: list[Any]) -> str:
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


def check_unique(pk: FieldSchema, keys: Any) -> None:
    """Raises SchemaMismatch if a primary key repeats within one request."""
    seen: set[Any] = set()
    for i, k in enumerate(keys.tolist() if isinstance(keys, np.ndarray) else keys):
        if k in seen:
            raise SchemaMismatch(f"row {i}: primary key {pk.name!r} value {k!r} repeats")
        seen.add(k)
