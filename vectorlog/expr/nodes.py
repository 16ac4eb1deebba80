"""The expression tree: frozen dataclasses, each with `pos`, its 0-based offset in the text.

The parser builds syntax nodes (Name, Index, Template, Call and the operator nodes); the type
checker replaces names by Field/Path, templates by literals, calls by Contains/Length, and
fills in `ty` on value nodes. The evaluator only sees checked trees.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Union

from vectorlog.core.model import DataType

Scalar = Union[bool, int, float, str]  # noqa: UP007 (a runtime alias)
Key = Union[str, int]  # noqa: UP007


class Ty(enum.Enum):
    """Static types of value nodes. JSON is dynamic: checked per row at evaluation."""

    INT = "integer"
    FLOAT = "float"
    BOOL = "bool"
    STR = "string"
    JSON = "JSON"
    ARRAY = "array"
    LIST = "list"


NUMERIC = frozenset({Ty.INT, Ty.FLOAT})


@dataclass(frozen=True)
class Node:
    pos: int


# -- syntax only (replaced by the type checker) ----------------------------------------------
@dataclass(frozen=True)
class Name(Node):
    name: str


@dataclass(frozen=True)
class Index(Node):
    base: Node
    key: Key


@dataclass(frozen=True)
class Template(Node):
    name: str


@dataclass(frozen=True)
class Call(Node):
    func: str
    args: tuple[Node, ...]


# -- values -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Literal(Node):
    value: Scalar

    @property
    def ty(self) -> Ty:
        if isinstance(self.value, bool):
            return Ty.BOOL
        if isinstance(self.value, int):
            return Ty.INT
        return Ty.FLOAT if isinstance(self.value, float) else Ty.STR


@dataclass(frozen=True)
class ListLit(Node):
    items: tuple[Node, ...]
    ty: Ty = Ty.LIST


@dataclass(frozen=True)
class Field(Node):
    """A whole schema field (not JSON: a JSON field is a Path with no keys)."""

    name: str
    dtype: DataType
    ty: Ty


@dataclass(frozen=True)
class Path(Node):
    """A JSON field, a key path into one, a dynamic key (field "$meta") or an ARRAY element.
    `ty` is JSON (checked per row) or the ARRAY's element type."""

    field: str
    keys: tuple[Key, ...]
    ty: Ty
    is_json: bool = True


@dataclass(frozen=True)
class Arith(Node):
    op: str  # + - * / % **
    left: Node
    right: Node
    ty: Ty = Ty.FLOAT


@dataclass(frozen=True)
class Neg(Node):
    operand: Node
    ty: Ty = Ty.FLOAT


@dataclass(frozen=True)
class Length(Node):
    """array_length(container): the number of elements; not an array -> no value."""

    container: Node
    ty: Ty = Ty.INT


# -- predicates (type BOOL) ---------------------------------------------------------------
@dataclass(frozen=True)
class Compare(Node):
    op: str  # == != < <= > >=
    left: Node
    right: Node


@dataclass(frozen=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True)
class Logic(Node):
    op: str  # and | or
    items: tuple[Node, ...]


@dataclass(frozen=True)
class In(Node):
    value: Node
    items: Node  # a ListLit once checked
    negated: bool = False


@dataclass(frozen=True)
class Like(Node):
    value: Node
    pattern: Node  # a str Literal once checked


@dataclass(frozen=True)
class IsNull(Node):
    value: Node
    negated: bool = False


@dataclass(frozen=True)
class Exists(Node):
    operand: Node  # a JSON Path once checked


@dataclass(frozen=True)
class Contains(Node):
    """json_contains / array_contains (mode "one"), *_all ("all"), *_any ("any")."""

    mode: str
    container: Node
    values: Node  # a Literal or ListLit ("one"), a ListLit ("all", "any")


@dataclass(frozen=True)
class TextMatch(Node):
    """text_match(field, "text"): the rows of a VARCHAR field with enable_match whose tokens
    (by the analyzer of `schema`, the field's FieldSchema) hold one of `tokens`."""

    target: Node  # the Field
    tokens: frozenset[str]
    schema: Any  # the FieldSchema: plain data, so a checked filter crosses RPC


PREDICATES = (Compare, Not, Logic, In, Like, IsNull, Exists, Contains, TextMatch)
