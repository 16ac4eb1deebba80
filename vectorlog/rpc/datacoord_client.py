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

    # -- the cluster mode's jobs, run by the leading datacoord (runners.jobs) ----------------
    def import_files(
        self,
        collection_name: str,
        files: list[Any],
        partition_name: str | None,
        options: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """Starts a bulk insert of `files` (paths relative to datacoord's import root);
        returns the task's state. Raises what the job's checks raise (ImportPathRefused,
        ImportFileError, CollectionNotFound...)."""
        return dict(
            self._rpc.call(
                "Import",
                collection_name=collection_name,
                files=files,
                partition_name=partition_name,
                options=options or {},
            )
        )

    def import_state(self, task_id: int) -> dict[str, Any]:
        """Returns a bulk insert task's state. Raises ImportTaskNotFound."""
        return dict(self._rpc.call("GetImportState", task_id=task_id))

    def list_imports(self, collection_name: str | None = None) -> list[dict[str, Any]]:
        """Returns the bulk insert tasks' states, oldest first (of one collection if named)."""
        return list(self._rpc.call("ListImports", collection_name=collection_name))

    def compact(self, collection_name: str) -> dict[str, Any]:
        """Starts a compaction of a collection; returns its job (CompactionJob.fields).
        Raises CollectionNotFound."""
        return dict(self._rpc.call("ManualCompaction", collection_name=collection_name))

    def compaction_state(self, job_id: int) -> dict[str, Any]:
        """Returns a compaction job (CompactionJob.fields). Raises CompactionNotFound."""
        return dict(self._rpc.call("GetCompactionState", job_id=job_id))

    def list_compactions(self) -> list[dict[str, Any]]:
        """Returns the compaction jobs datacoord remembers, oldest first."""
        return list(self._rpc.call("ListCompactions"))
