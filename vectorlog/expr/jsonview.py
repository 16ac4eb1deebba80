"""One pass over a JSON (or ARRAY) column: the value at a key path in every row, with a type
code per row, and typed numpy/Arrow arrays of it built from those codes without another pass.

JSON semantics as Milvus's: a row whose key is missing, or whose value has another type, has
no value for a typed comparison (it compares false); bools are not numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from vectorlog.core.errors import InvalidArgument
from vectorlog.expr.nodes import Key


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
MISSING_, NULL, BOOL, INT, FLOAT, STR, LIST, DICT = range(8)


def _step(value: Any, key: Key) -> Any:
    """One JSON-pointer step: a dict by key (an integer key as its decimal text), a list by
    index (a string key of digits as that index)."""
    kind = type(value)
    if kind is dict:
        return value.get(key if isinstance(key, str) else str(key), MISSING)
    if kind is list:
        if isinstance(key, str):
            if not key.isdigit():
                return MISSING
            key = int(key)
        return value[key] if key < len(value) else MISSING
    return MISSING


def lookup(row: Any, keys: tuple[Key, ...]) -> Any:
    """The value at `keys` in `row`, or MISSING."""
    for key in keys:
        row = _step(row, key)
        if row is MISSING:
            return row
    return row


def typed_key(value: Any) -> Any:
    """A hashable key equal for equal JSON values and different across types (true != 1)."""
    kind = type(value)
    if kind is bool:
        return (0, value)
    if kind is int or kind is float:
        return (1, value)
    if kind is str:
        return (2, value)
    if value is None:
        return (3, None)
    if kind is list:
        return (4, tuple(typed_key(v) for v in value))
    if kind is dict:
        return (5, tuple(sorted((k, typed_key(v)) for k, v in value.items())))
    return (6, repr(value))


class _Codes(dict[type, int]):
    def __missing__(self, key: type) -> int:
        return MISSING_


_CODE_OF = _Codes(
    {type(None): NULL, bool: BOOL, int: INT, float: FLOAT, str: STR, list: LIST, dict: DICT}
)


def _getter(keys: tuple[Key, ...]) -> Callable[[Any], Any]:
    """The fastest function reading `keys` from one row."""
    if len(keys) == 1 and isinstance(keys[0], str):
        key = keys[0]
        return lambda row: row.get(key, MISSING) if type(row) is dict else MISSING
    return lambda row: lookup(row, keys)


class JsonView:
    """The values at one key path of a column of decoded JSON values (or of lists)."""

    def __init__(self, rows: Iterable[Any], keys: tuple[Key, ...], n: int) -> None:
        values = list(map(_getter(keys), rows)) if keys else list(rows)
        if len(values) != n:
            raise InvalidArgument(f"a JSON/ARRAY column has {len(values)} rows, expected {n}")
        codes = np.fromiter(map(_CODE_OF.__getitem__, map(type, values)), np.int8, count=n)
        for i in np.flatnonzero(codes == MISSING_):
            if isinstance(values[i], np.generic):  # numpy scalars inside decoded JSON
                values[i] = values[i].item()
                codes[i] = _CODE_OF[type(values[i])]
        self.values, self.n, self.codes = values, n, codes
        self._cache: dict[str, Any] = {}

    def rows_of(self, *codes: int) -> np.ndarray:
        """The row numbers whose value has one of the type codes."""
        return np.flatnonzero(np.isin(self.codes, codes))

    def _picked(self, rows: np.ndarray) -> list[Any]:
        values = self.values
        return [values[i] for i in rows]

    def numbers(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, valid): int64 if every number is an integer INT64 holds, else float64."""
        if "num" not in self._cache:
            rows = self.rows_of(INT, FLOAT)
            picked = self._picked(rows)
            out = np.zeros(self.n, dtype=np.float64 if (self.codes == FLOAT).any() else np.int64)
            try:
                out[rows] = picked
            except OverflowError:
                out = out.astype(np.float64)
                out[rows] = picked
            self._cache["num"] = (out, self.valid_mask(rows))
        return self._cache["num"]

    def strings(self) -> pa.Array:
        """The string values as an Arrow array, null where there is no string."""
        if "str" not in self._cache:
            rows = self.rows_of(STR)
            objects = np.full(self.n, None, dtype=object)
            objects[rows] = self._picked(rows)
            self._cache["str"] = pa.array(objects, type=pa.string())
        return self._cache["str"]

    def bools(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, valid) of the bool values."""
        valid = self.codes == BOOL
        out = np.zeros(self.n, dtype=bool)
        rows = np.flatnonzero(valid)
        out[rows] = self._picked(rows)
        return out, valid

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(lengths, valid) of the list values."""
        rows = self.rows_of(LIST)
        out = np.zeros(self.n, dtype=np.int64)
        out[rows] = [len(v) for v in self._picked(rows)]
        return out, self.valid_mask(rows)

    def valid_mask(self, rows: np.ndarray) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool)
        mask[rows] = True
        return mask

    def per_row(self, rows: np.ndarray, test: Any) -> np.ndarray:
        """A mask: `test(value)` on `rows`, false elsewhere."""
        out = np.zeros(self.n, dtype=bool)
        if len(rows):
            out[rows] = [bool(test(v)) for v in self._picked(rows)]
        return out


def rows_of_column(column: Any) -> Sequence[Any] | Iterable[Any]:
    """A JSON/ARRAY column as an iterable of Python values (Arrow arrays are converted)."""
    if isinstance(column, pa.ChunkedArray | pa.Array):
        return column.to_pylist()
    return column
