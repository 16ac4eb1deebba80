"""What the query node offers the proxy: tsafe per pchannel, and reads at a timestamp
(seed 001 s.8). Others depend on this only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vectorlog.core.results import SearchResult

if TYPE_CHECKING:
    from vectorlog.expr import Expr

#: scalar types a search can group by (Milvus 2.4: integers, bools and strings)
GROUPABLE = frozenset({"BOOL", "INT8", "INT16", "INT32", "INT64", "VARCHAR"})


class QueryNodeService(Protocol):
    """Reads at a ts over the collections of the dml topic; each raises CollectionNotFound
    (naming the id) for a collection that did not exist at that ts. A dropped collection
    still answers reads as of before its drop, inside the meta retention window."""

    #: whether `search_common` may answer (False: it always returns None, so a caller asks
    #: nothing of it, not even tsafe, and calls `search`)
    one_call: bool

    def tsafe(self, pchannels: Sequence[int]) -> int:
        """Returns the ts up to which every given pchannel has been applied."""
        ...

    def wait_tsafe(self, pchannels: Sequence[int], ts: int, timeout: float) -> None:
        """Returns once every pchannel's tsafe >= ts. Raises ConsistencyTimeout."""
        ...

    def search(
        self,
        collection_id: int,
        queries: np.ndarray,
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
        """Returns, per query vector, up to `limit` hits visible at `ts` and matching `expr`
        (as arrays: ids, distances, per-query offsets, output field columns),
        nearest first, after skipping the first `offset`; with `group_by` (a scalar field),
        the best `group_size` hits of each of up to `limit` distinct values of it (`offset`
        groups skipped). `params`: the index's search parameters (ef, nprobe), and a range
        search's `radius` / `range_filter` (every row in range, exact); an exact search
        needs none. `metric`: the metric of
        the collection's vector index (L2, IP, COSINE; None: the vector field's, else L2).
        Every read hides rows inserted at or before `expire_ts` (the collection's TTL; 0:
        none expired). `anns_field`: the vector field searched (None: the first)."""
        ...

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
        """Returns what `search` returns for a search of dense field `anns_field` with no
        filter, partitions, output fields, offset, grouping, range or expiry, where this node
        answers it in one call (the collection held here, nothing it applied hidden at `ts`);
        None where it does not (the caller then calls `search`)."""
        ...

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
        """Returns the rows visible at `ts` matching `expr` (and with one of `keys`), in
        primary-key order, from the `offset`-th, at most `limit`, each with `output_fields`."""
        ...

    def get(
        self,
        collection_id: int,
        keys: list[Any],
        ts: int,
        output_fields: list[str],
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the rows with these primary keys visible at `ts` (each key once)."""
        ...

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
        """Returns the number of rows visible at `ts` matching `expr` (and `keys`)."""
        ...
