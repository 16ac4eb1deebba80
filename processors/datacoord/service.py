"""What datacoord offers the proxy: segment assignments for inserted rows (seed 004).
Others depend on this only."""

from __future__ import annotations

from typing import Protocol


class DataCoordService(Protocol):
    """Segment allocation for growing segments per (collection, partition, vchannel)."""

    def assign_segments(
        self, collection_id: int, partition_id: int, vchannel: str, rows: int, row_bytes: int
    ) -> list[tuple[int, int]]:
        """Returns [(segment id, rows)] covering `rows` rows of about `row_bytes` bytes each,
        filling the growing segment of that channel before opening the next."""
        ...
