"""Evaluates a checked expression tree over columns to a boolean mask, vectorized: numpy for
numbers and bools, Arrow compute for strings (comparisons, `in`, `like`). JSON and ARRAY values
are read in one Python pass per key path (jsonview), then compared vectorized; only
json/array_contains and comparisons of two JSON values test rows one by one.

Semantics as Milvus's: a JSON value that is missing or of another type compares false, while
`!=` on a JSON key and every `not in` are the negations of `==` / `in` (a missing key is "not
equal"); an ARRAY element past the end compares false, `!=` included. A comparison or `like`
of a null in a nullable field is unknown: no row matches it nor its `not` (SQL's three-valued
logic through `and`/`or`, as Milvus's segcore keeps valid bits; `in` and `is null` are never
unknown, as there).
Integer `/` truncates toward zero and `%` takes the dividend's sign (C++ int64, as segcore);
a row dividing by zero has no value. A FLOAT column compares with constants in float32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vectorlog.core.errors import InvalidArgument
from vectorlog.expr import columns as cols
from vectorlog.expr import nodes as n
from vectorlog.expr.indexed import RowIndex
from vectorlog.expr.jsonview import LIST, MISSING_, NULL, JsonView, rows_of_column, typed_key
from vectorlog.expr.kernels import (
    ARITH,
    ARROW_CMP,
    KIND_OF,
    NUMPY_CMP,
    PY_CMP,
    Val,
    arrow_mask,
    both,
    constant,
    contains_one,
    int_divmod,
    is_int,
    json_compare,
    json_path,
    masked,
    numeric_isin,
)

#: the predicates a scalar index may answer
INDEXABLE = (n.Compare, n.In, n.Like, n.Contains)


class Evaluator:
    """One evaluation of one tree over `columns` of `n` rows; caches per-column conversions
    and JSON key paths so a field or path used twice is read once."""

    def __init__(self, columns: Mapping[str, Any], n: int, index: RowIndex | None = None) -> None:
        self.columns, self.n, self.index = columns, n, index
        self._cache: dict[tuple[Any, ...], Any] = {}

    def column(self, name: str) -> Any:
        if name not in self.columns:
            have = ", ".join(sorted(self.columns))
            raise InvalidArgument(f"the filter needs column {name!r}, not among: {have}")
        column = self.columns[name]
        cols.check_length(name, column, self.n)
        return column

    def _cached(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def view(self, field: str, keys: tuple[n.Key, ...]) -> JsonView:
        return self._cached(
            ("view", field, keys),
            lambda: JsonView(rows_of_column(self.column(field)), keys, self.n),
        )

    def container_view(self, node: n.Node) -> JsonView:
        if isinstance(node, n.Path):
            return self.view(node.field, node.keys)
        assert isinstance(node, n.Field)
        return self.view(node.name, ())

    # -- masks ------------------------------------------------------------------------------
    def mask(self, node: n.Node) -> np.ndarray:
        """The rows where the predicate `node` holds (an index answers it where it can)."""
        if self.index is not None and isinstance(node, INDEXABLE):
            found = self.index.lookup(node)
            if found is not None:
                return self._indexed(node, *found)
        return self.mask_of(self._MASK[type(node)](self, node))

    def _indexed(self, node: n.Node, matches: np.ndarray, rest: np.ndarray) -> np.ndarray:
        """The mask of `matches` plus the rows of `rest` (no index covers them) where `node`
        holds, evaluated by scanning them only."""
        out = np.zeros(self.n, dtype=bool)
        out[matches] = True
        if len(rest) and self.index is not None:
            scanned = Evaluator(self.index.take(rest), len(rest)).mask(node)
            out[rest[scanned]] = True
        return out

    def logic(self, node: n.Node) -> Any:
        assert isinstance(node, n.Logic)
        combine = np.logical_and if node.op == "and" else np.logical_or
        return functools.reduce(combine, (self._mask_once(i) for i in node.items))

    def not_(self, node: n.Node) -> Any:
        """`not` of a predicate: the rows where it is false. A row where it is unknown (it
        compares a null) stays out, as in Milvus's three-valued logic."""
        assert isinstance(node, n.Not)
        out = ~self._mask_once(node.operand)
        unknown = self.unknown(node.operand)
        return out if unknown is None else out & ~unknown

    def _mask_once(self, node: n.Node) -> np.ndarray:
        return self._cached(("mask", id(node)), lambda: self.mask(node))

    def unknown(self, node: n.Node) -> np.ndarray | None:
        """Returns the rows where predicate `node` is unknown, neither true nor false (None:
        no row): a comparison or `like` of a null of a nullable field; `and`/`or` of
        unknowns as SQL's (Milvus's segcore keeps the same valid bits). `in` and `is null`
        are never unknown (as Milvus; JSON keys keep their own semantics, see above)."""
        if isinstance(node, n.Not):
            return self.unknown(node.operand)
        if isinstance(node, n.Logic):
            return self._logic_unknown(node)
        if isinstance(node, n.Compare | n.Like):
            nulls = [cols.nulls(self.column(f)) for f in _nullable_operands(node)]
            operands = (getattr(node, a, None) for a in ("left", "right"))
            nested = (self.unknown(o) for o in operands if isinstance(o, n.PREDICATES))
            nulls += [u for u in nested if u is not None]
            found = functools.reduce(np.logical_or, nulls) if nulls else None
            return found if found is not None and found.any() else None
        return None

    def _logic_unknown(self, node: n.Logic) -> np.ndarray | None:
        """The rows where an `and`/`or` is unknown: not decided by a false (and) or true (or)
        item, with an unknown item."""
        unknowns = [self.unknown(i) for i in node.items]
        if all(u is None for u in unknowns):
            return None
        masks = [self._mask_once(i) for i in node.items]
        unknown = functools.reduce(np.logical_or, [u for u in unknowns if u is not None])
        if node.op == "or":
            return unknown & ~functools.reduce(np.logical_or, masks)
        falses = [~m if u is None else ~m & ~u for m, u in zip(masks, unknowns, strict=True)]
        return unknown & ~functools.reduce(np.logical_or, falses)

    def compare(self, node: n.Node) -> Any:
        assert isinstance(node, n.Compare)
        if node.op == "!=" and (json_path(node.left) or json_path(node.right)):
            return ~self.mask(n.Compare(node.pos, "==", node.left, node.right))
        left, right = self.value(node.left), self.value(node.right)
        if "json" not in (left.kind, right.kind):
            return self.apply(node.op, left, right)
        if left.kind == right.kind == "json":
            return self._json_pairs(node.op, left.data, right.data)
        if left.kind == "json":
            return self._json_versus(node.op, left.data, right)
        flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(node.op, node.op)
        return self._json_versus(flipped, right.data, left)

    def _json_versus(self, op: str, view: JsonView, other: Val) -> Any:
        if other.kind == "list":
            key, equal = typed_key(other.data), op == "=="
            return view.per_row(view.rows_of(LIST), lambda v: (typed_key(v) == key) == equal)
        return self.apply(op, self.coerce(view, other.kind), other)

    def _json_pairs(self, op: str, a: JsonView, b: JsonView) -> np.ndarray:
        rows = np.flatnonzero((a.codes > NULL) & (b.codes > NULL))
        out = np.zeros(self.n, dtype=bool)
        out[rows] = [json_compare(op, a.values[i], b.values[i]) for i in rows]
        return out

    @staticmethod
    def coerce(view: JsonView, kind: str) -> Val:
        """The JSON values of one kind ("num", "str", "bool"), invalid where of another."""
        if kind == "num":
            return Val("num", *view.numbers())
        if kind == "str":
            return Val("str", view.strings())
        return Val("bool", *view.bools())

    @staticmethod
    def apply(op: str, left: Val, right: Val) -> Any:
        """`left op right` for two num, str or bool values (arrays or constants)."""
        a, b = left.data, right.data
        if left.kind == "str":
            if isinstance(a, str) and isinstance(b, str):
                return PY_CMP[op](a, b)
            return arrow_mask(ARROW_CMP[op](a, b))
        return masked(NUMPY_CMP[op](a, b), both(left.valid, right.valid))

    def in_(self, node: n.Node) -> Any:
        assert isinstance(node, n.In)
        value = self.value(node.value)
        values = constant(node.items)
        if value.kind == "json":
            found = self._json_isin(value.data, values)
        else:
            found = self.mask_of(masked(self._isin(value, values), value.valid))
        return ~found if node.negated else found  # `not in` is `not (in)`, as Milvus parses it

    def mask_of(self, result: Any) -> np.ndarray:
        """A result as a mask of n rows (a constant broadcast)."""
        if isinstance(result, np.ndarray) and result.shape == (self.n,):
            return result
        return np.full(self.n, bool(result), dtype=bool)

    def _isin(self, value: Val, values: list[Any]) -> np.ndarray:
        data = value.data
        if not isinstance(data, np.ndarray | pa.Array):
            return self.mask_of(any(typed_key(data) == typed_key(v) for v in values))
        if value.kind == "str":
            return arrow_mask(pc.is_in(data, value_set=pa.array(values, type=pa.string())))
        if value.kind == "bool":
            return np.isin(data, np.asarray(values, dtype=bool))
        return numeric_isin(data, values)

    def _json_isin(self, view: JsonView, values: list[Any]) -> np.ndarray:
        by_kind: dict[int, list[Any]] = {}
        for v in values:
            by_kind.setdefault(typed_key(v)[0], []).append(v)
        out = np.zeros(self.n, dtype=bool)
        if 1 in by_kind:
            numbers, valid = view.numbers()
            out |= numeric_isin(numbers, by_kind[1]) & valid
        if 2 in by_kind:
            out |= self._isin(Val("str", view.strings()), by_kind[2])
        if 0 in by_kind:
            bools, valid = view.bools()
            out |= np.isin(bools, by_kind[0]) & valid
        if 4 in by_kind:
            keys = {typed_key(v) for v in by_kind[4]}
            out |= view.per_row(view.rows_of(LIST), lambda v: typed_key(v) in keys)
        return out

    def like(self, node: n.Node) -> Any:
        assert isinstance(node, n.Like) and isinstance(node.pattern, n.Literal)
        value = self.value(node.value)
        data = value.data.strings() if value.kind == "json" else value.data
        if isinstance(data, str):
            data = pa.array([data])
            return bool(arrow_mask(pc.match_like(data, node.pattern.value))[0])
        return arrow_mask(pc.match_like(data, node.pattern.value))

    def is_null(self, node: n.Node) -> Any:
        assert isinstance(node, n.IsNull)
        target = node.value
        if isinstance(target, n.Path):
            codes = self.view(target.field, target.keys).codes
            found = (codes == MISSING_) | (codes == NULL)
        else:
            assert isinstance(target, n.Field)
            found = cols.nulls(self.column(target.name))
        return ~found if node.negated else found

    def exists(self, node: n.Node) -> Any:
        assert isinstance(node, n.Exists) and isinstance(node.operand, n.Path)
        return self.view(node.operand.field, node.operand.keys).codes != MISSING_

    def contains(self, node: n.Node) -> Any:
        assert isinstance(node, n.Contains)
        view = self.container_view(node.container)
        targets = [constant(node.values)] if node.mode == "one" else constant(node.values)
        pairs = [(t, typed_key(t)) for t in targets]
        if node.mode == "any" and len(pairs) > 4:
            keys = {k for _, k in pairs}
            return view.per_row(
                view.rows_of(LIST), lambda v: not keys.isdisjoint(map(typed_key, v))
            )
        combine = any if node.mode == "any" else all

        def test(items: list[Any]) -> bool:
            return combine(contains_one(items, t, k) for t, k in pairs)

        return view.per_row(view.rows_of(LIST), test)

    def text_match(self, node: n.Node) -> Any:
        """The rows whose text, by the field's analyzer, holds one of the node's tokens."""
        assert isinstance(node, n.TextMatch) and isinstance(node.target, n.Field)
        column = self.column(node.target.name)
        texts = column.to_pylist() if hasattr(column, "to_pylist") else list(column)
        wanted, tokenize = node.tokens, node.schema.tokenizer()
        return np.fromiter(
            (t is not None and not wanted.isdisjoint(tokenize(t)) for t in texts),
            dtype=bool,
            count=len(texts),
        )

    _MASK: dict[type, Callable[[Evaluator, n.Node], Any]] = {
        n.Logic: logic,
        n.Not: not_,
        n.Compare: compare,
        n.In: in_,
        n.Like: like,
        n.IsNull: is_null,
        n.Exists: exists,
        n.Contains: contains,
        n.TextMatch: text_match,
    }

    # -- values -----------------------------------------------------------------------------
    def value(self, node: n.Node) -> Val:
        """The value of a checked value node (a predicate gives a bool mask)."""
        if isinstance(node, n.PREDICATES):  # invalid where unknown (a null compared)
            unknown = self.unknown(node)
            return Val("bool", self._mask_once(node), None if unknown is None else ~unknown)
        if isinstance(node, n.Literal):
            return Val(KIND_OF[node.ty], node.value)
        if isinstance(node, n.ListLit):
            return Val("list", constant(node))
        if isinstance(node, n.Field):
            return self.field(node)
        if isinstance(node, n.Path):
            view = self.view(node.field, node.keys)
            return (
                Val("json", view) if node.ty is n.Ty.JSON else self.coerce(view, KIND_OF[node.ty])
            )
        if isinstance(node, n.Length):
            return Val("num", *self.container_view(node.container).lengths())
        if isinstance(node, n.Neg):
            operand = self.number(node.operand)
            return Val("num", np.negative(operand.data), operand.valid)
        assert isinstance(node, n.Arith), node
        return self.arith(node)

    def field(self, node: n.Field) -> Val:
        if node.ty is n.Ty.ARRAY:
            return Val("json", self.view(node.name, ()))
        kind = KIND_OF[node.ty]
        convert = {"num": cols.numbers, "str": cols.strings, "bool": cols.booleans}[kind]
        data = self._cached((kind, node.name), lambda: convert(self.column(node.name)))
        if kind == "str":  # Arrow's nulls compare to null, which masks read as false
            return Val(kind, data)
        return Val(kind, data, self._cached(("valid", node.name), lambda: self._valid(node.name)))

    def _valid(self, name: str) -> np.ndarray | None:
        """The rows where a nullable field holds a value (None: every row does)."""
        column = self.column(name)
        if not isinstance(column, np.ndarray) or column.dtype != object:
            return None
        null = cols.nulls(column)
        return ~null if null.any() else None

    def number(self, node: n.Node) -> Val:
        value = self.value(node)
        return self.coerce(value.data, "num") if value.kind == "json" else value

    def arith(self, node: n.Arith) -> Val:
        left, right = self.number(node.left), self.number(node.right)
        a, b = left.data, right.data
        valid = both(left.valid, right.valid)
        with np.errstate(all="ignore"):
            if node.op in ARITH:
                out = ARITH[node.op](a, b)
            elif node.op == "**":
                out = np.power(np.asarray(a, dtype=np.float64), b)
            elif is_int(a) and is_int(b):
                out, nonzero = int_divmod(node.op, a, b)
                valid = both(valid, nonzero)
            else:
                out = np.true_divide(a, b) if node.op == "/" else np.fmod(a, b)
        return Val("num", out, valid)


def _nullable_operands(node: n.Node) -> set[str]:
    """Returns the names of the scalar fields (not JSON or ARRAY) a comparison or `like`
    reads, outside nested predicates: where one is null, the predicate is unknown."""
    found: set[str] = set()
    stack = [getattr(node, a) for a in ("left", "right", "value") if hasattr(node, a)]
    while stack:
        item = stack.pop()
        if isinstance(item, n.Field):
            if item.ty not in (n.Ty.JSON, n.Ty.ARRAY):
                found.add(item.name)
        elif isinstance(item, n.Node) and not isinstance(item, n.PREDICATES):
            stack.extend(v for v in vars(item).values() if isinstance(v, n.Node))
    return found
