"""Column adapters: the representations the query node stores, as the evaluator needs them.

Integers (any width) -> int64 numpy; FLOAT/DOUBLE -> float32/float64 numpy; BOOL -> bool numpy;
VARCHAR (object numpy array of str, or an Arrow string array) -> an Arrow string array.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from vectorlog.core.errors import InvalidArgument


def _numpy(column: Any) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray | pa.Array):
        return column.to_numpy(zero_copy_only=False)
    return np.asarray(column)


def check_length(name: str, column: Any, n: int) -> None:
    """Raises InvalidArgument if `column` does not have `n` rows."""
    if len(column) != n:
        raise InvalidArgument(f"column {name!r} has {len(column)} rows, expected {n}")


def _filled(array: np.ndarray) -> np.ndarray:
    """A nullable column's objects (numpy scalars, None where null) as a typed array, its
    null rows 0 (`nulls` says which they are)."""
    if array.dtype != object:
        return array
    first = next((v for v in array if v is not None), None)
    zero = type(first)(0) if isinstance(first, np.generic | bool | int | float) else 0
    return np.asarray([zero if v is None else v for v in array])


def numbers(column: Any) -> np.ndarray:
    """Integers widened to int64 (so arithmetic and comparisons with any INT64 constant do not
    overflow the column's narrower type); floats kept as they are."""
    array = _filled(_numpy(column))
    if array.dtype.kind in "iub" and array.dtype != np.int64:
        return array.astype(np.int64)
    if array.dtype.kind not in "iuf":
        return array.astype(np.float64)
    return array


def booleans(column: Any) -> np.ndarray:
    return _filled(_numpy(column)).astype(bool, copy=False)


def strings(column: Any) -> pa.Array:
    """An Arrow string array of the column (None -> null)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, pa.Array):
        return column
    # from_pandas: Arrow's object-array path, about twice as fast as the default one
    return pa.array(np.asarray(column, dtype=object), type=pa.string(), from_pandas=True)


def nulls(column: Any) -> np.ndarray:
    """Where a non-JSON column holds None (Arrow: null)."""
    if isinstance(column, pa.ChunkedArray | pa.Array):
        return column.is_null().to_numpy(zero_copy_only=False)
    array = np.asarray(column)
    if array.dtype != object:
        return np.zeros(len(array), dtype=bool)
    return np.fromiter((v is None for v in array), dtype=bool, count=len(array))
