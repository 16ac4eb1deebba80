"""`QueryNodeClient`: QueryNodeService over the network (QueryNode v3: GetTSafe, WaitTSafe,
Search, Query, Get, Count)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.results import SearchResult
from vectorlog.rpc.channel import ServiceClient
from vectorlog.rpc.methods import QUERYNODE

if TYPE_CHECKING:
    from vectorlog.expr import Expr


class QueryNodeClient(ServiceClient):
    """QueryNodeService of the query node serving at `address` (an RpcServer)."""

    SERVICE = QUERYNODE
    one_call = False  # no search_common over the network: `search`

    def tsafe(self, pchannels: Sequence[int]) -> int:
        return int(self._rpc.call("GetTSafe", pchannels=list(pchannels)))

    def wait_tsafe(self, pchannels: Sequence[int], ts: int, timeout: float) -> None:
        """Returns once every pchannel's tsafe >= ts. Raises ConsistencyTimeout (the server
        waited `timeout`), or ServiceUnavailable if no answer came within the deadline."""
        self._rpc.call("WaitTSafe", pchannels=list(pchannels), ts=ts, timeout=timeout)

    def search(
        self,
        collection_id: int,
        queries: Any,  # float32 rows; a sparse field's: a list of rows (bytes)
        limit: int,
        ts: int,
        partitions: list[int] | None,
        output_fields: list[str],
        *,
        expr: Expr | None = None,
        offset: int = 0,
        group_by: str | None = None,
        params: dict[str, Any] | None = None,
        metric: str | None = None,
        group_size: int = 1,
        expire_ts: int = 0,
        anns_field: str | None = None,
    ) -> SearchResult:
        """Returns the node's SearchResult (ids, distances and offsets cross as packed
        arrays)."""
        result: SearchResult = self._rpc.call(
            "Search",
            collection_id=collection_id,
            queries=queries if isinstance(queries, list) else np.asarray(queries),
            limit=limit,
            ts=ts,
            partitions=partitions,
            output_fields=list(output_fields),
            expr=expr,
            offset=offset,
            group_by=group_by,
            params=params,
            metric=metric,
            group_size=group_size,
            expire_ts=expire_ts,
            anns_field=anns_field,
        )
        return result

    def search_common(
        self,
        collection_id: int,
        queries: np.ndarray,
        limit: int,
        ts: int,
        params: dict[str, Any] | None,
        metric: str,
        anns_field: str,
    ) -> SearchResult | None:
        """Returns None: a remote node takes `search` (QueryNodeService.search_common)."""
        return None

    def query(
        self,
        collection_id: int,
        ts: int,
        output_fields: list[str],
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        return list(
            self._rpc.call(
                "Query",
                collection_id=collection_id,
                ts=ts,
                output_fields=list(output_fields),
                partitions=partitions,
                expr=expr,
                keys=keys,
                limit=limit,
                offset=offset,
                expire_ts=expire_ts,
            )
        )

    def get(
        self,
        collection_id: int,
        keys: list[Any],
        ts: int,
        output_fields: list[str],
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        return list(
            self._rpc.call(
                "Get",
                collection_id=collection_id,
                keys=keys,
                ts=ts,
                output_fields=list(output_fields),
                expire_ts=expire_ts,
            )
        )

    def count(
        self,
        collection_id: int,
        ts: int,
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        *,
        expire_ts: int = 0,
    ) -> int:
        return int(
            self._rpc.call(
                "Count",
                collection_id=collection_id,
                ts=ts,
                partitions=partitions,
                expr=expr,
                keys=keys,
                expire_ts=expire_ts,
            )
        )
