"""`DataCoordClient`: DataCoordService over the network (AssignSegmentID, Flush,
GetSegmentInfo, GetFlushState, ...)."""

from __future__ import annotations

from typing import Any

from vectorlog.processors.datacoord.service import CompactionPolicy
from vectorlog.rpc.channel import ServiceClient
from vectorlog.rpc.methods import DATACOORD


class DataCoordClient(ServiceClient):
    """DataCoordService of the datacoord serving at `address` (an RpcServer)."""

    SERVICE = DATACOORD

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
        result = self._rpc.call(
            "AssignSegmentID",
            collection_id=collection_id,
            partition_id=partition_id,
            vchannel=vchannel,
            pchannel=pchannel,
            rows=rows,
            row_bytes=row_bytes,
            ts=ts,
        )
        return [(int(segment), int(n)) for segment, n in result]

    def flush(self, collection_id: int) -> list[int]:
        return list(self._rpc.call("Flush", collection_id=collection_id))

    def wait_flushed(self, segment_ids: list[int], timeout: float) -> None:
        """Returns once every segment is Flushed. Raises FlushTimeout (the server waited
        `timeout`), or ServiceUnavailable if no answer came within the deadline on top."""
        self._rpc.call("WaitFlushed", segment_ids=segment_ids, timeout=timeout)

    def flush_state(self, segment_ids: list[int]) -> bool:
        return bool(self._rpc.call("GetFlushState", segment_ids=segment_ids))

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        return list(self._rpc.call("GetSegmentInfo", segment_ids=segment_ids))

    def list_segments(self, collection_id: int) -> list[dict[str, Any]]:
        return list(self._rpc.call("ListSegments", collection_id=collection_id))

    def compaction_groups(
        self,
        collection_id: int,
        horizon: int,
        policy: CompactionPolicy | None = None,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        return list(
            self._rpc.call(
                "GetCompactionGroups",
                collection_id=collection_id,
                horizon=horizon,
                policy=policy,
                expire_ts=expire_ts,
            )
        )
