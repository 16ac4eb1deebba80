"""The cluster mode's jobs (bulk insert, compaction, the background compaction policy), run
by the leading datacoord's process as `vectorlog serve` runs them (vectorlog.jobs), served to
the proxies by datacoord's RPC (DataCoord v3: Import, GetImportState, ListImports,
ManualCompaction, GetCompactionState, ListCompactions) and recorded on coord.

Milvus's datacoord plans and tracks jobs and its data nodes execute them; here datacoord's
process does both, reading the files from the storage root every process sees and writing
binlogs there. Its commits go to dml through a proxy of its own (stamped and ticked with
datacoord's source and lease epoch, fenced by its lease as its other appends).

Durability: each job's state goes on coord (`JobRecorded`) when it is acknowledged (the
request fails unless it is recorded), before an import's commit (with its segments) and
when it ends. A datacoord that starts (a restart, a standby's takeover) folds those records:
an ended job answers its state as before; an import cut short before its commit, or a
compaction cut short, is recorded Failed, naming the restart (nothing of an import is
visible; a compaction's merges committed before stay). An import cut short during its commit
is decided from the log, not a timer (runners.import_commits): before its commit the job
recorded dml's end offsets (`ImportJob.dml_from`); the new leader, holding the lease (so the
fenced old leader appends nothing more), reads dml from there to end markers it appends at
its start. The commit's records all there: it landed, and the import is Completed once its
segments show up on coord, however late (a data node down for a while), waiting until
stopped. Not there (or a torn batch): it can never land nor be visible, and the import is
recorded Failed at once. An import recorded Committing without `dml_from` (by an older
version) keeps the old rule: Failed unless its segments show up within
`vectorlog.jobs.bulkinsert.FLUSHED_WAIT_S`.

Files: every path is resolved under datacoord's own import root (`--import-root`, else the
storage root), whoever asks: relative paths, as the proxies send them
(vectorlog.server.import_paths)."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.jobs.bulkinsert import (
    COMMITTING,
    COMPLETED,
    FAILED,
    FLUSHED_WAIT_S,
    BulkInserter,
    ImportJob,
    backup_option,
)
from vectorlog.jobs.compaction import EXECUTING, CompactionJob, Compactor
from vectorlog.processors.datacoord.service import DataCoordService
from vectorlog.runners.import_commits import CommitLog
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.server.import_paths import confine
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.snapshots import Blobs, read_from

log = logging.getLogger(__name__)

IMPORT, COMPACTION = "import", "compaction"
#: the reasons a restarted datacoord gives for the jobs it found cut short
CUT_BEFORE_COMMIT = (
    "datacoord restarted before the import's commit: nothing of it is visible (import the "
    "files again)"
)
CUT_IN_COMMIT = (
    "datacoord restarted during the import's commit, before the commit reached dml: nothing "
    "of it is visible (import the files again)"
)
#: the reason for an import recorded Committing by an older version (no `dml_from`)
CUT_IN_COMMIT_UNSEEN = (
    "datacoord restarted during the import's commit, and its segments did not show up "
    f"within {FLUSHED_WAIT_S:.0f} s: nothing of it is visible (import the files again)"
)
CUT_COMPACTION = (
    "datacoord restarted while the compaction ran: the merges it committed before stay, the "
    "others did not run"
)


class JobRecorder:
    """Appends each job state change to coord (`JobRecorded`, partition 0)."""

    def __init__(self, log_: Log, topic: str, serde: EventSerde, clock: Callable[[], int]) -> None:
        """`clock()`: a fresh hybrid timestamp (rootcoord's) for each record."""
        self._log, self._topic, self._serde, self._clock = log_, topic, serde, clock

    def record(self, kind: str, job_id: int, collection: str, state: str, fields: Any) -> None:
        """Appends one record durably. Raises LogError (a fenced leader: LeaseLost...)."""
        body = {
            "job_id": job_id,
            "kind": kind,
            "collection_name": collection,
            "state": state,
            "detail": json.dumps(fields, sort_keys=True),
        }
        event = Event("JobRecorded", self._clock(), body)
        record = Append(0, self._serde.encode(event), self._serde.key(event))
        self._log.append(self._topic, [record])

    def imported(self, job: ImportJob) -> None:
        self.record(IMPORT, job.task_id, job.collection_name, job.state, job.fields())

    def compacted(self, job: CompactionJob) -> None:
        self.record(COMPACTION, job.job_id, job.collection_name, job.state, job.fields())


def recorded_jobs(
    log_: Log, topic: str, serde: EventSerde, blobs: Blobs | None
) -> dict[int, dict[str, Any]]:
    """Returns each job's newest JobRecorded body on coord (from its newest snapshot on), by
    job id, oldest job first. Raises LogError, SnapshotMissing."""
    jobs: dict[int, dict[str, Any]] = {}
    for rec in read_from(log_, topic, blobs):
        try:
            event = serde.decode(rec.value)
        except Exception:  # undecodable: its consumers dead-lettered it
            continue
        if event.type == "JobRecorded":
            jobs[event.body["job_id"]] = event.body
    return jobs


class ClusterJobs:
    """The jobs of the leading datacoord: its BulkInserter and Compactor, each state change
    recorded on coord, and the job RPCs of DataCoord v3."""

    def __init__(
        self,
        bulk: BulkInserter,
        compactor: Compactor,
        recorder: JobRecorder,
        datacoord: DataCoordService,
        import_root: Path | None,
        commits: CommitLog,
    ) -> None:
        """`datacoord`: where the imports' segments show up; `commits`: dml, read for the
        imports' commits."""
        self.bulk, self.compactor, self.recorder = bulk, compactor, recorder
        self.datacoord, self.import_root, self.commits = datacoord, import_root, commits
        bulk.on_change = self._imported
        compactor.on_change = recorder.compacted
        self._stop = threading.Event()
        self._ends: list[int] = []
        self._resuming: list[threading.Thread] = []

    def _imported(self, job: ImportJob) -> None:
        """Records an import's state; before its commit, with dml's end offsets."""
        if job.state == COMMITTING and not job.dml_from:
            job.dml_from = self.commits.ends()
        self.recorder.imported(job)

    # -- recovery ----------------------------------------------------------------------------
    def recover(self, recorded: dict[int, dict[str, Any]]) -> None:
        """Takes the jobs recorded on coord back (see the module docstring): records the
        ones cut short Failed, and resumes the imports cut short in their commit. Raises
        LogError (a record, dml's end offsets)."""
        if any(b["kind"] == IMPORT and b["state"] == COMMITTING for b in recorded.values()):
            self._ends = self.commits.marked_ends()  # the old leader's are before them
        for body in recorded.values():
            fields = {**json.loads(body["detail"]), "state": body["state"]}
            if body["kind"] == IMPORT:
                self._recover_import(ImportJob(**fields))
            elif body["kind"] == COMPACTION:
                self._recover_compaction(CompactionJob.from_fields(fields))

    def _recover_import(self, job: ImportJob) -> None:
        self.bulk.adopt(job)
        if job.state == COMMITTING:
            thread = threading.Thread(target=self._resume, args=(job,), daemon=True)
            thread.start()
            self._resuming.append(thread)
        elif job.state not in (COMPLETED, FAILED):
            self._fail_import(job, CUT_BEFORE_COMMIT)

    def _fail_import(self, job: ImportJob, reason: str) -> None:
        job.row_count, job.segment_ids = 0, []
        job.state, job.reason = FAILED, reason
        self.recorder.imported(job)
        log.warning("bulk insert %d: %s", job.task_id, reason)

    def _resume(self, job: ImportJob) -> None:
        """Completes an import cut short in its commit if the commit landed on dml, once its
        segments show up on coord (however late), else fails it at once (module docstring).
        A log failure (a fenced leader) leaves it to the next leader."""
        try:
            if not job.dml_from:
                self._resume_timed(job)
            elif self._commit_landed(job):
                self._complete_once_shown(job)
            elif not self._stop.is_set():
                self._fail_import(job, CUT_IN_COMMIT)
        except Exception as exc:
            log.warning("bulk insert %d: not resumed: %s", job.task_id, exc)

    def _commit_landed(self, job: ImportJob) -> bool:
        """Returns whether the commit is whole on dml, retrying a failed read until stopped
        (then False). Raises nothing."""
        while not self._stop.is_set():
            try:
                return self.commits.landed(job.task_id, job.dml_from, self._ends)
            except Exception as exc:
                log.warning("bulk insert %d: reading dml for its commit: %s", job.task_id, exc)
                self._stop.wait(1.0)
        return False

    def _complete_once_shown(self, job: ImportJob) -> None:
        """Waits, until stopped, for the segments on coord; then records Completed."""
        while not self._landed(job.segment_ids):
            if self._stop.wait(0.1):
                return
        self.bulk.await_flushed(job)
        self.recorder.imported(dataclasses.replace(job, state=COMPLETED))  # then shown
        job.state = COMPLETED
        log.info("bulk insert %d: its commit had landed; Completed", job.task_id)

    def _resume_timed(self, job: ImportJob) -> None:
        """The rule for an import recorded by an older version: Failed unless its segments
        show up within FLUSHED_WAIT_S."""
        deadline = time.monotonic() + FLUSHED_WAIT_S
        while not self._landed(job.segment_ids):
            if time.monotonic() > deadline or self._stop.wait(0.1):
                if not self._stop.is_set():
                    self._fail_import(job, CUT_IN_COMMIT_UNSEEN)
                return
        self._complete_once_shown(job)

    def _landed(self, segment_ids: list[int]) -> bool:
        infos = self.datacoord.get_segment_info(segment_ids)
        return all(i["state"] != "NotExist" for i in infos)

    def _recover_compaction(self, job: CompactionJob) -> None:
        self.compactor.adopt(job)
        if job.state == EXECUTING:
            job.state = FAILED
            job.failures.append(CUT_COMPACTION)
            self.recorder.compacted(job)
            log.warning("compaction %d: %s", job.job_id, CUT_COMPACTION)

    def start(self) -> None:
        """Starts the background compaction policy (every `compaction_interval_s`)."""
        self.compactor.start()

    def stop(self) -> None:
        self._stop.set()
        self.compactor.stop()
        for thread in self._resuming:
            thread.join(timeout=5)

    # -- the RPCs (DataCoord v3) ---------------------------------------------------------------
    def import_files(
        self,
        collection_name: str,
        files: list[Any],
        partition_name: str | None,
        options: dict[str, Any],
    ) -> dict[str, Any]:
        """Starts a bulk insert of `files` (confined to the import root) without waiting;
        returns its state. Raises ImportPathRefused, InvalidArgument (no import root, bad
        options, a file the job cannot plan), CollectionNotFound, LogError (not recorded:
        not started)."""
        if self.import_root is None:
            raise InvalidArgument(
                "datacoord has no import root: start it with --import-root (or a local --storage)"
            )
        confined = confine(self.import_root, files, backup_option(options))
        job = self.bulk.submit(
            collection_name, confined, partition_name, options=options, wait=False
        )
        return job.as_dict()

    def import_state(self, task_id: int) -> dict[str, Any]:
        """Returns a bulk insert task's state. Raises ImportTaskNotFound."""
        return self.bulk.state(task_id).as_dict()

    def list_imports(self, collection_name: str | None) -> list[dict[str, Any]]:
        """Returns the tasks' states, oldest first (of one collection if named)."""
        return [job.as_dict() for job in self.bulk.jobs_of(collection_name)]

    def compact(self, collection_name: str) -> dict[str, Any]:
        """Starts a compaction of the collection; returns its job (CompactionJob.fields).
        Raises
        CollectionNotFound, LogError (not recorded: not started)."""
        return self.compactor.compact(collection_name, wait=False).fields()

    def compaction_state(self, job_id: int) -> dict[str, Any]:
        """Returns a compaction job. Raises CompactionNotFound."""
        return self.compactor.state(job_id).fields()

    def list_compactions(self) -> list[dict[str, Any]]:
        """Returns the compaction jobs remembered, oldest first."""
        return [job.fields() for job in list(self.compactor.jobs.values())]


class ServedDataCoord:
    """What datacoord's RPC serves: the DataCoordService of `datacoord`, and the job RPCs of
    `jobs`."""

    JOB_CALLS: Iterable[str] = (
        "import_files",
        "import_state",
        "list_imports",
        "compact",
        "compaction_state",
        "list_compactions",
    )

    def __init__(self, datacoord: DataCoordService, jobs: ClusterJobs) -> None:
        self._datacoord, self._jobs = datacoord, jobs

    def __getattr__(self, name: str) -> Any:
        target = self._jobs if name in self.JOB_CALLS else self._datacoord
        return getattr(target, name)
