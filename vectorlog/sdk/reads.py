"""The Client's reads (MilvusClient's): search (the common search in one call first), hybrid
search, query and get, each at the read ts its consistency level, session and `as_of` give."""

from __future__ import annotations

from typing import Any

from vectorlog.core.results import SearchResult
from vectorlog.core.types import Hit, SearchOptions, read_at
from vectorlog.processors.proxy.service import Grouping
from vectorlog.sdk.calls import Calls


class ReadCalls(Calls):
    """Search, query and get calls of a Client (which sets `_proxy`, `db` and `_session`)."""

    def search(
        self,
        collection_name: str,
        data: Any,
        filter: str = "",  # noqa: A002 (MilvusClient's name)
        limit: int = 10,
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        anns_field: str | None = None,
        *,
        consistency_level: str | None = None,
        as_of: int | None = None,
        filter_params: dict[str, Any] | None = None,
        offset: int = 0,
        group_by_field: str | None = None,
        group_size: int | None = None,
        strict_group_size: bool = False,
        ranker: Any = None,
    ) -> list[list[Hit]]:
        """Returns, per query vector, up to `limit` hits {"id", "distance", "entity"},
        nearest first: rows matching `filter` (a Milvus boolean expression, `{name}`
        placeholders from `filter_params`), after skipping `offset` hits (limit + offset <=
        16384); with `group_by_field`, the best `group_size` (default 1, at most 10) hits of
        each of up to `limit` distinct values of that field, a group's hits together
        (`offset` skips groups). `search_params` = {"metric_type": the index's, "params":
        {...}}; a `radius` (and `range_filter`) among the params makes it a range search,
        every hit in range (Milvus's bounds: L2 range_filter <= d < radius, IP and COSINE
        radius < d <= range_filter), exact whatever the index.
        `entity` holds `output_fields` (none by default, as Milvus). A `ranker` (pymilvus's
        `Function(function_type=FunctionType.RERANK, params={"reranker": "rrf" | "weighted" |
        "decay", ...})`) reranks each query's hits, its score as `distance`, as Milvus does.
        Raises InvalidArgument, InvalidExpression (with the error's position), RerankRefused,
        ConsistencyTimeout."""
        return self.search_result(  # the common search in one call first (search_now)
            collection_name,
            data,
            filter,
            limit,
            output_fields,
            search_params,
            timeout,
            partition_names,
            anns_field,
            consistency_level=consistency_level,
            as_of=as_of,
            filter_params=filter_params,
            offset=offset,
            group_by_field=group_by_field,
            group_size=group_size,
            strict_group_size=strict_group_size,
            ranker=ranker,
        ).hits()

    def search_result(
        self,
        collection_name: str,
        data: Any,
        filter: str = "",  # noqa: A002 (MilvusClient's name)
        limit: int = 10,
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        anns_field: str | None = None,
        *,
        consistency_level: str | None = None,
        as_of: int | None = None,
        filter_params: dict[str, Any] | None = None,
        offset: int = 0,
        group_by_field: str | None = None,
        group_size: int | None = None,
        strict_group_size: bool = False,
        ranker: Any = None,
    ) -> SearchResult:
        """Returns the hits `search` returns (same arguments, same order) as arrays: a
        SearchResult (ids, distances, per-query offsets, output fields as columns; its
        `hits()` are `search`'s). Raises as `search`."""
        found = self.search_now(
            collection_name,
            data,
            filter,
            limit,
            output_fields,
            search_params,
            timeout,
            partition_names,
            anns_field,
            consistency_level=consistency_level,
            as_of=as_of,
            filter_params=filter_params,
            offset=offset,
            group_by_field=group_by_field,
            group_size=group_size,
            ranker=ranker,
        )
        if found is not None:
            return found
        at = read_at(consistency_level, self._session_ts, as_of, timeout)
        options = SearchOptions(
            filter,
            filter_params,
            search_params,
            anns_field,
            offset,
            group_by_field,
            group_size,
            strict_group_size,
        )
        return self._proxy.search_result(
            self._q(collection_name),
            data,
            limit,
            output_fields,
            partition_names,
            at,
            options,
            ranker,
        )

    def search_now(
        self,
        collection_name: str,
        data: Any,
        filter: str = "",  # noqa: A002 (MilvusClient's name)
        limit: int = 10,
        output_fields: list[str] | None = None,
        search_params: dict[str, Any] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        anns_field: str | None = None,
        *,
        consistency_level: str | None = None,
        as_of: int | None = None,
        filter_params: dict[str, Any] | None = None,
        offset: int = 0,
        group_by_field: str | None = None,
        group_size: int | None = None,
        ranker: Any = None,
    ) -> SearchResult | None:
        """Returns what `search_result` with these arguments returns when the one-call path
        answers it at once (the common search, its read's guarantee ts already applied:
        Proxy.search_common), else None, having waited for nothing (`search_result` then
        answers, or raises what is wrong). Raises InvalidName as `search_result` does."""
        if not (
            _plain(filter, output_fields, timeout, partition_names, as_of, filter_params)
            and _plain_shape(offset, group_by_field, group_size, ranker)
        ):
            return None
        return self._proxy.search_common(
            self._q(collection_name), data, limit, search_params, consistency_level, anns_field
        )

    def hybrid_search(
        self,
        collection_name: str,
        reqs: list[Any],
        ranker: Any,
        limit: int = 10,
        output_fields: list[str] | None = None,
        timeout: float | None = None,
        partition_names: list[str] | None = None,
        *,
        offset: int = 0,
        consistency_level: str | None = None,
        as_of: int | None = None,
        group_by_field: str | None = None,
        group_size: int | None = None,
        strict_group_size: bool = False,
        rank_group_scorer: str = "max",
    ) -> list[list[Hit]]:
        """Returns, per query, up to `limit` hits {"id", "distance", "entity"} of the ANN
        searches of `reqs` (`AnnSearchRequest(data, anns_field, param, limit, expr)`, each
        on its own vector field, filter and limit) fused by `ranker`: `RRFRanker(k)` (sum of
        1 / (k + rank)) or `WeightedRanker(w1, ..., norm_score=True)` (weighted sum of the
        scores normalised per metric) or a function ranker (see `search`), best first,
        `offset` skipped; `distance` is the fused score. pymilvus's request and ranker
        classes are accepted too. Every search reads at one ts. With `group_by_field`, each
        request is a grouping search and the fused hits are grouped by the field: up to
        `limit` groups (`offset` skips groups) of up to `group_size` hits, ranked by their
        best hit's score (`rank_group_scorer` "max"; or "sum", "avg"), as Milvus 2.5.
        Raises InvalidArgument (Milvus's messages; no search runs), InvalidExpression,
        RerankRefused, ConsistencyTimeout."""
        at = read_at(consistency_level, self._session_ts, as_of, timeout)
        grouping = None
        if group_by_field is not None:
            size = 1 if group_size is None else group_size
            grouping = Grouping(group_by_field, size, strict_group_size, rank_group_scorer)
        return self._proxy.hybrid_search(
            self._q(collection_name),
            reqs,
            ranker,
            limit,
            output_fields,
            partition_names,
            at,
            offset,
            grouping,
        )

    def query(
        self,
        collection_name: str,
        filter: str = "",  # noqa: A002 (MilvusClient's name)
        output_fields: list[str] | None = None,
        timeout: float | None = None,
        ids: Any = None,
        partition_names: list[str] | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        consistency_level: str | None = None,
        as_of: int | None = None,
        filter_params: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Returns the rows matching `filter` (or with primary keys `ids`, not both), in
        primary-key order, from the `offset`-th, at most `limit` (limit + offset <= 16384).
        Each row has `output_fields` and its primary key (default: every field, the vector
        too, as Milvus); output_fields=["count(*)"] returns [{"count(*)": n}]. As Milvus, an
        empty filter needs a limit (or ids, or count(*)). Raises InvalidArgument,
        InvalidExpression, ConsistencyTimeout."""
        at = read_at(consistency_level, self._session_ts, as_of, timeout)
        return self._proxy.query(
            self._q(collection_name),
            filter,
            output_fields,
            limit,
            offset,
            ids,
            partition_names,
            at,
            filter_params,
        )

    def get(
        self,
        collection_name: str,
        ids: Any,
        output_fields: list[str] | None = None,
        timeout: float | None = None,
        *,
        consistency_level: str | None = None,
        as_of: int | None = None,
    ) -> list[dict[str, Any]]:
        """Returns the entities with these primary keys (all fields unless output_fields)."""
        at = read_at(consistency_level, self._session_ts, as_of, timeout)
        return self._proxy.get(self._q(collection_name), ids, output_fields, at)


def _plain(
    filter: Any,  # noqa: A002 (MilvusClient's name)
    output_fields: Any,
    timeout: Any,
    partition_names: Any,
    as_of: Any,
    filter_params: Any,
) -> bool:
    """Returns whether a search names no filter, output fields, partitions, as_of or filter
    params, and no timeout or a valid one (with `_plain_shape`: the common search, see
    Proxy.search_common, which waits for nothing: a timeout bounds only a wait). A gRPC call
    without a deadline has one far in the future (grpc_rpc.deadline)."""
    return (
        type(filter) is str
        and not filter
        and output_fields is None
        and (timeout is None or (type(timeout) in (int, float) and timeout > 0))
        and partition_names is None
        and as_of is None
        and filter_params is None
    )


def _plain_shape(offset: Any, group_by_field: Any, group_size: Any, ranker: Any) -> bool:
    """Returns whether a search skips no hits and neither groups nor reranks them."""
    return (
        type(offset) is int
        and not offset
        and group_by_field is None
        and group_size is None
        and ranker is None
    )
