"""Constants in expressions: template values to literal nodes, and constant folding with the
integer semantics Milvus's segcore has (C++ int64: `/` truncates toward zero, `%` takes the
sign of the dividend)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.expr import nodes as n

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class NotAConstant(InvalidArgument):
    """A template value that is no bool, number, string or list of them (a VectorlogError
    like every error of the package; the type checker turns it into InvalidExpression)."""


def to_node(value: Any, pos: int) -> n.Node:
    """Returns a template parameter's value as a Literal or ListLit at `pos`. Raises
    NotAConstant naming the unsupported value."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool | int | float | str):
        return n.Literal(pos, value)
    if isinstance(value, list | tuple | np.ndarray):
        return n.ListLit(pos, tuple(to_node(v, pos) for v in value))
    raise NotAConstant(f"{type(value).__name__} value {value!r}")


def in_int64(value: n.Scalar) -> bool:
    """Whether a literal is no integer, or an integer INT64 holds."""
    if isinstance(value, bool) or not isinstance(value, int):
        return True
    return INT64_MIN <= value <= INT64_MAX


def fold(op: str, a: int | float, b: int | float) -> int | float:
    """Returns `a op b` as segcore computes it. Raises ZeroDivisionError or OverflowError."""
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "**":
        return float(a) ** b
    if b == 0:
        raise ZeroDivisionError(f"{op} by zero")
    if op == "/":
        return _trunc_div(int(a), int(b)) if both_int else a / b
    return int(a) - int(b) * _trunc_div(int(a), int(b)) if both_int else math.fmod(a, b)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q
