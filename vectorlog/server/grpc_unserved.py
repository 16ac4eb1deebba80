"""Parts of a Milvus search request vectorlog does not serve (function rankers, highlighting,
search aggregation, function chains, search by primary keys): refused with a one-line error
naming the part, never silently ignored (an ignored ranker or aggregation is a wrong answer)."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import InvalidArgument

#: (request field, what it asks for)
_PARTS = (
    ("function_score", "a function ranker (ranker=Function(...))"),
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
