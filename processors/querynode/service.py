"""What the query node offers the proxy: tsafe per pchannel, and reads at a timestamp
(seed 001 s.8). Others depend on this only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from vectorlog.types import Hit


class QueryNodeService(Protocol):
    """Reads at a ts over the collections of the dml topic; each raises CollectionNotFound
    (naming the id) for a collection that did not exist at that ts. A dropped collection
    still answers reads as of before its drop, inside the meta retention window."""

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
    ) -> list[list[Hit]]:
        """Returns, per query vector, up to `limit` hits visible at `ts`, nearest first."""
        ...

    def get(
        self, collection_id: int, keys: list[Any], ts: int, output_fields: list[str]
    ) -> list[dict[str, Any]]:
        """Returns the rows with these primary keys visible at `ts` (each key once)."""
        ...

    def count(self, collection_id: int, ts: int, partitions: list[int] | None = None) -> int:
        """Returns the number of rows visible at `ts`."""
        ...
