"""The classes and enums an RPC payload may carry as a `Value` (values.py), by name: the
model's dataclasses, a checked filter expression and its tree, the compaction policy, an
index's build progress."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from vectorlog.core.functions import FunctionSchema
from vectorlog.core.model import (
    CollectionHistory,
    CollectionInfo,
    CollectionSchema,
    DataType,
    FieldSchema,
)
from vectorlog.core.results import SearchResult
from vectorlog.core.types import IndexSpec
from vectorlog.expr import Expr, nodes
from vectorlog.processors.datacoord.service import CompactionPolicy
from vectorlog.processors.indexnode.service import IndexProgress


def _expr_nodes() -> list[type]:
    return [
        c
        for c in vars(nodes).values()
        if isinstance(c, type) and issubclass(c, nodes.Node) and dataclasses.is_dataclass(c)
    ]


_CLASSES: list[type] = [
    CollectionHistory,
    CollectionInfo,
    CollectionSchema,
    FieldSchema,
    FunctionSchema,
    IndexSpec,
    CompactionPolicy,
    IndexProgress,
    SearchResult,
    Expr,
    *_expr_nodes(),
]
#: class name -> class, for every object type a Value may hold
OBJECTS: dict[str, type] = {c.__name__: c for c in _CLASSES}
#: enum name -> enum, for every enum a Value may hold
ENUMS: dict[str, type[enum.Enum]] = {e.__name__: e for e in (DataType, nodes.Ty)}
assert len(OBJECTS) == len(_CLASSES), "two registered classes share a name"


def object_fields(value: Any) -> dict[str, Any]:
    """Returns the keyword arguments that rebuild `value` (a registered object)."""
    if isinstance(value, Expr):
        return {"text": value.text, "tree": value.tree}
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
