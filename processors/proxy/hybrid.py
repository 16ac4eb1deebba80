"""A search's checked arguments (`SearchPlan`, what the proxy hands the query node), and the
checks of a hybrid search's requests with Milvus's messages: at least one and at most 1024
ANN requests, each a search of its own (field, filter, params, limit), all with the same
number of query vectors. Each raises InvalidArgument before any search runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.hybrid import AnnSearchRequest
from vectorlog.core.model import FieldSchema
from vectorlog.core.types import Hit, SearchOptions
from vectorlog.processors.proxy.dynamic import Output
from vectorlog.processors.proxy.hybrid_groups import Grouping
from vectorlog.processors.proxy.rerank import MAX_REQUESTS

if TYPE_CHECKING:
    from vectorlog.expr import Expr


@dataclass(frozen=True)
class SearchPlan:
    """One search, checked: vector `field`, float32 `queries`, hits `limit` after `offset`,
    the output (`out`), the index's `metric` and search `params`, grouping, filter `expr`
    and `partitions` (None: all)."""

    field: FieldSchema
    queries: Any  # float32 rows; a sparse field's: rows in Milvus's format (core/sparse.py)
    limit: int
    offset: int
    out: Output
    metric: str
    params: dict[str, Any]
    group_by: str | None
    group_size: int
    expr: Expr | None
    partitions: list[int] | None

    def with_queries(self, queries: Any) -> SearchPlan:
        """Returns this plan searching `queries` instead (a shallow copy: the checked
        arguments are shared, never changed)."""
        plan = object.__new__(SearchPlan)
        plan.__dict__.update(self.__dict__, queries=queries)
        return plan


def requests(reqs: Any) -> list[AnnSearchRequest]:
    """Returns a hybrid search's requests (ours or pymilvus's AnnSearchRequests). Raises
    InvalidArgument with Milvus's message for none or more than 1024."""
    if not isinstance(reqs, list | tuple):
        raise InvalidArgument(
            f"hybrid_search reqs must be a list of AnnSearchRequests, not {reqs!r:.60}"
        )
    if not reqs:
        raise InvalidArgument("minimum of ann search requests is 1")
    if len(reqs) > MAX_REQUESTS:
        raise InvalidArgument(f"maximum of ann search requests is {MAX_REQUESTS}")
    return [AnnSearchRequest.of(q) for q in reqs]


def options(req: AnnSearchRequest, grouping: Grouping | None = None) -> SearchOptions:
    """Returns the search options of one request: its filter, params and vector field; with
    the hybrid search's `grouping`, a grouping search (as Milvus's proxy gives every
    sub-request the rank params' group_by_field, group_size and strict_group_size)."""
    if grouping is None:
        return SearchOptions(req.expr, req.expr_params, req.param, req.anns_field or None)
    return SearchOptions(
        req.expr,
        req.expr_params,
        req.param,
        req.anns_field or None,
        group_by_field=grouping.field,
        group_size=grouping.size,
        strict_group_size=grouping.strict,
    )


def with_group_field(fields: list[str] | None, grouping: Grouping | None) -> list[str] | None:
    """Returns the output fields each request asks for: `fields` and the group field."""
    if grouping is None or grouping.field in (fields or []):
        return fields
    return [*(fields or []), grouping.field]


def drop_unasked(results: list[list[Hit]], fields: list[str] | None, g: Grouping) -> None:
    """Removes the group field from each hit's entity, in place, unless it was asked for."""
    if g.field in (fields or []):
        return
    for hits in results:
        for hit in hits:
            hit["entity"].pop(g.field, None)


def same_nq(counts: list[int]) -> int:
    """Returns the number of query vectors of the requests if every request has it. Raises
    InvalidArgument otherwise."""
    if len(set(counts)) > 1:
        raise InvalidArgument(
            f"every ann search request of a hybrid search needs the same number of query "
            f"vectors (nq), got {counts}"
        )
    return counts[0]
