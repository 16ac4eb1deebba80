"""Compaction (`Client.compact`, the background policy): small Flushed segments are merged and
rows deleted before the retention horizon dropped, by a merge that writes binlogs directly (in
process, or one Spark task per group) and a commit that swaps the segments at one ts.

A job: datacoord's policy picks the groups, ids are reserved from rootcoord, each group is
merged (vectorlog/storage/merge.py), then the proxy commits it (one SegmentsCompacted on
dml) and the job waits until datacoord lists the new segment Flushed. A merge that fails, or a
commit refused because a segment changed, deletes what it wrote; a SIGKILL leaves unreferenced
files only, and the old segments serving. A segment is in one running job at most.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vectorlog.core.errors import NotFound
from vectorlog.core.faults import crash_point
from vectorlog.core.hybridts import LOGICAL_BITS, physical_ms
from vectorlog.core.model import CollectionInfo
from vectorlog.core.properties import expire_ts
from vectorlog.engines.spark import acquire_session, release_session, run_merges
from vectorlog.processors.proxy.service import CompactionConflict, ProxyService, delete_quietly
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.storage import (
    CompactionPlan,
    CompactionSource,
    ObjectStore,
    log_ids_needed,
    merge,
)

log = logging.getLogger(__name__)

EXECUTING, COMPLETED, FAILED = "Executing", "Completed", "Failed"
#: how long a job waits after a commit for datacoord to list the new segment Flushed
FLUSHED_WAIT_S = 60.0
#: jobs remembered for `state` (the oldest are forgotten first)
MAX_JOBS = 1000
Merger = Callable[[list[CompactionPlan]], list[dict[str, Any] | BaseException]]


class CompactionNotFound(NotFound):
    """No compaction job with this id ran in this process."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"compaction {job_id} not found")


@dataclass
class CompactionJob:
    """One compaction of one collection, as `get_compaction_state` reports it."""

    job_id: int
    collection_name: str
    state: str = EXECUTING
    plans: int = 0
    merged: dict[int, list[int]] = field(default_factory=dict)  # new segment -> merged ones
    dropped_rows: int = 0
    failures: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def fields(self) -> dict[str, Any]:
        """Returns the dataclass's fields (JSON-able but `merged`'s keys): `from_fields`."""
        return dataclasses.asdict(self)

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> CompactionJob:
        """Returns the job `fields` describe (`merged`'s keys may be strings, as JSON's)."""
        merged = {int(k): [int(s) for s in v] for k, v in fields["merged"].items()}
        return cls(**{**fields, "merged": merged})

    def as_dict(self) -> dict[str, Any]:
        """Returns the job as `get_compaction_plans` reports it: state, plans (groups
        merged), what each new segment merged (`merged`: new id -> old ids), rows dropped,
        failures."""
        return {
            "job_id": self.job_id,
            "collection_name": self.collection_name,
            "state": self.state,
            "plans": self.plans,
            "merged": dict(self.merged),
            "dropped_rows": self.dropped_rows,
            "failures": list(self.failures),
        }


class Compactor:
    """Runs compaction jobs for one cluster; `start` adds the background policy."""

    def __init__(
        self,
        proxy: ProxyService,
        rootcoord: RootCoordService,
        objects: ObjectStore,
        merger: Merger,
        retention_ms: int | None,
        interval_s: float | None = None,
    ) -> None:
        """`merger(plans)` merges each plan (a result or the error it raised, in order);
        rows deleted more than `retention_ms` ago are dropped (None: none are)."""
        self.proxy, self.rc, self.objects, self.merger = proxy, rootcoord, objects, merger
        self.retention_ms, self.interval_s = retention_ms, interval_s
        self.jobs: dict[int, CompactionJob] = {}
        self._busy: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: called with a job when it starts (may raise: the job does not run then) and ends
        self.on_change: Callable[[CompactionJob], None] | None = None

    # -- jobs ----------------------------------------------------------------------------
    def compact(self, collection: str, wait: bool = True) -> CompactionJob:
        """Starts a compaction of `collection`'s segments (waits for it with `wait`); returns
        its job. Raises CollectionNotFound."""
        return self._start(
            collection, self.proxy.compaction_groups(collection, self.horizon()), wait
        )

    def _start(self, collection: str, groups: list[dict[str, Any]], wait: bool) -> CompactionJob:
        while len(self.jobs) >= MAX_JOBS:  # the oldest are forgotten
            del self.jobs[next(iter(self.jobs))]
        job = CompactionJob(self.rc.allocate_ids(), collection)
        if self.on_change is not None:
            self.on_change(job)  # not acknowledged unless recorded
        self.jobs[job.job_id] = job
        run = threading.Thread(target=self._run, args=(job, groups), daemon=True)
        run.start()
        if wait:
            run.join()
        return job

    def state(self, job_id: int) -> CompactionJob:
        """Returns a job. Raises CompactionNotFound."""
        job = self.jobs.get(job_id)
        if job is None:
            raise CompactionNotFound(job_id)
        return job

    def adopt(self, job: CompactionJob) -> None:
        """Remembers a job run before (cluster mode: recorded on coord), for `state`."""
        while len(self.jobs) >= MAX_JOBS:  # the oldest are forgotten
            del self.jobs[next(iter(self.jobs))]
        self.jobs[job.job_id] = job

    def horizon(self) -> int:
        """Returns the hybrid ts at or before which deleted rows may be dropped."""
        if self.retention_ms is None:
            return 0
        return max(0, physical_ms(self.rc.now()) - self.retention_ms) << LOGICAL_BITS

    def _run(self, job: CompactionJob, groups: list[dict[str, Any]]) -> None:
        started, taken = time.monotonic(), self._take(groups)
        try:
            job.plans = len(taken)
            if taken:
                self._compact(job, taken)
        except Exception as exc:
            log.warning("compaction %d of %s failed: %s", job.job_id, job.collection_name, exc)
            job.failures.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._release(taken)
            job.state = FAILED if job.failures else COMPLETED
            job.elapsed_s = time.monotonic() - started
            self._ended(job)

    def _ended(self, job: CompactionJob) -> None:
        """Hands the ended job to `on_change`, logging (not raising) its failure."""
        try:
            if self.on_change is not None:
                self.on_change(job)
        except Exception as exc:
            log.warning("compaction %d: its end was not recorded: %s", job.job_id, exc)

    def _compact(self, job: CompactionJob, groups: list[dict[str, Any]]) -> None:
        info = self.proxy.describe_collection(job.collection_name)
        horizon = self.horizon()
        plans = [self._plan(info, g, horizon) for g in groups]
        results = self.merger(plans)
        for group, plan, result in zip(groups, plans, results, strict=True):
            if isinstance(result, BaseException):
                job.failures.append(f"plan {plan.plan_id}: {type(result).__name__}: {result}")
                continue
            self._commit(job, group, plan, result)

    def _plan(self, info: CollectionInfo, group: dict[str, Any], horizon: int) -> CompactionPlan:
        """Returns a group's plan, its ids reserved from rootcoord."""
        sources = tuple(
            CompactionSource(s["segment_id"], tuple(s["writes"]), tuple(s["deltas"]))
            for s in group["segments"]
        )
        schema = info.schema
        return CompactionPlan(
            plan_id=self.rc.allocate_ids(),
            collection_id=info.collection_id,
            partition_id=group["partition_id"],
            vchannel=group["vchannel"],
            schema=schema.to_avro(),
            sources=sources,
            horizon=horizon,
            segment_id=self.rc.allocate_ids(),
            first_log_id=self.rc.allocate_ids(log_ids_needed(schema)),
            now=self.rc.now(),
            expire_ts=expire_ts(info.properties, horizon),
        )

    def _commit(
        self, job: CompactionJob, group: dict[str, Any], plan: CompactionPlan, result: dict
    ) -> None:
        """Commits one merge; a refused commit deletes its files (nothing references them)."""
        crash_point("compaction.after_files")
        try:
            self.proxy.commit_compaction(
                job.collection_name, group, result, plan.plan_id, plan.horizon
            )
        except CompactionConflict as exc:
            delete_quietly(self.objects, _paths(result))
            job.failures.append(str(exc))
            return
        self._wait_flushed(plan.segment_id)
        job.merged[plan.segment_id] = [s.segment_id for s in plan.sources]
        job.dropped_rows += result["dropped_rows"]

    def _wait_flushed(self, segment_id: int) -> None:
        """Returns once datacoord lists the segment Flushed. Raises TimeoutError."""
        deadline = time.monotonic() + FLUSHED_WAIT_S
        while self.proxy.get_segment_info([segment_id])[0]["state"] != "Flushed":
            if time.monotonic() > deadline:
                raise TimeoutError(f"segment {segment_id} not Flushed {FLUSHED_WAIT_S} s after")
            time.sleep(0.05)

    def _take(self, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Returns the groups none of whose segments is in a running job, marking them."""
        with self._lock:
            free = [g for g in groups if not _ids(g) & self._busy]
            for g in free:
                self._busy |= _ids(g)
        return free

    def _release(self, groups: list[dict[str, Any]]) -> None:
        with self._lock:
            for g in groups:
                self._busy -= _ids(g)

    # -- the background policy ---------------------------------------------------------------
    def start(self) -> None:
        """Compacts every collection every `interval_s` (no-op without one)."""
        if self.interval_s:
            self._thread = threading.Thread(target=self._loop, name="compactor", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def close(self) -> None:
        self.stop()

    def _loop(self) -> None:
        assert self.interval_s
        while not self._stop.wait(self.interval_s):
            for name in self.proxy.list_collections():
                if self._stop.is_set():
                    return
                try:
                    groups = self.proxy.compaction_groups(name, self.horizon())
                    if groups:
                        self._start(name, groups, wait=True)
                except Exception as exc:  # dropped meanwhile, or the log failed: next round
                    log.warning("background compaction of %s failed: %s", name, exc)


def _ids(group: dict[str, Any]) -> set[int]:
    return {s["segment_id"] for s in group["segments"]}


def _paths(result: dict[str, Any]) -> list[str]:
    fields = result["field_binlogs"] + result["stats_binlogs"]
    return [b["path"] for fb in fields for b in fb["binlogs"]] + [
        b["path"] for b in result["delta_binlogs"]
    ]


def local_merger(objects: ObjectStore) -> Merger:
    """Returns a merger running each plan in this process, one after the other."""

    def run(plans: list[CompactionPlan]) -> list[dict[str, Any] | BaseException]:
        out: list[dict[str, Any] | BaseException] = []
        for plan in plans:
            try:
                out.append(merge(plan, objects))
            except Exception as exc:
                out.append(exc)
        return out

    return run


class SparkMerger:
    """A merger running one Spark task per plan (the session is taken at the first merge and
    given back at `close`)."""

    def __init__(self, storage_uri: str, master: str | None) -> None:
        self.storage_uri, self.master = storage_uri, master
        self._session: Any = None
        self._lock = threading.Lock()

    def __call__(self, plans: list[CompactionPlan]) -> list[dict[str, Any] | BaseException]:
        with self._lock:
            if self._session is None:
                self._session = acquire_session(self.master)
            session = self._session
        return run_merges(session, self.storage_uri, plans)

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            release_session(session)
