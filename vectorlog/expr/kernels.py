"""The vectorized pieces the evaluator combines: comparison tables, `in` over numbers with
Milvus's constant conversion, C++ integer division, JSON comparisons within one type."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vectorlog.expr import nodes as n
from vectorlog.expr.constants import INT64_MAX, INT64_MIN
from vectorlog.expr.jsonview import typed_key

NUMPY_CMP = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}
ARROW_CMP = {
    "==": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
PY_CMP = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply}
KIND_OF = {n.Ty.INT: "num", n.Ty.FLOAT: "num", n.Ty.STR: "str", n.Ty.BOOL: "bool"}


@dataclass(frozen=True)
class Val:
    """An evaluated value: kind "num" | "str" | "bool" (numpy, Arrow, or a Python constant),
    "json" (a JsonView) or "list" (a constant list); `valid` None means every row has one."""

    kind: str
    data: Any
    valid: np.ndarray | None = None


def both(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a & b


def masked(result: Any, valid: np.ndarray | None) -> Any:
    return result if valid is None else result & valid


def arrow_mask(result: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return result.fill_null(False).to_numpy(zero_copy_only=False)


def constant(node: n.Node) -> Any:
    """The Python value of a Literal or ListLit."""
    if isinstance(node, n.ListLit):
        return [constant(i) for i in node.items]
    assert isinstance(node, n.Literal), node
    return node.value


def is_int(data: Any) -> bool:
    return bool(np.asarray(data).dtype.kind in "iu")


def numeric_isin(data: np.ndarray, values: list[Any]) -> np.ndarray:
    """`data in values` with the constants converted to the column's type first (as Milvus:
    a FLOAT column matches 0.1 as float32; an integer column never matches 2.5)."""
    return np.isin(data, isin_constants(data.dtype, values))


def isin_constants(dtype: np.dtype, values: list[Any]) -> np.ndarray:
    """The constants of an `in` as a column of `dtype` compares them: converted to a float
    type, or the integer ones (exactly) for an integer column."""
    if dtype.kind == "f":
        return np.asarray(values, dtype=dtype)
    ints = [
        int(v)
        for v in values
        if isinstance(v, int) or (v.is_integer() and INT64_MIN <= v <= INT64_MAX)
    ]
    return np.asarray(ints, dtype=np.int64)


def int_divmod(op: str, a: Any, b: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """C++ int64 `/` (toward zero) or `%` (dividend's sign); rows dividing by zero invalid."""
    nonzero = np.asarray(b) != 0
    divisor = b if nonzero.all() else np.where(nonzero, b, 1)
    remainder = np.fmod(a, divisor)  # C semantics for integers
    out = remainder if op == "%" else (a - remainder) // divisor  # an exact division
    return out, (None if nonzero.all() else nonzero)


def json_path(node: n.Node) -> bool:
    """A JSON key path (not an ARRAY element): its `!=` is true where `==` is not."""
    return isinstance(node, n.Path) and node.is_json


def json_compare(op: str, x: Any, y: Any) -> bool:
    """Two JSON values compared only within one type (numbers, strings; equality otherwise)."""
    kx, ky = typed_key(x)[0], typed_key(y)[0]
    if kx != ky:
        return False
    if kx in (1, 2):
        return bool(PY_CMP[op](x, y))
    return op in ("==", "!=") and (typed_key(x) == typed_key(y)) == (op == "==")


def contains_one(items: list[Any], target: Any, key: Any) -> bool:
    # `in` first (C speed); confirm a hit by type, since Python says True == 1
    return target in items and key in map(typed_key, items)
