"""Fitting a batch's columns to the collection's schema, on columns: the checks the proxy's
`rows_to_columns` makes row by row (a missing value, an integer outside its type, a FLOAT
beyond float32, a non-finite number, an over-long or empty-key string, a vector of another
dimension, with a NaN or an overflowing norm) made as masks, so a row that does not fit is
refused alone, with its reason, and the others go on as one `Validated` write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vectorlog.core.model import HALF_TYPES, INT_RANGES, CollectionSchema, DataType, FieldSchema
from vectorlog.processors.proxy.functions import derived
from vectorlog.processors.proxy.ingest.columnar import input_fields
from vectorlog.processors.proxy.validation import Columns, Validated

FLOAT32_MAX = float(np.finfo(np.float32).max)
#: (a mask of the rows refused, the reason of each) per check
Refusal = tuple[np.ndarray, Callable[[int], str]]


@dataclass(frozen=True)
class Fitted:
    """The rows that fit (`rows`: their indices in the batch, in order) as one write, and
    the reason of each row that does not."""

    rows: np.ndarray
    write: Validated | None
    bad: dict[int, str]


def fit_columns(schema: CollectionSchema, table: pa.Table, rows: np.ndarray) -> Fitted:
    """Returns the rows `rows` of `table` fitted to `schema`; of a key given twice the last
    row is kept (one write has one timestamp, so the last upsert must be the one written)."""
    table = _take(table, rows)
    bad: dict[int, str] = {}
    fields = input_fields(schema)
    for f in fields:
        for mask, why in _refusals(f, table.column(f.name).combine_chunks()):
            for i in np.flatnonzero(mask).tolist():
                bad.setdefault(int(rows[i]), why(i))
    keep = np.array([i for i, r in enumerate(rows.tolist()) if r not in bad], dtype=np.int64)
    keep = _last_per_key(table.column(schema.primary.name), keep)
    if not len(keep):
        return Fitted(keep, None, bad)
    kept = _take(table, keep)
    columns: Columns = {f.name: _values(f, kept.column(f.name).combine_chunks()) for f in fields}
    return Fitted(rows[keep], Validated(schema, derived(columns, schema), len(keep)), bad)


def _take(data: Any, rows: np.ndarray) -> Any:
    """Returns rows `rows` of a table or array (itself when they are all of it, in order:
    a take copies every vector)."""
    if len(rows) == len(data) and (not len(rows) or (rows[0] == 0 and rows[-1] == len(rows) - 1)):
        return data  # ascending unique indices from 0 to n - 1: every row, in order
    return data.take(pa.array(rows, type=pa.int64()))


def _refusals(f: FieldSchema, col: pa.Array) -> list[Refusal]:
    missing = np.asarray(col.is_null(), dtype=bool)
    out: list[Refusal] = [(missing, lambda _: f"missing field(s) [{f.name!r}]")]
    if f.dtype is DataType.FLOAT_VECTOR:
        return out + _vector_refusals(f, col, missing)
    if f.dtype in INT_RANGES:
        lo, hi = INT_RANGES[f.dtype]
        v = col.fill_null(0).to_numpy()
        why = f"is outside {f.dtype.value} ({lo}..{hi})"
        out.append(((v < lo) | (v > hi), lambda i: f"field {f.name!r} value {v[i]} {why}"))
    elif f.dtype in (DataType.FLOAT, DataType.DOUBLE):
        v = col.fill_null(0.0).to_numpy()
        limit = FLOAT32_MAX if f.dtype is DataType.FLOAT else np.inf
        bad = ~np.isfinite(v) | (np.abs(v) > limit)
        out.append(
            (bad, lambda i: f"field {f.name!r} must be a finite {f.dtype.value}, got {v[i]!r}")
        )
    elif f.dtype is DataType.VARCHAR:
        size = pc.binary_length(col).fill_null(0).to_numpy()
        limit = f.max_length or 65_535
        out.append(
            (
                size > limit,
                lambda i: f"field {f.name!r} is {size[i]} bytes of UTF-8, max_length {limit}",
            )
        )
        if f.is_primary:
            out.append(((size == 0) & ~missing, lambda _: f"primary key {f.name!r} is empty"))
    return out


def _vector_refusals(f: FieldSchema, col: pa.Array, missing: np.ndarray) -> list[Refusal]:
    dims = pc.list_value_length(col).fill_null(f.dim).to_numpy()
    wrong = dims != f.dim
    right = np.flatnonzero(~wrong & ~missing)
    arr = _vectors(_take(col, right), f.dim)
    nonfinite = np.zeros(len(col), dtype=bool)
    nonfinite[right] = ~np.isfinite(arr).all(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.einsum("ij,ij->i", arr, arr)
    overflow = np.zeros(len(col), dtype=bool)
    overflow[right] = ~np.isfinite(norms) & ~nonfinite[right]
    return [
        (wrong, lambda i: f"vector field {f.name!r} has dim {dims[i]}, expected {f.dim}"),
        (nonfinite, lambda _: f"vector field {f.name!r} has a NaN or infinite value"),
        (
            overflow,
            lambda _: f"vector field {f.name!r} is too large (its squared norm overflows float32)",
        ),
    ]


def _vectors(col: pa.Array, dim: int | None) -> np.ndarray:
    """Returns a list column of rows of `dim` floats as an (n, dim) float32 array."""
    flat = col.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(len(col), dim or 0)


def _values(f: FieldSchema, col: pa.Array) -> object:
    """Returns a fitted column in `rows_to_columns`'s form."""
    if f.dtype is DataType.FLOAT_VECTOR:
        return _vectors(col, f.dim)
    if f.dtype is DataType.VARCHAR or f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return col.to_pylist()  # sparse: each row's bytes, checked by the batch reader
    if f.dtype in HALF_TYPES or f.dtype is DataType.BINARY_VECTOR:
        width = 2 * int(f.dim or 0) if f.dtype in HALF_TYPES else int(f.dim or 0) // 8
        return np.frombuffer(b"".join(col.to_pylist()), np.uint8).reshape(len(col), width)
    if f.dtype is DataType.FLOAT:
        return col.to_numpy().astype(np.float32)
    if f.dtype is DataType.BOOL:
        return col.to_numpy(zero_copy_only=False).astype(bool)
    return col.to_numpy()


def _last_per_key(keys: pa.ChunkedArray, keep: np.ndarray) -> np.ndarray:
    """Returns `keep` without a row whose key a later kept row gives again."""
    values = keys.take(pa.array(keep, type=pa.int64())).to_numpy(zero_copy_only=False)
    _, last = np.unique(values[::-1], return_index=True)
    if len(last) == len(keep):
        return keep
    return keep[np.sort(len(keep) - 1 - last)]
