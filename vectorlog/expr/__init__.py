"""Milvus 2.4/2.5 boolean filter expressions: `parse(text, schema, params, dynamic_field)`
checks an expression against a collection schema and returns an `Expr` that evaluates to a
row mask over columns (vectorized numpy / Arrow compute). Errors raise InvalidExpression
with the 0-based `position` of the fault."""

from vectorlog.expr.errors import InvalidExpression
from vectorlog.expr.expr import Expr, parse

__all__ = ["Expr", "InvalidExpression", "parse"]
