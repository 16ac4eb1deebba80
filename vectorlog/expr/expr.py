"""`parse` a Milvus filter expression against a schema into an `Expr`: the fields it reads, a
vectorized `evaluate` over columns, and the primary keys when it only selects keys."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from vectorlog.core.model import CollectionSchema
from vectorlog.expr import nodes as n
from vectorlog.expr.errors import InvalidExpression
from vectorlog.expr.evaluate import Evaluator
from vectorlog.expr.indexed import RowIndex
from vectorlog.expr.parser import parse_syntax
from vectorlog.expr.typecheck import check


def _walk(node: n.Node) -> Iterator[n.Node]:
    yield node
    for f in dataclasses.fields(node):
        child = getattr(node, f.name)
        if isinstance(child, n.Node):
            yield from _walk(child)
        elif isinstance(child, tuple):
            for item in child:
                if isinstance(item, n.Node):
                    yield from _walk(item)


def _key_literals(node: n.Node, pk: str) -> list[Any] | None:
    """The keys of `pk == v`, `v == pk`, `pk in [...]` and `or`s of them; None otherwise."""
    if isinstance(node, n.Logic) and node.op == "or":
        parts = [_key_literals(i, pk) for i in node.items]
        return None if any(p is None for p in parts) else [k for p in parts for k in p or ()]
    candidates: list[n.Node] = []
    if isinstance(node, n.Compare) and node.op == "==":
        for field, value in ((node.left, node.right), (node.right, node.left)):
            if isinstance(field, n.Field) and field.name == pk:
                candidates = [field, value]
    elif isinstance(node, n.In) and not node.negated and isinstance(node.items, n.ListLit):
        candidates = [node.value, *node.items.items]
    if not candidates or not (isinstance(candidates[0], n.Field) and candidates[0].name == pk):
        return None
    wanted = str if candidates[0].ty is n.Ty.STR else int
    keys = [c.value for c in candidates[1:] if isinstance(c, n.Literal)]
    if len(keys) != len(candidates) - 1 or any(type(k) is not wanted for k in keys):
        return None
    return keys


def _restricted(node: n.Node, field: str) -> list[Any] | None:
    """The values `field` must hold for `node` to be true: as `_key_literals`, and for an
    `and` the fewest values of the parts that restrict it; None if it is unrestricted."""
    if isinstance(node, n.Logic) and node.op == "and":
        found = [v for v in (_restricted(i, field) for i in node.items) if v is not None]
        return min(found, key=len) if found else None
    if isinstance(node, n.Logic) and node.op == "or":
        parts = [_restricted(i, field) for i in node.items]
        return None if any(p is None for p in parts) else [k for p in parts for k in p or ()]
    return _key_literals(node, field)


class Expr:
    """A checked filter expression, reusable and safe to evaluate from several threads."""

    def __init__(self, text: str, tree: n.Node) -> None:
        self.text, self.tree = text, tree
        nodes = list(_walk(tree))
        self.fields: frozenset[str] = frozenset(
            [x.name for x in nodes if isinstance(x, n.Field)]
            + [x.field for x in nodes if isinstance(x, n.Path)]
        )

    def evaluate(
        self, columns: Mapping[str, Any], n: int, index: RowIndex | None = None
    ) -> np.ndarray:
        """Returns the bool mask (length `n`) of the rows the expression keeps. `columns` maps
        each name in `fields` to its column (see vectorlog.expr.columns); `index`: scalar
        indexes that answer the predicates they can (same answers, no scan). Raises
        InvalidArgument if a column is missing or has another length."""
        return Evaluator(columns, n, index).mask(self.tree)

    def primary_keys(self, pk_name: str) -> list[Any] | None:
        """Returns the keys (deduplicated, in order) if the whole expression is `pk == v`,
        `pk in [...]`, or an `or` of those; None otherwise."""
        keys = _key_literals(self.tree, pk_name)
        return None if keys is None else list(dict.fromkeys(keys))

    def listed_keys(self, pk_name: str) -> list[Any] | None:
        """Returns the keys as listed (a repeated one repeated: Milvus's delete counts each)
        if the whole expression is `pk in [...]` or `pk == v` (what Milvus's delete takes as
        keys without a read); None otherwise, an `or` of those included."""
        return None if isinstance(self.tree, n.Logic) else _key_literals(self.tree, pk_name)

    def key_values(self, field: str) -> list[Any] | None:
        """Returns the values (deduplicated, in order) `field` must hold for a row to match:
        `field == v`, `field in [...]`, `or`s of those and `and`s holding one; None if the
        expression does not restrict it so (a partition key read then reads every partition)."""
        values = _restricted(self.tree, field)
        return None if values is None else list(dict.fromkeys(values))

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


def parse(
    text: str,
    schema: CollectionSchema,
    params: Mapping[str, Any] | None = None,
    dynamic_field: bool = False,
) -> Expr:
    """Returns `text` parsed and checked against `schema`; `params` fill `{name}` templates;
    with `dynamic_field`, names outside the schema are keys of the "$meta" JSON field.
    Raises InvalidExpression (an InvalidArgument) with the position and what is wrong."""
    if not isinstance(text, str):
        raise InvalidExpression(
            repr(text), 0, f"a filter must be a string, not {type(text).__name__}"
        )
    if not text.strip():
        raise InvalidExpression(text, 0, "empty filter expression (an empty filter means all rows)")
    if params is not None and not isinstance(params, Mapping):
        raise InvalidExpression(
            text, 0, f"filter_params must be a dict, not {type(params).__name__}"
        )
    try:
        tree = check(text, parse_syntax(text), schema, params or {}, dynamic_field)
    except RecursionError:
        raise InvalidExpression(text, 0, "the expression is nested too deeply") from None
    return Expr(text, tree)
