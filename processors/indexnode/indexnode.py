"""The index node (seed 004): builds a faiss index per (Flushed segment, vector index), and a
sorted scalar index (scalar.py) per (Flushed segment, scalar index), from the segment's
binlogs, stores it under index_files/ and reports it as a SegmentIndexed event.

It consumes the ddl topic (IndexCreated, IndexDropped, CollectionDropped, PartitionDropped:
that partition's segments are forgotten and their files deleted) and the coord topic
(BinlogPathsSaved; its own SegmentIndexed and SegmentIndexesDropped), each record's changes
committed with its position in one StateStore write (see `state`). A consumer thread applies
records and schedules every pair without a SegmentIndexed; a worker thread builds them (faiss
releases the GIL: ingest and consumption go on), writes the files, then appends SegmentIndexed
(ts from rootcoord's timestamp oracle). The pair counts as built once that event is consumed.

Dropping: IndexDropped / CollectionDropped -> SegmentIndexesDropped on coord (appended before
the ddl position is committed) -> consuming it deletes the files. A SegmentIndexed whose index
or segment is gone by the time it is consumed has its files deleted instead of recorded.

Recovery: positions and state are committed together, so a restart re-applies nothing twice; a
build whose SegmentIndexed was not appended is redone, and its orphaned files (under a build id
nothing reports) are deleted at recovery; a build reported twice is kept twice (consumers dedupe
by (segment, index_id)). A build that fails for good (a corrupt or missing binlog, parameters
the vectors do not fit) is dead-lettered (the segment's flushed BinlogPathsSaved position, with
the reason), logged, and shown as Failed by `progress`; it is retried only after a restart.
A segment gone before or during its build (a compaction merged it and its binlogs were
deleted, or it, its partition or the index was dropped) is skipped quietly instead: checked
when the job is dequeued, and on a missing binlog once the consumer applied coord to its end.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import faiss
import numpy as np

from vectorlog.core.faults import CrashPointReached, crash_point
from vectorlog.core.model import ROW_ID_FIELD
from vectorlog.core.scalar_index import SCALAR_INDEXES
from vectorlog.core.sparse import SPARSE_INDEXES
from vectorlog.core.types import BINARY_INDEXES
from vectorlog.processors.indexnode.added import field_columns
from vectorlog.processors.indexnode.builder import (
    MIN_ROWS_TO_INDEX,
    PARAMS,
    build_from_parts,
    parse_spec,
)
from vectorlog.processors.indexnode.errors import IndexBuildTimeout
from vectorlog.processors.indexnode.files import (
    build_paths,
    collection_folder,
    delete_build,
    write_build,
    write_index_files,
)
from vectorlog.processors.indexnode.scalar import build_scalar
from vectorlog.processors.indexnode.service import FAILED, FINISHED, IN_PROGRESS, IndexProgress
from vectorlog.processors.indexnode.sparse import build_binary, build_sparse
from vectorlog.processors.indexnode.state import Effects, IndexState, SegmentRecord
from vectorlog.processors.indexnode.threads import BuildThreads
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.runtime.events import decode_or_dead_letter
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore
from vectorlog.storage import (
    ObjectNotFound,
    ObjectStore,
    StorageError,
    float_vectors,
    int64s,
    read_insert_binlog,
)
from vectorlog.streams.channels import pchannel_of
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log, Record
from vectorlog.streams.scan import END_MARKER_SOURCE, settled_end
from vectorlog.streams.snapshots import FenceMemo, read_from, resume_fence
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger(__name__)
#: failures that say nothing about the build: it is retried, never marked Failed
TRANSIENT = (LogError, OSError, MemoryError)
#: SegmentIndexed params' `built_as` of a scalar index (every type is one sorted structure)
SCALAR_BUILT_AS = "SORTED"
#: how often the consumer re-schedules builds when no record arrives (retries transient ones)
RESCHEDULE_S = 1.0
#: how long a build whose binlogs are missing waits for the consumer to apply coord up to its
#: end (a compaction that merged the segment is on coord before its binlogs are deleted)
CATCH_UP_S = 30.0


@dataclass(frozen=True)
class Job:
    """One build: a snapshot of the segment and of the index it is for."""

    segment: SegmentRecord
    index: dict[str, Any]

    @property
    def key(self) -> tuple[int, int]:
        return (self.segment.segment_id, int(self.index["index_id"]))


class IndexNode(ProcessorBase):
    """Implements IndexNodeService: builds and reports segment indexes, tells their progress."""

    def __init__(
        self,
        log: Log,
        topics: Topics,
        serdes: Serdes,
        store: StateStore,
        objects: ObjectStore,
        rootcoord: RootCoordService,
        build_threads: int = 0,
        min_rows: int = MIN_ROWS_TO_INDEX,
        name: str = "indexnode",
        owns: Callable[[int], bool] | None = None,
    ) -> None:
        """`build_threads`: faiss (OpenMP) threads of one build, 0 for the machine's cores
        found idle when it starts (threads.BuildThreads); `min_rows`: below it a
        segment's index is an exact FLAT one (builder.MIN_ROWS_TO_INDEX); `owns(pchannel)`:
        one of several index nodes, building only the segments of the pchannels it owns
        (checked at every scheduling: another node's come to it when that one dies)."""
        self.owns = owns
        self.log, self.topics, self.objects, self.rc = log, topics, objects, rootcoord
        self.build_threads, self.min_rows = BuildThreads(build_threads), min_rows
        self.serdes = {
            topics.ddl: serdes.for_topic(topics.ddl),
            topics.coord: serdes.for_topic(topics.coord),
        }
        self.state = IndexState(store)
        self._dead_letter = DeadLetterWriter(log, topics.dlq, name)
        self._jobs: queue.Queue[Job | None] = queue.Queue()  # None: wakes the builder
        self._inflight: set[tuple[int, int]] = set()
        self._failed: dict[tuple[int, int], str] = {}
        self._changed = threading.Condition()
        self.name = name
        self._fences = FenceMemo()  # the recovery reads' ends: the consumer starts there
        self._source = RecordSource(
            log,
            lambda: {t: {0: self.state.position(t)} for t in self.serdes},
            resume_fence(log, objects, self._fences),
        )
        self._loop = ProcessorLoop(self, tick_s=RESCHEDULE_S, join_timeout_s=60)
        self._stop = self._loop.stopping
        self._builder = threading.Thread(
            target=self._work_loop, name=f"{name}-builder", daemon=True
        )

    # -- lifecycle -----------------------------------------------------------------------------
    def recover(self, timeout: float = 60.0) -> None:
        """Applies ddl then coord (the snapshot first if its records below the stored position
        were deleted) from the stored positions to their ends, deletes orphaned index files,
        and schedules every build not reported (the replay's commits synced once, at its
        end)."""
        with self.state.store.synced_once():
            for topic in (self.topics.ddl, self.topics.coord):
                position = self.state.position(topic)
                records = read_from(self.log, topic, self.objects, position, timeout, self._fences)
                for rec in records:
                    self._consume(topic, rec)
        if self.owns is None:  # several: another node's build may be under way
            self._delete_orphans()
        self._schedule()

    def start(self) -> None:
        """Starts the consumer (the shared loop) and the build worker."""
        self._loop.start()
        self._builder.start()

    def stop_soon(self) -> None:
        """Asks both threads to end (a build under way finishes first), without waiting."""
        self._loop.stop_soon()
        self._jobs.put(None)  # the builder waiting for a job sees the stop at once

    def stop(self) -> None:
        """Stops both threads (a build under way finishes first; it is not reported if the
        process ends before its SegmentIndexed is appended)."""
        self.stop_soon()
        self._loop.stop()
        if self._builder.is_alive():
            self._builder.join(timeout=60)

    def close(self) -> None:
        self.stop()

    # -- progress (IndexNodeService) -----------------------------------------------------------
    def progress(self, collection_id: int, index_id: int) -> IndexProgress:
        """Returns the index's progress as Milvus's describe_index computes it: total_rows =
        rows of the collection's Flushed segments, indexed_rows = rows of those with a
        SegmentIndexed for the index, pending = the rest; Failed (reasons "segment: reason;")
        if a build failed, else Finished once nothing is pending. An unknown index (or one
        of a type nothing builds) reads as Finished, all rows indexed."""
        with self.state.lock:
            segs = [
                s
                for s in self.state.segments.values()
                if s.collection_id == collection_id and s.flushed
            ]
            total = sum(s.num_rows for s in segs)
            index = self.state.indexes.get((collection_id, index_id))
            if index is None:
                return IndexProgress(0, 0, 0, FINISHED)
            if not buildable(index):
                every = tuple(s.segment_id for s in segs)
                return IndexProgress(total, total, 0, FINISHED, built=every)
            done = [s for s in segs if self.state.built.get((s.segment_id, index_id))]
            failed = [(s.segment_id, self._failed.get((s.segment_id, index_id))) for s in segs]
        indexed = sum(s.num_rows for s in done)
        reasons = "".join(f"{sid}: {why};" for sid, why in failed if why)
        state = FAILED if reasons else FINISHED if indexed == total else IN_PROGRESS
        built = tuple(s.segment_id for s in done)
        return IndexProgress(indexed, total, total - indexed, state, reasons, built)

    def wait_finished(self, collection_id: int, index_id: int, timeout: float) -> IndexProgress:
        """Returns the progress once the node consumed everything appended to ddl and coord
        before the call (an end marker on each: an index or flush just made counts) and the
        index is Finished or Failed. Raises IndexBuildTimeout, LogError."""
        deadline = time.monotonic() + timeout
        marks = self._end_markers()
        with self._changed:
            while True:
                progress = self.progress(collection_id, index_id)
                caught_up = all(self.state.position(t) > at for t, at in marks.items())
                if caught_up and progress.state != IN_PROGRESS:
                    return progress
                left = deadline - time.monotonic()
                if left <= 0:
                    raise IndexBuildTimeout(collection_id, index_id, progress, timeout)
                self._changed.wait(min(left, 0.2))

    def _end_markers(self) -> dict[str, int]:
        """Appends an end marker (a TimeTick with ts 0, which every consumer ignores) to ddl
        and coord; returns their offsets."""
        marks = {}
        for topic, serde in self.serdes.items():
            marker = serde.encode(Event("TimeTick", 0, {"source": END_MARKER_SOURCE}))
            marks[topic] = self.log.append(topic, [Append(0, marker)])[0]
        return marks

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Returns {(topic, partition): next offset} of `ddl` and `coord` (stored ones)."""
        return {(t, 0): self.state.position(t) for t in (self.topics.ddl, self.topics.coord)}

    # -- consuming -----------------------------------------------------------------------------
    def open(self) -> None:
        """Opens readers of ddl and coord at the stored positions."""
        self._source.open()

    def step(self) -> bool:
        """Consumes the ddl and coord records there are (each committed with its position),
        then schedules the builds they call for."""
        got, topics = False, self._source.topics()
        wait = self._loop.idle_wait_s / max(1, len(topics))  # a record waits out the others'
        for topic in topics:
            if self._stop.is_set():  # closing: the next topic's wait would only delay it
                break
            for rec in self._source.poll(topic, 1000, wait):
                self._consume(topic, rec)
                got = True
        if got:
            self._schedule()
        return got

    def tick(self) -> None:
        """Schedules builds again (a transient failure's build is retried)."""
        self._schedule()

    def reset(self) -> None:
        self._source.reset()

    def _consume(self, topic: str, rec: Record) -> None:
        """Applies one record; its effects happen before its position is committed. An
        undecodable record is skipped (its owner, rootcoord or datacoord, dead-letters it)
        and its position committed."""
        event = decode_or_dead_letter(rec, self.serdes[topic], None)
        self.state.apply(topic, rec.offset, event, self._effects)
        if event is not None and event.type == "SegmentIndexed":
            self._inflight.discard((event.body["segment_id"], event.body["index_id"]))
        with self._changed:
            self._changed.notify_all()

    def _effects(self, fx: Effects) -> None:
        """Appends the SegmentIndexesDropped events and deletes the files `fx` calls for."""
        if fx.drops:
            serde = self.serdes[self.topics.coord]
            events = [
                Event("SegmentIndexesDropped", self.rc.now(), b, b["collection_id"])
                for b in fx.drops
            ]
            records = [Append(0, serde.encode(e), serde.key(e)) for e in events]
            self.log.append(self.topics.coord, records)
        for index_file in fx.files:
            delete_build(self.objects, index_file)
        for cid in fx.folders:
            for path in self.objects.list(collection_folder(cid)):
                self.objects.delete(path)

    def _delete_orphans(self) -> None:
        """Deletes index files of known collections that no recorded build names."""
        with self.state.lock:
            cids = {s.collection_id for s in self.state.segments.values()}
            cids |= {cid for cid, _ in self.state.indexes} | self.state.dropped
        referenced = self.state.referenced()
        for cid in sorted(cids):
            for path in self.objects.list(collection_folder(cid)):
                if path not in referenced:
                    log.info("deleting orphaned index file %s", path)
                    self.objects.delete(path)

    def _schedule(self) -> None:
        """Queues every (Flushed segment, vector or scalar index of its collection) pair with
        no SegmentIndexed, none under way and no failure."""
        st = self.state
        with st.lock:
            for (cid, iid), index in st.indexes.items():
                if not buildable(index):
                    continue
                for seg in st.segments.values():
                    key = (seg.segment_id, iid)
                    if seg.collection_id != cid or not seg.flushed or seg.num_rows <= 0:
                        continue
                    if not self._mine(seg):
                        continue
                    if key in st.built or key in self._inflight or key in self._failed:
                        continue
                    self._inflight.add(key)
                    self._jobs.put(Job(replace(seg, binlogs=dict(seg.binlogs)), dict(index)))

    def _mine(self, seg: SegmentRecord) -> bool:
        """Whether this node builds a segment's indexes (always, unless one of several)."""
        if self.owns is None:
            return True
        p = pchannel_of(seg.vchannel)
        return p is not None and self.owns(p)

    # -- building ------------------------------------------------------------------------------
    def _work_loop(self) -> None:
        faiss.omp_set_num_threads(1)  # this thread's OpenMP regions only; see _build
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            if job is None or not self._still_wanted(job):
                continue
            try:
                self._run(job)
            except CrashPointReached as exc:  # a test's stand-in for the process dying here
                log.warning("index node builder stops: %s", exc)
                return

    def _run(self, job: Job) -> None:
        """Builds and reports one job; marks it Failed if it is at fault, else retries later."""
        try:
            self._build(job)
        except CrashPointReached:
            raise
        except ObjectNotFound as exc:
            if self._gone_after_catching_up(job):
                return
            self._fail(job, f"{type(exc).__name__}: {exc}")
        except (*TRANSIENT, StorageError) as exc:
            log.warning("index build of segment %d will be retried: %s", job.key[0], exc)
            self.failure = exc
            self._stop.wait(0.5)
            self._inflight.discard(job.key)
        except Exception as exc:  # corrupt binlogs, parameters the vectors do not fit
            self._fail(job, f"{type(exc).__name__}: {exc}")

    def _still_wanted(self, job: Job) -> bool:
        """Returns whether a dequeued job's segment and index still exist; if not (a
        compaction merged the segment, or it or the index was dropped since it was queued) the
        job is skipped quietly."""
        seg = job.segment
        if self.state.live(seg.collection_id, job.key[1], seg.segment_id):
            return True
        log.info("%s: skipping index %d of segment %d: gone", self.name, job.key[1], job.key[0])
        self._inflight.discard(job.key)
        return False

    def _gone_after_catching_up(self, job: Job) -> bool:
        """Returns whether a job whose binlogs are missing is of a segment (or index) that is
        gone once the consumer applied every coord record there is now: a compaction merged
        it (its binlogs deleted once the merge committed) or it was dropped. Then it is
        skipped quietly (as is any job once the node is stopping); else (or if the consumer
        does not catch up in time) it failed. Coord's end is settled past the high watermark
        (on Tansu it leaves out the rest of the last record batch: streams.scan)."""
        try:
            coord = self.topics.coord
            end = settled_end(self.log, coord, 0, self.log.end_offsets(coord)[0])
        except LogError as exc:
            log.warning("could not read the end of %s: %s", self.topics.coord, exc)
            end = self.state.position(self.topics.coord)
        deadline = time.monotonic() + CATCH_UP_S
        with self._changed:
            while self.state.position(self.topics.coord) < end and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 0.2))
        if self._stop.is_set():  # not built, not failed: redone after the restart
            self._inflight.discard(job.key)
            return True
        if self.state.position(self.topics.coord) < end:
            return False
        return not self._still_wanted(job)

    def _build(self, job: Job) -> None:
        seg, index = job.segment, job.index
        if not is_vector_index(index):
            return self._build_scalar(job)
        if index["index_type"] in SPARSE_INDEXES:
            return self._build_sparse(job)
        if index["index_type"] in BINARY_INDEXES:
            return self._build_binary(job)
        spec = parse_spec(index["index_type"], index["metric_type"], index.get("params", {}))
        if seg.num_rows >= self.min_rows:  # a real index: as many cores as are idle
            faiss.omp_set_num_threads(self.build_threads.for_build())
        vectors = (self._read(p, float_vectors) for p in self._paths(seg, int(index["field_id"])))
        built = build_from_parts(vectors, seg.num_rows, spec, self.min_rows)
        row_ids = self._row_ids(seg, built.index.ntotal)
        build_id = self.rc.allocate_ids()
        paths = build_paths(seg.collection_id, seg.partition_id, seg.segment_id, build_id)
        write_index_files(self.objects, paths, built.index, row_ids)
        n = int(built.index.ntotal)
        self._report(job, build_id, paths, built.built_as, built.params, n, built.build_ms)

    def _build_scalar(self, job: Job) -> None:
        """Builds a scalar index of the job's segment (scalar.py) and reports it."""
        seg, index = job.segment, job.index
        started = time.monotonic()
        fid = int(index["field_id"])
        with self.state.lock:
            added = self.state.added.get((seg.collection_id, fid))
        logs = field_columns(seg, fid, added, lambda p: read_insert_binlog(self.objects.get(p), p))
        data, rows = build_scalar(logs, index, added.dtype if added is not None else None)
        row_ids = self._row_ids(seg, rows)
        build_id = self.rc.allocate_ids()
        files = build_paths(seg.collection_id, seg.partition_id, seg.segment_id, build_id, True)
        write_build(self.objects, files, data, row_ids)
        params = {**index.get("params", {}), "field_name": index["field_name"]}
        ms = int((time.monotonic() - started) * 1000)
        self._report(job, build_id, files, SCALAR_BUILT_AS, params, rows, ms)

    def _build_sparse(self, job: Job) -> None:
        """Builds a sparse inverted index of the job's segment (sparse.py) and reports it."""
        seg, index = job.segment, job.index
        started = time.monotonic()
        paths = self._paths(seg, int(index["field_id"]))
        logs = ((read_insert_binlog(self.objects.get(p), p), p) for p in paths)
        data, rows, params = build_sparse(logs, index.get("params", {}))
        row_ids = self._row_ids(seg, rows)
        build_id = self.rc.allocate_ids()
        files = build_paths(seg.collection_id, seg.partition_id, seg.segment_id, build_id)
        write_build(self.objects, files, data, row_ids)
        ms = int((time.monotonic() - started) * 1000)
        self._report(job, build_id, files, index["index_type"], params, rows, ms)

    def _build_binary(self, job: Job) -> None:
        """Builds a faiss binary index of the job's segment (sparse.py) and reports it."""
        seg, index = job.segment, job.index
        started = time.monotonic()
        paths = self._paths(seg, int(index["field_id"]))
        logs = ((read_insert_binlog(self.objects.get(p), p), p) for p in paths)
        params = index.get("params", {})
        data, rows, built, eff = build_binary(logs, index["index_type"], params, self.min_rows)
        row_ids = self._row_ids(seg, rows)
        build_id = self.rc.allocate_ids()
        files = build_paths(seg.collection_id, seg.partition_id, seg.segment_id, build_id)
        write_build(self.objects, files, data, row_ids)
        ms = int((time.monotonic() - started) * 1000)
        self._report(job, build_id, files, built, eff, rows, ms)

    def _row_ids(self, seg: SegmentRecord, rows: int) -> np.ndarray:
        """Returns the segment's row ids. Raises ValueError unless it has `rows` of them."""
        row_ids = np.concatenate([self._read(p, int64s) for p in self._paths(seg, ROW_ID_FIELD)])
        if rows != len(row_ids):
            raise ValueError(f"the binlogs hold {rows} values but {len(row_ids)} row ids")
        return row_ids

    def _report(
        self,
        job: Job,
        build_id: int,
        paths: tuple[str, str],
        built_as: str,
        params: dict[str, str],
        n: int,
        build_ms: int = 0,
    ) -> None:
        """Appends the SegmentIndexed of a build whose files are written (deletes them if
        the index or segment was dropped meanwhile)."""
        seg = job.segment
        crash_point("indexnode.build.after_files")
        if not self.state.live(seg.collection_id, job.key[1], seg.segment_id):
            delete_build(self.objects, paths[0])  # dropped while it was built
            self._inflight.discard(job.key)
            return
        body = segment_indexed(job, build_id, built_as, params, n, paths, build_ms)
        event = Event("SegmentIndexed", self.rc.now(), body, seg.collection_id, seg.vchannel)
        serde = self.serdes[self.topics.coord]
        self.log.append(self.topics.coord, [Append(0, serde.encode(event), serde.key(event))])
        log.info("%s: built index %d of segment %d (%d rows)", self.name, job.key[1], job.key[0], n)

    @staticmethod
    def _paths(seg: SegmentRecord, field_id: int) -> list[str]:
        """Returns a field's insert log paths in row order. Raises ObjectNotFound if none."""
        paths = seg.paths(field_id)
        if not paths:
            where = f"insert_log/{seg.collection_id}/{seg.partition_id}/{seg.segment_id}/{field_id}"
            raise ObjectNotFound(where, "no insert logs of the field were reported")
        return paths

    def _read(self, path: str, decode: Any) -> np.ndarray:
        """Returns one insert log's column, decoded (`float_vectors` or `int64s`)."""
        return decode(read_insert_binlog(self.objects.get(path), path), path)

    def _fail(self, job: Job, reason: str) -> None:
        """Records a failed build (progress shows it), logs it and dead-letters it."""
        sid, iid = job.key
        self._failed[job.key] = reason
        self._inflight.discard(job.key)
        log.error("index %d of segment %d failed: %s", iid, sid, reason)
        what = json.dumps({"segment_id": sid, "index_id": iid}).encode()
        rec = Record(self.topics.coord, 0, job.segment.flushed_offset, what)
        try:
            self._dead_letter(rec, f"index {iid} of segment {sid}: {reason}")
        except LogError as exc:
            log.warning("could not dead-letter the failed build of segment %d: %s", sid, exc)
        with self._changed:
            self._changed.notify_all()


def is_vector_index(index: dict[str, Any]) -> bool:
    """Returns whether an IndexCreated body is a vector index (a scalar index, AUTOINDEX on
    a scalar field too, has no metric)."""
    kinds = (*PARAMS, *SPARSE_INDEXES, *BINARY_INDEXES)
    return bool(index.get("metric_type")) and index["index_type"] in kinds


def buildable(index: dict[str, Any]) -> bool:
    """Returns whether the index node builds an IndexCreated body: a vector index, or a
    scalar index of a type Milvus defines."""
    return is_vector_index(index) or (
        not index.get("metric_type") and index["index_type"] in SCALAR_INDEXES
    )


def segment_indexed(
    job: Job,
    build_id: int,
    built_as: str,
    params: dict[str, str],
    num_rows: int,
    paths: tuple[str, str],
    build_ms: int,
) -> dict[str, Any]:
    """Returns the SegmentIndexed body of a build. `index_type` is the index's type as created
    (AUTOINDEX included); `params` are the effective build parameters, plus `built_as` (the
    faiss index actually built: HNSW for AUTOINDEX, FLAT below the minimum rows)."""
    seg, index = job.segment, job.index
    return {
        "collection_id": seg.collection_id,
        "partition_id": seg.partition_id,
        "segment_id": seg.segment_id,
        "vchannel": seg.vchannel,
        "field_id": int(index["field_id"]),
        "index_id": int(index["index_id"]),
        "index_name": index["index_name"],
        "build_id": build_id,
        "index_type": index["index_type"],
        "metric_type": index.get("metric_type") or "",
        "params": {**params, "built_as": built_as},
        "num_rows": num_rows,
        "index_file": paths[0],
        "row_id_file": paths[1],
        "build_ms": build_ms,
    }
