"""The HybridSearch RPC (pymilvus's MilvusClient.hybrid_search): each SearchRequest of the
request becomes an AnnSearchRequest, the rank_params ({strategy, params} JSON, limit, offset,
round_decimal) the ranker (or its function_score's function rankers), and the fused hits a
SearchResultData as Search answers."""

from __future__ import annotations

import math
from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.hybrid import AnnSearchRequest
from vectorlog.core.types import Hit
from vectorlog.sdk.client import Client
from vectorlog.server import grpc_convert as conv
from vectorlog.server.grpc_data import index_search_params, search_result
from vectorlog.server.grpc_rpc import deadline, partition_names, read_level, rpc
from vectorlog.server.grpc_status import ok
from vectorlog.server.grpc_unserved import function_ranker


class HybridRpcs:
    """HybridSearch, for MilvusServicer."""

    client: Client

    @rpc
    def HybridSearch(self, request: Any, context: Any) -> Any:
        rank = conv.search_params(request.rank_params)
        limit, offset = int(rank.get("limit", 10)), int(rank.get("offset", 0))
        decimals = _round_decimal(rank.get("round_decimal", -1))
        functions = function_ranker(request)
        hits = self.client.hybrid_search(
            request.collection_name,
            [ann_request(r) for r in request.requests],
            functions or {k: rank[k] for k in ("strategy", "params") if k in rank},
            limit=limit,
            output_fields=list(request.output_fields) or None,
            timeout=deadline(context),
            partition_names=partition_names(request.partition_names),
            offset=offset,
            consistency_level=read_level(request),
            **grouping(rank),
        )
        info = self.client.collection_info(request.collection_name)
        results = search_result(_rounded(hits, decimals), limit, info)
        return milvus_pb2.SearchResults(status=ok(), results=results, collection_name=info.name)


def ann_request(sub: Any) -> AnnSearchRequest:
    """Returns one SearchRequest of a HybridSearchRequest as an AnnSearchRequest. Raises
    InvalidArgument for a bad placeholder or params."""
    params = conv.search_params(sub.search_params)
    return AnnSearchRequest(
        conv.vectors_from_placeholder(sub.placeholder_group),
        str(params.get("anns_field") or ""),
        index_search_params(params),
        int(params.get("topk", 10)),
        sub.dsl or None,
        conv.filter_params(sub.expr_template_values),
    )


def grouping(rank: dict[str, Any]) -> dict[str, Any]:
    """Returns the Client's grouping arguments of a HybridSearchRequest's rank_params
    (pymilvus sends group_by_field, group_size, strict_group_size and rank_group_scorer
    there); {} without group_by_field."""
    field = rank.get("group_by_field")
    if field in (None, ""):
        return {}
    out: dict[str, Any] = {"group_by_field": field}
    for key in ("group_size", "strict_group_size", "rank_group_scorer"):
        if rank.get(key) is not None:
            out[key] = rank[key]
    return out


def _round_decimal(value: Any) -> int:
    """Returns round_decimal if it is -1 or 0..6 (Milvus's message otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value <= 6:
        raise InvalidArgument(
            f"round_decimal [{value}] is invalid, should be -1 or an integer in range [0, 6]"
        )
    return value


def _rounded(hits: list[list[Hit]], decimals: int) -> list[list[Hit]]:
    """Returns hits with their scores rounded half up to `decimals` places (-1: as they are),
    as Milvus rounds them."""
    if decimals < 0:
        return hits
    m = 10.0**decimals
    return [
        [{**h, "distance": math.floor(h["distance"] * m + 0.5) / m} for h in per_query]
        for per_query in hits
    ]
