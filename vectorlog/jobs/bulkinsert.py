"""Bulk insert (`Client.bulk_insert`, `vectorlog import`): Parquet, JSON and NumPy files
become Flushed segments through a Spark job that writes binlogs directly; only the commit's
SegmentImported events go on the log.

A job: the files are planned and checked (nothing is written for a missing file or an unknown
format), ids are reserved from rootcoord, one Spark task per unit writes segments, and the
proxy commits them at one stamped ts. A failure anywhere before the commit's append deletes
what the job wrote and leaves nothing visible; a SIGKILL leaves unreferenced files only.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vectorlog.core.errors import InvalidArgument, NotFound
from vectorlog.core.faults import crash_point
from vectorlog.core.model import DEFAULT_PARTITION, CollectionInfo, CollectionSchema, DataType
from vectorlog.engines.spark import (
    ImportTarget,
    UnitTask,
    acquire_session,
    logs_needed,
    release_session,
    run_units,
    segments_needed,
)
from vectorlog.jobs.import_reasons import public
from vectorlog.processors.proxy.service import (
    ImportUnit,
    ProxyService,
    all_paths,
    delete_quietly,
    plan_units,
)
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.storage import ObjectStore

log = logging.getLogger(__name__)

PENDING, IMPORTING, COMMITTING, COMPLETED, FAILED = (
    "Pending",
    "Importing",
    "Committing",
    "Completed",
    "Failed",
)
Progress = Callable[[int, int], None]  # (units done, units)
#: how long a job waits after its commit for datacoord to list its segments as Flushed
FLUSHED_WAIT_S = 60.0


class ImportTaskNotFound(NotFound):
    """No bulk insert task with this id ran in this process."""

    def __init__(self, task_id: int) -> None:
        super().__init__(f"bulk insert task {task_id} not found")


@dataclass
class ImportJob:
    """A bulk insert's state, as `get_bulk_insert_state` reports it."""

    task_id: int
    collection_name: str
    files: list[Any]
    partition_name: str | None = None
    state: str = PENDING
    units: int = 0
    units_done: int = 0
    row_count: int = 0
    segment_ids: list[int] = field(default_factory=list)
    timestamp: int = 0  # the commit's ts: rows are visible from it on
    reason: str = ""
    started: float = field(default_factory=time.time)
    #: cluster mode: the dml end offsets (by partition) just before its commit's append,
    #: where a restarted datacoord looks for the commit (runners.import_commits)
    dml_from: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def progress(self) -> int:
        """Percent done: units written (up to 90), then the commit."""
        if self.state == COMPLETED:
            return 100
        return 0 if not self.units else int(90 * self.units_done / self.units)

    def fields(self) -> dict[str, Any]:
        """Returns the dataclass's fields (JSON-able): `ImportJob(**fields)` rebuilds it."""
        return dataclasses.asdict(self)

    def as_dict(self) -> dict[str, Any]:
        """Returns the state with Milvus's names (task_id, state, row_count, progress...)."""
        return {
            "task_id": self.task_id,
            "collection_name": self.collection_name,
            "partition_name": self.partition_name or "",
            "files": self.files,
            "state": self.state,
            "progress": self.progress,
            "row_count": self.row_count,
            "id_list": [],
            "segment_ids": list(self.segment_ids),
            "timestamp": self.timestamp,
            "failed_reason": self.reason,
            "elapsed_s": round(self.elapsed_s, 3),
            "created": round(self.started),
        }


class BulkInserter:
    """Runs bulk insert jobs for one cluster (one per call; they may run concurrently)."""

    def __init__(
        self,
        proxy: ProxyService,
        rootcoord: RootCoordService,
        objects: ObjectStore,
        storage_uri: str,
        max_segment_bytes: int,
        spark_master: str | None = None,
    ) -> None:
        self.proxy, self.rc, self.objects = proxy, rootcoord, objects
        self.storage_uri, self.spark_master = storage_uri, spark_master
        self.max_segment_bytes = max_segment_bytes
        self.jobs: dict[int, ImportJob] = {}
        self._lock = threading.Lock()
        #: held while the session starts (seconds): apart from `_lock`, so `state` answers
        self._session_lock = threading.Lock()
        self._session: Any = None
        self.workers: set[str] = set()  # the executors' work folders that ran units
        #: called with a job when it is acknowledged, committing, and when it ends (may raise:
        #: the submit, or the commit, fails then)
        self.on_change: Callable[[ImportJob], None] | None = None

    def submit(
        self,
        collection_name: str,
        files: Sequence[Any],
        partition_name: str | None = None,
        progress: Progress | None = None,
        options: dict[str, Any] | None = None,
        wait: bool = True,
    ) -> ImportJob:
        """Checks the request and its files, then runs the job: to its end with `wait`
        (returns its Completed state), else on a thread (returns at once; see `state`).
        `options`: Milvus's; {"backup": true} imports Milvus binlog segment directories.
        Raises InvalidArgument (ImportFileError for a file), CollectionNotFound before
        anything is written; with `wait`, the job's error (ImportFileError naming the file,
        StorageError, LogError) after deleting what it wrote."""
        job, info, units = self._prepare(collection_name, files, partition_name, options)
        if wait:
            self._run(job, info, units, progress)
        else:
            args = (job, info, units, progress)
            threading.Thread(target=self._run_quietly, args=args, daemon=True).start()
        return job

    def state(self, task_id: int) -> ImportJob:
        """Returns a job's state. Raises ImportTaskNotFound."""
        with self._lock:
            job = self.jobs.get(task_id)
        if job is None:
            raise ImportTaskNotFound(task_id)
        return job

    def adopt(self, job: ImportJob) -> None:
        """Remembers a job run before (cluster mode: recorded on coord), for `state`."""
        with self._lock:
            self.jobs[job.task_id] = job

    def jobs_of(self, collection_name: str | None = None) -> list[ImportJob]:
        """Returns the jobs of this process, oldest first (of one collection if named)."""
        with self._lock:
            jobs = list(self.jobs.values())
        return [j for j in jobs if collection_name in (None, j.collection_name)]

    # -- a job ---------------------------------------------------------------------------------
    def _prepare(
        self,
        collection_name: str,
        files: Sequence[Any],
        partition_name: str | None,
        options: dict[str, Any] | None = None,
    ) -> tuple[ImportJob, CollectionInfo, list[ImportUnit]]:
        info = self.proxy.describe_collection(collection_name)
        if info.schema.partition_key is not None:
            raise InvalidArgument(
                f"bulk insert into {collection_name!r}: collections with a partition key are "
                "not supported by vectorlog's bulk insert yet (insert their rows instead)"
            )
        if partition_name is not None and partition_name not in info.partitions:
            raise InvalidArgument(
                f"partition {partition_name!r} does not exist in {collection_name!r}"
            )
        if isinstance(files, str) or not isinstance(files, Sequence):
            raise InvalidArgument("files must be a list of paths (or of lists of .npy paths)")
        units = plan_units(files, backup=backup_option(options or {}))
        job = ImportJob(self.rc.allocate_ids(1), collection_name, list(files), partition_name)
        job.units = len(units)
        self._record(job, must=True)  # not acknowledged unless recorded
        with self._lock:
            self.jobs[job.task_id] = job
        return job, info, units

    def _run_quietly(
        self,
        job: ImportJob,
        info: CollectionInfo,
        units: list[ImportUnit],
        progress: Progress | None,
    ) -> None:
        try:
            self._run(job, info, units, progress)
        except Exception as exc:
            log.warning("bulk insert %d failed: %s", job.task_id, exc)

    def _run(
        self,
        job: ImportJob,
        info: CollectionInfo,
        units: list[ImportUnit],
        progress: Progress | None,
    ) -> None:
        job.state = IMPORTING
        segments: list[dict[str, Any]] = []
        try:
            target, tasks = self._plan(info, units, job.partition_name)
            segments = self._write(target, tasks, job, progress)
            crash_point("bulkinsert.after_files")
            job.row_count = sum(s["num_rows"] for s in segments)
            job.segment_ids = [s["segment_id"] for s in segments]
            job.state = COMMITTING
            self._record(job, must=True)  # a restart then knows which segments to look for
            job.timestamp = self.proxy.commit_import(
                job.collection_name, job.partition_name, segments, job.task_id
            )
        except BaseException as exc:
            delete_quietly(self.objects, all_paths(segments))
            job.row_count, job.segment_ids = 0, []
            job.state, job.reason = FAILED, public(exc, [f.name for f in info.schema.fields])
            job.elapsed_s = time.time() - job.started
            self._record(job)
            raise
        self.await_flushed(job)
        job.state, job.elapsed_s = COMPLETED, time.time() - job.started
        self._record(job)

    def _record(self, job: ImportJob, must: bool = False) -> None:
        """Hands the job's new state to `on_change` (cluster mode: onto coord); a failure
        raises with `must`, else is logged (a restart then resumes from the previous one)."""
        if self.on_change is None:
            return
        try:
            self.on_change(job)
        except Exception as exc:
            if must:
                raise
            log.warning("bulk insert %d: state %s not recorded: %s", job.task_id, job.state, exc)

    def await_flushed(self, job: ImportJob) -> None:
        """Waits (up to FLUSHED_WAIT_S) until datacoord lists the job's segments as Flushed:
        the data node records them once it applies the commit, a moment after the rows are
        visible. Past that, logs it: the rows stay visible and the segments show up later."""
        deadline = time.monotonic() + FLUSHED_WAIT_S
        while any(
            info["state"] != "Flushed" for info in self.proxy.get_segment_info(job.segment_ids)
        ):
            if time.monotonic() > deadline:
                log.warning("bulk insert %d: segments not Flushed yet", job.task_id)
                return
            time.sleep(0.02)

    def _plan(
        self, info: CollectionInfo, units: list[ImportUnit], partition_name: str | None
    ) -> tuple[ImportTarget, list[UnitTask]]:
        """Returns the job's target and one task per unit with its reserved id blocks."""
        schema = info.schema
        max_rows = max(1, self.max_segment_bytes // _row_bytes(schema))
        partition = info.partitions[partition_name or DEFAULT_PARTITION]
        target = ImportTarget(
            self.storage_uri,
            info.collection_id,
            partition,
            schema.to_avro(),
            tuple(info.vchannels),
            max_rows,
            self.rc.now(),
        )
        return target, [self._task(schema, unit, len(info.vchannels), max_rows) for unit in units]

    def _task(
        self, schema: CollectionSchema, unit: ImportUnit, shards: int, max_rows: int
    ) -> UnitTask:
        segs = segments_needed(unit.rows_bound, shards, max_rows)
        logs = logs_needed(schema, segs)
        rows = max(1, unit.rows_bound)
        first_key = self.rc.allocate_ids(rows) if schema.primary.auto_id else -1
        return UnitTask(
            unit,
            self.rc.allocate_ids(segs),
            segs,
            self.rc.allocate_ids(rows),
            self.rc.allocate_ids(logs),
            logs,
            first_key,
        )

    def _write(
        self,
        target: ImportTarget,
        tasks: list[UnitTask],
        job: ImportJob,
        progress: Progress | None,
    ) -> list[dict[str, Any]]:
        def done(n: int, total: int) -> None:
            job.units_done = n
            if progress is not None:
                progress(n, total)

        return run_units(self._spark(), target, tasks, done, self.workers)

    def _spark(self) -> Any:
        """Returns the shared SparkSession, acquired at the first job and held until `close`
        (a JVM start takes seconds: one per process, not per import)."""
        with self._session_lock:
            if self._session is None:
                self._session = acquire_session(self.spark_master)
            return self._session

    def close(self) -> None:
        """Releases the SparkSession (stopped if no other job of the process holds it)."""
        with self._session_lock:
            session, self._session = self._session, None
        if session is not None:
            release_session(session)


def _row_bytes(schema: CollectionSchema) -> int:
    """Returns an estimate of one row's bytes, for segment sizing."""
    sizes = {DataType.FLOAT_VECTOR: lambda f: 4 * (f.dim or 1)}
    return 16 + sum(sizes.get(f.dtype, lambda f: 16)(f) for f in schema.fields)


def backup_option(options: dict[str, Any]) -> bool:
    """Returns Milvus's `backup` option (true/"true"). Raises InvalidArgument for an option
    vectorlog does not know."""
    unknown = sorted(set(options) - {"backup"})
    if unknown:
        raise InvalidArgument(f"unknown bulk insert options {unknown} (known: ['backup'])")
    value = options.get("backup", False)
    return value is True or str(value).lower() == "true"
