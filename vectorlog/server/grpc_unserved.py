"""Parts of a Milvus search request vectorlog does not serve (highlighting, search aggregation,
function chains, search by primary keys): refused with a one-line error naming the part, never
silently ignored (an ignored aggregation is a wrong answer); and a request's function rankers
(`function_score`), which it serves, as the Client takes them."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.proxy.function_rank import FunctionSpec

#: (request field, what it asks for)
_PARTS = (
    ("highlighter", "highlighting"),
    ("search_aggregation", "search aggregation"),
    ("function_chains", "function chains"),
    ("ids", "search by primary keys (ids=)"),
)


def refuse_unserved(request: Any) -> None:
    """Raises InvalidArgument naming the first part of a Search/HybridSearch `request`
    vectorlog does not serve, if the request holds one."""
    fields = request.DESCRIPTOR.fields_by_name
    for name, what in _PARTS:
        if name in fields and _present(request, name):
            raise InvalidArgument(f"vectorlog does not serve {what} in a search")


def _present(request: Any, name: str) -> bool:
    """Returns whether field `name` of `request` is set: a message with content, a
    non-empty repeated field."""
    value = getattr(request, name)
    try:
        return bool(request.HasField(name)) and value.ByteSize() > 0
    except ValueError:  # a repeated field: HasField does not apply
        return len(value) > 0


def function_ranker(request: Any) -> list[FunctionSpec] | None:
    """Returns the function rankers of a Search/HybridSearch `request` (its function_score's
    functions, params as sent), None without any."""
    fields = request.DESCRIPTOR.fields_by_name
    if "function_score" not in fields or not request.HasField("function_score"):
        return None
    functions = request.function_score.functions
    if not len(functions):
        return None
    return [
        FunctionSpec(tuple(f.input_field_names), {kv.key: kv.value for kv in f.params})
        for f in functions
    ]
