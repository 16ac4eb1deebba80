"""DataCoord (seed 003, 004), in-process: owns segment allocation behind `DataCoordService`.

Today it holds only the allocator of growing segments (in memory, ids from rootcoord); the
segment state machine, expiry and flush arrive with the flush work, behind the same interface.
"""

from __future__ import annotations

from vectorlog.processors.datacoord.segments import MAX_SEGMENT_BYTES, SegmentAllocator
from vectorlog.processors.rootcoord.service import RootCoordService


class DataCoord:
    """Assigns rows to growing segments; segment ids come from rootcoord's id allocator."""

    def __init__(self, rootcoord: RootCoordService, max_segment_bytes: int = MAX_SEGMENT_BYTES):
        self._allocator = SegmentAllocator(rootcoord.allocate_ids, max_segment_bytes)

    def assign_segments(
        self, collection_id: int, partition_id: int, vchannel: str, rows: int, row_bytes: int
    ) -> list[tuple[int, int]]:
        """Returns [(segment id, rows)] covering `rows` rows (see DataCoordService)."""
        return self._allocator.assign(collection_id, partition_id, vchannel, rows, row_bytes)
