"""Checks of FLOAT and ARRAY field values before anything is written: FLOAT values are finite
and within float32 (then rounded to float32, as Milvus stores them); an ARRAY value is a list
of at most max_capacity elements of its element type."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.model import INT_RANGES, DataType, FieldSchema

FLOAT32_MAX = float(np.finfo(np.float32).max)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))


def _float32(v: Any) -> float | None:
    """Returns `v` rounded to float32, or None if it is not a number that float32 holds."""
    if not _is_number(v) or not math.isfinite(v) or abs(v) > FLOAT32_MAX:
        return None
    rounded = float(np.float32(v))
    return rounded if math.isfinite(rounded) else None


def float32s(f: FieldSchema, values: list[Any]) -> np.ndarray:
    """Returns the values of a FLOAT field as float32. Raises SchemaMismatch naming the first
    row that is not a finite number within float32's range."""
    for i, v in enumerate(values):
        if _float32(v) is None:
            raise SchemaMismatch(
                f"row {i}: field {f.name!r} must be a finite FLOAT (float32), got {v!r}"
            )
    return np.asarray(values, dtype=np.float64).astype(np.float32)


def _element_check(f: FieldSchema) -> tuple[Callable[[Any], Any], str]:
    """Returns (a function giving an element's stored value or raising ValueError, what the
    elements must be) for the element type of ARRAY field `f`."""
    kind = f.element_type
    if kind is DataType.BOOL:
        return _when(lambda v: isinstance(v, (bool, np.bool_)), bool), "bools"
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        ok = _when(
            lambda v: (
                isinstance(v, (int, np.integer))
                and not isinstance(v, (bool, np.bool_))
                and lo <= int(v) <= hi
            ),
            int,
        )
        return ok, f"{kind.value} integers" + (
            f" ({lo}..{hi})" if kind is not DataType.INT64 else ""
        )
    if kind is DataType.FLOAT:
        return _when(lambda v: _float32(v) is not None, _float32), "finite FLOAT (float32) numbers"
    if kind is DataType.DOUBLE:
        return _when(lambda v: _is_number(v) and math.isfinite(v), float), "finite numbers"
    limit = f.max_length or 0
    return _when(
        lambda v: isinstance(v, str) and _utf8_length(v) <= limit, str
    ), f"strings of at most {limit} bytes of UTF-8"


def _utf8_length(text: str) -> int:
    try:
        return len(text.encode())
    except UnicodeEncodeError:
        return 1 << 62  # a lone surrogate: never fits


def _when(ok: Callable[[Any], bool], convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if not ok(v):
            raise ValueError(v)
        return convert(v)

    return check


def array_values(f: FieldSchema, values: list[Any]) -> list[list[Any]]:
    """Returns the values of ARRAY field `f` as lists of plain Python elements (FLOAT ones
    rounded to float32). Raises SchemaMismatch naming the row: not a list, more than
    max_capacity elements, or an element not of the element type."""
    check, what = _element_check(f)
    cap = f.max_capacity or 0
    out = []
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray) and v.ndim == 1:
            v = v.tolist()
        if not isinstance(v, (list, tuple)):
            raise SchemaMismatch(f"row {i}: ARRAY field {f.name!r} must be a list, got {v!r:.60}")
        if len(v) > cap:
            raise SchemaMismatch(
                f"row {i}: ARRAY field {f.name!r} has {len(v)} elements, max_capacity {cap}"
            )
        try:
            out.append([check(x) for x in v])
        except ValueError as exc:
            raise SchemaMismatch(
                f"row {i}: ARRAY field {f.name!r} holds {what}, got {exc.args[0]!r:.60}"
            ) from None
    return out
