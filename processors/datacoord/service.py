"""What datacoord offers the proxy: segment assignments for inserted rows, flush, segment
info and compaction plans (seeds 003, 004). Others depend on this only."""

from __future__ import annotations

from typing import Any, Protocol

from vectorlog.processors.datacoord.compaction_policy import CompactionPolicy as CompactionPolicy


class DataCoordService(Protocol):
    """Segment allocation per (collection, partition, vchannel), sealing and flush state."""

    def assign_segments(
        self,
        collection_id: int,
        partition_id: int,
        vchannel: str,
        pchannel: int,
        rows: int,
        row_bytes: int,
        ts: int,
    ) -> list[tuple[int, int]]:
        """Returns [(segment id, rows)] covering `rows` rows of about `row_bytes` bytes each of
        an insert stamped `ts`, filling the channel's Growing segment before opening the next."""
        ...

    def flush(self, collection_id: int) -> list[int]:
        """Seals the collection's Growing segments; returns the ids not Flushed yet."""
        ...

    def wait_flushed(self, segment_ids: list[int], timeout: float) -> None:
        """Returns once every segment is Flushed. Raises FlushTimeout."""
        ...

    def flush_state(self, segment_ids: list[int]) -> bool:
        """Returns whether every segment is Flushed."""
        ...

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        """Returns MilvusClient-shaped info per segment ("NotExist" for unknown ids)."""
        ...

    def list_segments(self, collection_id: int) -> list[dict[str, Any]]:
        """Returns the info of every segment of a collection."""
        ...

    def compaction_groups(
        self,
        collection_id: int,
        horizon: int,
        policy: CompactionPolicy | None = None,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the groups of Flushed segments worth merging (see compaction_policy), each
        with the files a merge reads; a segment with rows inserted at or before `expire_ts`
        (the collection's TTL) is rewritten alone."""
        ...
