"""The Client's bulk insert and compaction calls (MilvusClient's bulk_insert,
get_bulk_insert_state, list_bulk_insert_tasks, compact, get_compaction_state,
get_compaction_plans): jobs the cluster runs beside the log, refused where it runs none."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.runners.standalone import Standalone
from vectorlog.sdk.calls import Calls

if TYPE_CHECKING:
    from vectorlog.jobs.bulkinsert import BulkInserter
    from vectorlog.jobs.compaction import Compactor


class JobCalls(Calls):
    """Bulk insert and compaction calls of a Client (which sets `_proxy`, `db`, `_session`
    and `_cluster`)."""

    _cluster: Standalone

    def bulk_insert(
        self,
        collection_name: str,
        files: list[Any],
        partition_name: str | None = None,
        wait: bool = True,
        progress: Callable[[int, int], None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Imports files in Milvus's bulk insert formats (each entry a .parquet or .json path,
        or a list of `<field>.npy` paths) as Flushed segments, through a Spark job that writes
        binlogs directly; only the commit goes on the log. With `wait`, returns the task's
        state once Completed: every row is visible, at one ts (`timestamp`), to any read
        after the call. Without, returns at once ({"task_id", "state": "Importing", ...};
        poll `get_bulk_insert_state`). `progress(units done, units)` is called as files (or
        Parquet row groups) are written. `options={"backup": True}` (Milvus's) imports Milvus
        binlog segments instead: each entry [insert_log segment dir, delta_log segment dir].
        Raises InvalidArgument (ImportFileError naming the file), CollectionNotFound before
        anything is written; with `wait`, the job's error, after deleting what it wrote: a
        failed import leaves nothing visible."""
        job = self._bulk().submit(
            self._q(collection_name), files, partition_name, progress, options, wait
        )
        if not wait:
            return job.as_dict()
        self._session_ts = max(self._session_ts, job.timestamp)
        return job.as_dict()

    def get_bulk_insert_state(self, task_id: int) -> dict[str, Any]:
        """Returns a bulk insert task's state (Pending, Importing, Committing, Completed,
        Failed), progress in percent, row_count and failed_reason. Raises NotFound for a
        task this process did not start (task states are not kept across its restarts; in
        cluster mode datacoord runs every task and keeps their states on coord)."""
        return self._bulk().state(task_id).as_dict()

    def list_bulk_insert_tasks(self, collection_name: str | None = None) -> list[dict[str, Any]]:
        """Returns the bulk insert tasks this process started, oldest first."""
        return [
            job.as_dict()
            for job in self._bulk().jobs_of(collection_name and self._q(collection_name))
        ]

    def _bulk(self) -> BulkInserter:
        if self._cluster.bulk is None:
            raise InvalidArgument(f"bulk insert {self._no_jobs()}")
        return self._cluster.bulk

    def compact(self, collection_name: str, wait: bool = False) -> int:
        """Starts a compaction of the collection (Milvus's `compact`): its small Flushed
        segments of each partition and vchannel are merged, and rows deleted or replaced
        before the log retention horizon are dropped; reads give the same answers before and
        after, as of any ts within retention. Returns the job id (`get_compaction_state`);
        with `wait`, once the job ended. Raises CollectionNotFound, InvalidArgument (data
        node off)."""
        return self._compactor().compact(self._q(collection_name), wait).job_id

    def get_compaction_state(self, job_id: int) -> str:
        """Returns a compaction job's state: "Executing", "Completed" or "Failed". Raises
        NotFound for a job this process did not start."""
        return self._compactor().state(job_id).state

    def get_compaction_plans(self, job_id: int) -> dict[str, Any]:
        """Returns a compaction job: its state, plans (groups merged), what each new segment
        merged (`merged`: new id -> old ids), rows dropped, failures. Raises NotFound."""
        return self._compactor().state(job_id).as_dict()

    def _no_jobs(self) -> str:
        """Returns why this process runs no bulk insert or compaction jobs."""
        why = getattr(self._cluster, "jobs_refused", None)
        return why if isinstance(why, str) else "needs the data node (datanode is 'off')"

    def _compactor(self) -> Compactor:
        if self._cluster.compactor is None:
            raise InvalidArgument(f"compaction {self._no_jobs()}")
        return self._cluster.compactor
