"""How error messages name a node: `INT64 field 'age'`, `JSON meta["k"]`, `the string "x"`."""

from __future__ import annotations

import json

from vectorlog.expr import nodes as n

META = "$meta"


def render_path(path: n.Path) -> str:
    """The path as written: meta["a"][0]; a dynamic key shows as its bare name."""
    keys = path.keys
    head = path.field
    if head == META and keys and isinstance(keys[0], str):
        head, keys = keys[0], keys[1:]
    return head + "".join(f"[{json.dumps(k) if isinstance(k, str) else k}]" for k in keys)


def describe(node: n.Node) -> str:
    """A short phrase naming `node` for a message."""
    if isinstance(node, n.Field):
        return f"{node.dtype.value} field {node.name!r}"
    if isinstance(node, n.Path):
        if node.field == META:
            return f"dynamic field key {render_path(node)}"
        if node.is_json:
            return f"JSON {render_path(node)}" if node.keys else f"JSON field {node.field!r}"
        return f"{node.ty.value} array element {render_path(node)}"
    if isinstance(node, n.Literal):
        return _describe_literal(node.value)
    if isinstance(node, n.ListLit):
        return "a list"
    if isinstance(node, n.Arith | n.Neg):
        return "an arithmetic expression"
    if isinstance(node, n.Length):
        return "array_length(...)"
    return "a boolean condition"


def _describe_literal(value: n.Scalar) -> str:
    if isinstance(value, bool):
        return f"the bool {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the float {value!r}"
    return f"the string {json.dumps(value, ensure_ascii=False)}"
