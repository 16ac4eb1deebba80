"""The common search of a gRPC SearchRequest (issue 28): a request naming no filter, output
fields, partitions, filter templates, ranker or a part vectorlog does not serve, whose search
params ask for no offset, grouping or iterator, answered by the one-call path
(Client.search_now) with what the general path (DataRpcs.Search) would have passed it. A
request's search params are parsed once per distinct set of pairs (pymilvus sends the same
pairs on every call of a loop): the parse is cached by the pairs as sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vectorlog.core.errors import InvalidArgument, VectorlogError
from vectorlog.server import grpc_convert as conv
from vectorlog.server import grpc_iterator as iterators

#: SearchRequest fields the general path acts on beyond the common search: any of them set,
#: the request is not a common search (the fields the general path ignores may be set)
NOT_COMMON = frozenset(
    {
        "partition_names",
        "dsl",
        "ids",
        "output_fields",
        "expr_template_values",
        "function_score",
        "highlighter",
        "search_aggregation",
        "function_chains",
    }
)
#: distinct search params kept parsed (beyond it the cache starts again)
CACHED_PARAMS = 256


@dataclass(frozen=True)
class CommonShape:
    """What the general path passes the one-call path for a request's search params: the
    hits per query, {"params", "metric_type"} and the vector field (None: the only one)."""

    topk: int
    index_params: dict[str, Any]
    anns_field: str | None


_shapes: dict[tuple[tuple[str, str], ...], CommonShape | None] = {}


def common_shape(request: Any) -> CommonShape | None:
    """Returns the shape of `request` when it is a common search (see the module), else None
    (also when its search params are malformed: the general path then says what is wrong).
    The returned index params are shared by every call with the same pairs: read only."""
    for field, _ in request.ListFields():
        if field.name in NOT_COMMON:
            return None
    key = tuple((p.key, p.value) for p in request.search_params)
    try:
        return _shapes[key]
    except KeyError:
        pass
    shape = _parse(key)
    if len(_shapes) >= CACHED_PARAMS:
        _shapes.clear()
    _shapes[key] = shape
    return shape


def _parse(pairs: tuple[tuple[str, str], ...]) -> CommonShape | None:
    """Returns the shape of search params `pairs` as the general path reads them (topk,
    index params, anns_field; the rest at their defaults), None where they ask for more
    (offset, grouping, iterator v2) or are malformed."""
    params = conv.search_params(conv.kv_pairs(dict(pairs)))
    try:
        offset = int(params.get("offset", 0))
        topk = int(params.get("topk", 10))
        index_params = index_search_params(params)
    except (TypeError, ValueError, OverflowError, VectorlogError):  # the general path raises
        return None
    if (
        offset
        or iterators.wants_v2(params)
        or params.get("group_by_field")
        or params.get("group_size") is not None
    ):
        return None
    return CommonShape(topk, index_params, params.get("anns_field") or None)


def index_search_params(params: dict[str, Any]) -> dict[str, Any]:
    """Returns a SearchRequest's {"params", "metric_type"} (search_params of a search).
    Raises InvalidArgument if its params are not a JSON object."""
    inner = params.get("params") or {}
    if not isinstance(inner, dict):
        raise InvalidArgument(f"search params must be a JSON object, not {inner!r:.60}")
    out: dict[str, Any] = {"params": inner}
    if params.get("metric_type"):
        out["metric_type"] = params["metric_type"]
    return out
