"""A proxy process's bulk insert and compaction (cluster mode): the jobs run in the leading
datacoord's process (runners.jobs) and this process asks for them over datacoord's RPC. The
same calls as `vectorlog serve`'s BulkInserter and Compactor, so the Client, gRPC and REST
serve them unchanged; any proxy answers any job's state."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vectorlog.core.errors import VectorlogError
from vectorlog.jobs.bulkinsert import COMPLETED, FAILED
from vectorlog.jobs.compaction import EXECUTING, CompactionJob
from vectorlog.rpc.datacoord_client import DataCoordClient

#: seconds between two looks at a job's state, for a caller that waits for its end
POLL_S = 0.1


class ImportJobFailed(VectorlogError):
    """A bulk insert waited for ended Failed (datacoord deleted what it wrote)."""

    def __init__(self, task_id: int, reason: str) -> None:
        super().__init__(f"bulk insert {task_id} failed: {reason}")
        self.task_id, self.reason = task_id, reason


class RemoteImport:
    """A bulk insert task's state as datacoord reported it (ImportJob.as_dict)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state_dict = state

    @property
    def task_id(self) -> int:
        return int(self.state_dict["task_id"])

    @property
    def state(self) -> str:
        return str(self.state_dict["state"])

    @property
    def timestamp(self) -> int:
        return int(self.state_dict["timestamp"])

    def as_dict(self) -> dict[str, Any]:
        return dict(self.state_dict)


class RemoteBulkInserter:
    """BulkInserter's calls, over datacoord's RPC. Paths go as relative to this process's
    import root `root` (datacoord resolves them under its own: the same shared folder may be
    mounted elsewhere there)."""

    def __init__(self, datacoord: DataCoordClient, root: Path | None) -> None:
        self.dc = datacoord
        self.root = None if root is None else os.path.realpath(root)

    def submit(
        self,
        collection_name: str,
        files: Sequence[Any],
        partition_name: str | None = None,
        progress: Callable[[int, int], None] | None = None,
        options: dict[str, Any] | None = None,
        wait: bool = True,
    ) -> RemoteImport:
        """Starts the job (see BulkInserter.submit); with `wait`, returns once it Completed
        (`progress` is not called: the job runs elsewhere). Raises what datacoord's checks
        raise; with `wait`, ImportJobFailed."""
        sent: Any = files
        if isinstance(files, (list, tuple)):  # else refused by datacoord's checks
            sent = [self._relative(e) for e in files]
        job = RemoteImport(self.dc.import_files(collection_name, sent, partition_name, options))
        while wait and job.state not in (COMPLETED, FAILED):
            time.sleep(POLL_S)
            job = self.state(job.task_id)
        if wait and job.state == FAILED:
            raise ImportJobFailed(job.task_id, str(job.state_dict["failed_reason"]))
        return job

    def _relative(self, entry: Any) -> Any:
        if isinstance(entry, (list, tuple)):
            return [self._relative(p) for p in entry]
        if self.root is None or not isinstance(entry, str) or not os.path.isabs(entry):
            return entry
        real = os.path.realpath(entry)
        inside = real.startswith(self.root.rstrip(os.sep) + os.sep)
        return os.path.relpath(real, self.root) if inside else entry

    def state(self, task_id: int) -> RemoteImport:
        """Returns a task's state. Raises ImportTaskNotFound."""
        return RemoteImport(self.dc.import_state(task_id))

    def jobs_of(self, collection_name: str | None = None) -> list[RemoteImport]:
        """Returns the tasks datacoord remembers, oldest first (of one collection if named)."""
        return [RemoteImport(s) for s in self.dc.list_imports(collection_name)]

    def close(self) -> None:
        """Nothing to release: the jobs run in datacoord's process."""


class RemoteCompactor:
    """Compactor's calls, over datacoord's RPC."""

    def __init__(self, datacoord: DataCoordClient) -> None:
        self.dc = datacoord

    def compact(self, collection: str, wait: bool = True) -> CompactionJob:
        """Starts a compaction (with `wait`, returns once it ended); returns its job. Raises
        CollectionNotFound."""
        job = _job(self.dc.compact(collection))
        while wait and job.state == EXECUTING:
            time.sleep(POLL_S)
            job = self.state(job.job_id)
        return job

    def state(self, job_id: int) -> CompactionJob:
        """Returns a job. Raises CompactionNotFound."""
        return _job(self.dc.compaction_state(job_id))

    @property
    def jobs(self) -> dict[int, CompactionJob]:
        """The jobs datacoord remembers, oldest first."""
        return {j.job_id: j for j in map(_job, self.dc.list_compactions())}

    def close(self) -> None:
        """Nothing to release: the jobs run in datacoord's process."""


def _job(fields: dict[str, Any]) -> CompactionJob:
    return CompactionJob.from_fields(fields)
