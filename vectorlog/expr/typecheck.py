"""Binds a syntax tree to a CollectionSchema: names become fields, JSON paths or dynamic keys,
templates become constants, constant arithmetic is folded, and every operator is checked
against the types the schema gives. Anything that cannot hold raises InvalidExpression."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.expr import nodes as n
from vectorlog.expr.constants import NotAConstant, fold, in_int64, to_node
from vectorlog.expr.describe import META, describe
from vectorlog.expr.errors import InvalidExpression

TYPE_OF = {
    DataType.BOOL: n.Ty.BOOL,
    DataType.INT8: n.Ty.INT,
    DataType.INT16: n.Ty.INT,
    DataType.INT32: n.Ty.INT,
    DataType.INT64: n.Ty.INT,
    DataType.FLOAT: n.Ty.FLOAT,
    DataType.DOUBLE: n.Ty.FLOAT,
    DataType.VARCHAR: n.Ty.STR,
    DataType.JSON: n.Ty.JSON,
    DataType.ARRAY: n.Ty.ARRAY,
}
FUNCTIONS = {
    "json_contains": "one",
    "array_contains": "one",
    "json_contains_all": "all",
    "array_contains_all": "all",
    "json_contains_any": "any",
    "array_contains_any": "any",
    "array_length": "length",
}
_EQUALITY = frozenset({"==", "!="})


def ty(node: n.Node) -> n.Ty:
    """The static type of a checked node (predicates are BOOL)."""
    return n.Ty.BOOL if isinstance(node, n.PREDICATES) else node.ty  # type: ignore[attr-defined]


def is_constant(node: n.Node) -> bool:
    return isinstance(node, n.Literal | n.ListLit)


def compatible(value_ty: n.Ty, item: n.Node) -> bool:
    """Whether the constant `item` can equal a value of type `value_ty`."""
    item_ty = ty(item)
    if value_ty is n.Ty.JSON:
        return True
    if value_ty in n.NUMERIC:
        return item_ty in n.NUMERIC
    return item_ty is value_ty


class Checker:
    """One check of one expression text."""

    def __init__(
        self,
        text: str,
        schema: CollectionSchema,
        params: Mapping[str, Any],
        dynamic_field: bool,
    ) -> None:
        self.text, self.params, self.dynamic = text, params, dynamic_field
        self.fields: dict[str, FieldSchema] = {f.name: f for f in schema.fields}

    def fail(self, node: n.Node, reason: str) -> InvalidExpression:
        return InvalidExpression(self.text, node.pos, reason)

    # -- predicates -------------------------------------------------------------------------
    def predicate(self, node: n.Node) -> n.Node:
        """Returns `node` checked as a boolean condition. Raises InvalidExpression."""
        handler = self._PREDICATE.get(type(node))
        if handler is not None:
            return handler(self, node)
        return self.truth(self.value(node))

    def truth(self, value: n.Node) -> n.Node:
        """A value used as a condition: a bool (or JSON bool) compared with true."""
        if ty(value) is n.Ty.BOOL and isinstance(value, n.PREDICATES):
            return value
        if ty(value) in (n.Ty.BOOL, n.Ty.JSON):
            return n.Compare(value.pos, "==", value, n.Literal(value.pos, True))
        raise self.fail(value, f"{describe(value)} is not a boolean condition")

    def logic(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Logic)
        return replace(node, items=tuple(self.predicate(i) for i in node.items))

    def not_(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Not)
        return replace(node, operand=self.predicate(node.operand))

    def compare(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Compare)
        left, right = self.value(node.left), self.value(node.right)
        problem = self._comparison_problem(node.op, ty(left), ty(right))
        if problem:
            culprit = left if is_constant(left) and not is_constant(right) else right
            raise self.fail(culprit, problem.format(l=describe(left), r=describe(right)))
        return replace(node, left=left, right=right)

    @staticmethod
    def _comparison_problem(op: str, lt: n.Ty, rt: n.Ty) -> str | None:
        """None if `lt op rt` is allowed, else a message template with {l} and {r}."""
        mismatch = "type mismatch: cannot compare {l} with {r}"
        if n.Ty.JSON in (lt, rt):
            other = rt if lt is n.Ty.JSON else lt
            if other is n.Ty.ARRAY or (other in (n.Ty.LIST, n.Ty.BOOL) and op not in _EQUALITY):
                return f"type mismatch: cannot apply {op} to {{l}} and {{r}}"
            return None
        if (lt in n.NUMERIC and rt in n.NUMERIC) or lt is rt is n.Ty.STR:
            return None
        if lt is rt is n.Ty.BOOL or {lt, rt} == {n.Ty.ARRAY, n.Ty.LIST}:
            return None if op in _EQUALITY else f"{op} does not apply to {{l}} and {{r}}"
        return mismatch

    def in_(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.In)
        value, items = self.value(node.value), self.value(node.items)
        if not isinstance(items, n.ListLit):
            raise self.fail(
                items, f"in needs a list of constants such as [1, 2], not {describe(items)}"
            )
        if ty(value) in (n.Ty.ARRAY, n.Ty.LIST):
            raise self.fail(value, f"in does not apply to {describe(value)}")
        for item in items.items:
            if not compatible(ty(value), item):
                raise self.fail(
                    item, f"type mismatch: {describe(value)} cannot equal {describe(item)}"
                )
        return replace(node, value=value, items=items)

    def like(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Like)
        value, pattern = self.value(node.value), self.value(node.pattern)
        if ty(value) not in (n.Ty.STR, n.Ty.JSON):
            raise self.fail(value, f"like applies to strings, not to {describe(value)}")
        if not (isinstance(pattern, n.Literal) and isinstance(pattern.value, str)):
            raise self.fail(pattern, f"like needs a string pattern, not {describe(pattern)}")
        return replace(node, value=value, pattern=pattern)

    def is_null(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.IsNull)
        value = self.value(node.value)
        if not isinstance(value, n.Field | n.Path):
            raise self.fail(value, f"is null applies to a field or JSON key, not {describe(value)}")
        return replace(node, value=value)

    def exists(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Exists)
        path = self.value(node.operand)
        if not (isinstance(path, n.Path) and path.is_json and path.keys):
            raise self.fail(
                path, f'exists needs a JSON key such as meta["k"], not {describe(path)}'
            )
        return replace(node, operand=path)

    _PREDICATE: dict[type, Callable[[Checker, n.Node], n.Node]] = {
        n.Logic: logic,
        n.Not: not_,
        n.Compare: compare,
        n.In: in_,
        n.Like: like,
        n.IsNull: is_null,
        n.Exists: exists,
    }

    # -- functions --------------------------------------------------------------------------
    def call(self, node: n.Call) -> n.Node:
        """json_contains*, array_contains*, array_length. Raises InvalidExpression."""
        if node.func.lower() == "text_match":
            return self._text_match(node)
        mode = FUNCTIONS.get(node.func.lower())
        if mode is None:
            known = ", ".join(sorted(FUNCTIONS))
            raise self.fail(node, f"unknown function {node.func!r} (known: {known})")
        arity = 1 if mode == "length" else 2
        if len(node.args) != arity:
            raise self.fail(node, f"{node.func} takes {arity} argument(s), got {len(node.args)}")
        container = self.value(node.args[0])
        if not (
            (isinstance(container, n.Path) and container.is_json) or ty(container) is n.Ty.ARRAY
        ):
            raise self.fail(
                container, f"{node.func} needs an ARRAY or JSON value, not {describe(container)}"
            )
        if mode == "length":
            return n.Length(node.pos, container)
        return n.Contains(node.pos, mode, container, self._contained(node, mode, container))

    def _text_match(self, node: n.Call) -> n.Node:
        """text_match(field, "text") of a VARCHAR field with enable_match: the text's tokens
        by the field's analyzer. Raises InvalidExpression (Milvus's messages)."""
        if len(node.args) != 2:
            raise self.fail(node, f"text_match takes 2 arguments, got {len(node.args)}")
        target, text = self.value(node.args[0]), self.value(node.args[1])
        if not isinstance(target, n.Field) or target.dtype is not DataType.VARCHAR:
            raise self.fail(target, f"text_match needs a VARCHAR field, not {describe(target)}")
        field = self.fields[target.name]
        if not field.enable_match:
            raise self.fail(target, f'field "{field.name}" does not enable match')
        if not isinstance(text, n.Literal) or not isinstance(text.value, str):
            raise self.fail(text, f"text_match needs a string, not {describe(text)}")
        tokens = frozenset(field.tokenizer()(text.value))
        return n.TextMatch(node.pos, target, tokens, field)

    def _contained(self, node: n.Call, mode: str, container: n.Node) -> n.Node:
        values = self.value(node.args[1])
        if mode != "one" and not isinstance(values, n.ListLit):
            raise self.fail(
                values, f"{node.func} needs a list of constants, not {describe(values)}"
            )
        if not is_constant(values):
            raise self.fail(values, f"{node.func} needs constants, not {describe(values)}")
        element = self._element_type(container)
        items = values.items if mode != "one" else (values,)  # type: ignore[attr-defined]
        for item in items:
            if not compatible(element, item):
                raise self.fail(
                    item, f"type mismatch: {describe(container)} cannot hold {describe(item)}"
                )
        return values

    def _element_type(self, container: n.Node) -> n.Ty:
        if isinstance(container, n.Field):
            return self._array_element(self.fields[container.name])
        return n.Ty.JSON

    @staticmethod
    def _array_element(field: FieldSchema) -> n.Ty:
        """An ARRAY's element type, JSON (checked per row) while the schema does not say."""
        element = getattr(field, "element_type", None)
        return TYPE_OF.get(element, n.Ty.JSON) if isinstance(element, DataType) else n.Ty.JSON

    # -- values -----------------------------------------------------------------------------
    def value(self, node: n.Node) -> n.Node:
        """Returns `node` checked as a value (predicates give BOOL values)."""
        if isinstance(node, n.PREDICATES):
            return self.predicate(node)
        if isinstance(node, n.Call):
            return self.call(node)  # a Contains (a BOOL value) or a Length
        handler = self._VALUE.get(type(node))
        assert handler is not None, node
        return handler(self, node)

    def literal(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Literal)
        if not in_int64(node.value):
            raise self.fail(node, f"integer {node.value} is out of the INT64 range")
        return node

    def list_(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.ListLit)
        items = tuple(self.value(i) for i in node.items)
        for item in items:
            if not is_constant(item):
                raise self.fail(item, f"a list holds constants, not {describe(item)}")
        return replace(node, items=items)

    def template(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Template)
        if node.name not in self.params:
            have = ", ".join(sorted(map(str, self.params))) or "none"
            raise self.fail(
                node, f"missing template parameter {{{node.name}}} (filter_params has: {have})"
            )
        try:
            return self.value(to_node(self.params[node.name], node.pos))
        except NotAConstant as exc:
            raise self.fail(node, f"template parameter {{{node.name}}} is a {exc}") from None

    def name(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Name)
        field = self.fields.get(node.name)
        if field is None:
            return self._dynamic(node)
        if field.dtype is DataType.JSON:
            return n.Path(node.pos, field.name, (), n.Ty.JSON)
        if field.dtype not in TYPE_OF:
            raise self.fail(node, f"{field.dtype.value} field {field.name!r} cannot be filtered")
        return n.Field(node.pos, field.name, field.dtype, TYPE_OF[field.dtype])

    def _dynamic(self, node: n.Name) -> n.Node:
        if self.dynamic:
            keys: tuple[n.Key, ...] = () if node.name == META else (node.name,)
            return n.Path(node.pos, META, keys, n.Ty.JSON)
        names = ", ".join(f.name for f in self.fields.values())
        raise self.fail(
            node,
            f"unknown field {node.name!r} (fields: {names}; other names need the dynamic field)",
        )

    def index(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Index)
        base = self.value(node.base)
        if isinstance(base, n.Path) and base.is_json:
            return replace(base, keys=(*base.keys, node.key))
        if isinstance(base, n.Field) and base.ty is n.Ty.ARRAY:
            if not isinstance(node.key, int):
                raise self.fail(node, f"{describe(base)} is indexed by integers, not {node.key!r}")
            element = self._array_element(self.fields[base.name])
            return n.Path(base.pos, base.name, (node.key,), element, is_json=False)
        raise self.fail(base, f"{describe(base)} cannot be indexed (only JSON and ARRAY can)")

    def arith(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Arith)
        left, right = self._number(node.left), self._number(node.right)
        if isinstance(left, n.Literal) and isinstance(right, n.Literal):
            return self._fold(node, left, right)
        if node.op in "/%" and isinstance(right, n.Literal) and right.value == 0:
            raise self.fail(right, f"{node.op} by zero")
        both_int = ty(left) is n.Ty.INT and ty(right) is n.Ty.INT and node.op != "**"
        return replace(node, left=left, right=right, ty=n.Ty.INT if both_int else n.Ty.FLOAT)

    def _fold(self, node: n.Arith, left: n.Literal, right: n.Literal) -> n.Node:
        try:
            value = fold(node.op, left.value, right.value)  # type: ignore[arg-type]
        except (ZeroDivisionError, OverflowError) as exc:
            raise self.fail(
                node, f"cannot compute {left.value} {node.op} {right.value}: {exc}"
            ) from None
        return self.literal(n.Literal(left.pos, value))

    def neg(self, node: n.Node) -> n.Node:
        assert isinstance(node, n.Neg)
        inner = node.operand
        if isinstance(inner, n.Literal) and not isinstance(inner.value, bool | str):
            return self.literal(n.Literal(node.pos, -inner.value))
        operand = self._number(inner)
        if isinstance(operand, n.Literal):
            return self.literal(n.Literal(node.pos, -operand.value))  # type: ignore[operator]
        return replace(
            node, operand=operand, ty=ty(operand) if ty(operand) in n.NUMERIC else n.Ty.FLOAT
        )

    def _number(self, node: n.Node) -> n.Node:
        value = self.value(node)
        if ty(value) not in (n.Ty.INT, n.Ty.FLOAT, n.Ty.JSON):
            raise self.fail(value, f"arithmetic needs numbers, not {describe(value)}")
        return value

    _VALUE: dict[type, Callable[[Checker, n.Node], n.Node]] = {
        n.Literal: literal,
        n.ListLit: list_,
        n.Template: template,
        n.Name: name,
        n.Index: index,
        n.Arith: arith,
        n.Neg: neg,
    }


def check(
    text: str,
    syntax: n.Node,
    schema: CollectionSchema,
    params: Mapping[str, Any],
    dynamic_field: bool,
) -> n.Node:
    """Returns the checked tree of `syntax` (a boolean condition). Raises InvalidExpression."""
    return Checker(text, schema, params, dynamic_field).predicate(syntax)
