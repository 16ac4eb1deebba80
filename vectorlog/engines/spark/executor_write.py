"""The Spark data node's executors: they decode the dml records and write the binlogs.

Two steps run on the executors, the driver's data node keeping every decision and commit:

1. In each micro-batch (`strip_batches`, chained after the log source's read in the same
   tasks): every RowsInserted of a collection the node knows, with all its fields, loses all
   columns but its primary keys before it reaches the driver. The driver's data node indexes
   the keys and buffers the record's position (vectorlog/processors.datanode.service.py).
2. When the node writes segments (`SparkRowsWriter.write_many`: every segment one step of the
   node writes, in one Spark job): each segment's buffered records are split into parts of
   about ROWS_PER_TASK rows, one task each, run in parallel; a task reads its
   records back from the log, decodes them, and writes the part's insert logs and stats log
   straight to the storage root with log ids the driver allocated, returning only the
   Binlog records. The driver then writes the delta and compound stats logs and commits
   (BinlogPathsSaved, checkpoint) as the local engine does.

A part's paths depend only on its ids, so a retried task (an executor lost mid-write)
overwrites its failed attempt's files instead of adding rows; if the job fails, the driver
deletes every path the parts could have written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from vectorlog.core.faults import pause_point
from vectorlog.core.model import ROW_ID_FIELD, TIMESTAMP_FIELD, CollectionSchema
from vectorlog.processors.datanode.service import RefBuffer, RowsRef
from vectorlog.schemas.columns import decode_column, with_dynamic
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage import InsertBuffer, PyArrowObjectStore, SegmentRef, SegmentWriter, paths
from vectorlog.streams.msgstream import StreamPosition
from vectorlog.streams.topics import Serdes

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ROWS_PER_TASK = 50_000
#: a write is split into at least one part per executor core while parts keep this many rows
MIN_ROWS_PER_PART = 2_000
#: a segment write's Spark job is cancelled (and retried by the data node) after this long
JOB_TIMEOUT_S = 900.0
#: one segment's write: where, its schema and its buffered rows
Write = tuple[SegmentRef, CollectionSchema, RefBuffer]
#: {collection id: (primary key field id, ids of the fields a record must carry)}
StripPlan = dict[int, tuple[int, frozenset[int]]]


def _serde(topic: str, url: str | None) -> EventSerde:
    return Serdes(url).for_topic(topic) if url else EventSerde()


# -- step 1: the micro-batch --------------------------------------------------------------------
def strip_plan(schemas: dict[int, CollectionSchema]) -> StripPlan:
    """Returns what `strip_batches` needs of the node's collections."""
    out: StripPlan = {}
    for cid, schema in list(schemas.items()):
        dyn = schema.dynamic.field_id if schema.dynamic is not None else None
        need = frozenset(f.field_id for f in schema.fields if f.field_id != dyn)
        out[cid] = (schema.primary.field_id, need)
    return out


def strip_batches(
    plan: StripPlan, topic: str, url: str | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow: the log source's batches with each complete RowsInserted of a planned
    collection reduced to its primary keys, and a `stripped` column saying which were."""
    import pyarrow as pa

    serde = _serde(topic, url)
    for batch in batches:
        values = batch.column("value").to_pylist()
        flags = [False] * len(values)
        for i, value in enumerate(values):
            stripped = keys_only(serde, plan, value)
            if stripped is not None:
                values[i], flags[i] = stripped, True
        cols = [batch.column(n) for n in ("partition", "offset", "key")]
        cols += [pa.array(values, pa.binary()), batch.column("batch"), pa.array(flags)]
        yield pa.RecordBatch.from_arrays(cols, names=[*STRIPPED_NAMES])


STRIPPED_NAMES = ("partition", "offset", "key", "value", "batch", "stripped")
STRIPPED_SCHEMA = (
    "partition int, offset long, key binary, value binary, batch binary, stripped boolean"
)


def keys_only(serde: EventSerde, plan: StripPlan, value: bytes) -> bytes | None:
    """Returns a complete RowsInserted of a planned collection re-encoded with only its
    primary keys, or None to pass the record whole (another event, or not decodable)."""
    try:
        event = serde.decode(value)
    except Exception:
        return None  # the driver dead-letters it
    return serde.encode(event) if strip_event(plan, event) else None


def strip_event(plan: StripPlan, event: Event) -> bool:
    """Reduces a complete RowsInserted of a planned collection to its primary keys, in
    place; returns whether it did (False: another event, or an incomplete one)."""
    if event.type != "RowsInserted" or event.body["collection_id"] not in plan:
        return False
    pk, need = plan[event.body["collection_id"]]
    columns = event.body["columns"]
    if not need <= {c["field_id"] for c in columns}:
        return False  # incomplete: the driver refuses it whole
    event.body["columns"] = [c for c in columns if c["field_id"] == pk]
    return True


# -- the Python workers -------------------------------------------------------------------------
def warm_workers(session: SparkSession) -> list[int]:
    """Runs one task per executor core that imports what the data node's tasks run, so the
    first micro-batch and the first segment write find Python workers started and their
    modules imported (Spark reuses a worker for the next task); returns the workers' pids."""
    sc = session.sparkContext
    n = max(sc.defaultParallelism, 1)
    return list(sc.parallelize(range(n), n).map(_import_task_modules).collect())


def _import_task_modules(_: int) -> int:
    """A task of `warm_workers`: this module (decoders, writers) is imported to unpickle it."""
    import vectorlog.engines.spark.logsource  # noqa: F401 (the read of every micro-batch)

    return os.getpid()


# -- step 2: the segment writes -----------------------------------------------------------------
@dataclass(frozen=True)
class PartTask:
    """One part of a segment write: its records, and the first of its log ids."""

    log_uri: str
    topic: str
    schema_registry_url: str | None
    storage_uri: str
    ref: SegmentRef
    schema: CollectionSchema
    rows: tuple[RowsRef, ...]
    first_id: int
    write_ts: int

    def paths(self) -> list[str]:
        """Every path the part may write."""
        r, ids = self.ref, self._field_ids()
        out = [
            paths.insert_log_path(
                r.collection_id, r.partition_id, r.segment_id, f, self.first_id + i
            )
            for i, f in enumerate(ids)
        ]
        pk = self.schema.primary.field_id
        stats_id = self.first_id + len(ids)
        out.append(
            paths.stats_log_path(r.collection_id, r.partition_id, r.segment_id, pk, stats_id)
        )
        return out

    def _field_ids(self) -> list[int]:
        return [ROW_ID_FIELD, TIMESTAMP_FIELD, *(f.field_id for f in self.schema.fields)]


def ids_per_part(schema: CollectionSchema) -> int:
    """Log ids one part uses: row id, ts, each field, and its stats log."""
    return len(schema.fields) + 3


def write_part(task: PartTask) -> dict[str, Any]:
    """A task: reads the part's records, decodes them and writes its insert and stats logs;
    returns its BinlogPathsSaved body (and `worker`, the executor's work folder, and
    `seconds`, what its steps took: read and decode, write)."""
    started = time.perf_counter()
    rows = InsertBuffer(StreamPosition())
    for ref, event in _events(task):
        b = event.body
        columns = with_dynamic(task.schema, b["columns"], ref.num_rows)
        by_id = {c["field_id"]: decode_column(c["column"], ref.num_rows) for c in columns}
        fields = {f.field_id: by_id[f.field_id] for f in task.schema.fields}
        rows.append(ref.first_row_id, ref.ts, fields, ref.num_rows)
    decoded = time.perf_counter()
    ids = iter(range(task.first_id, task.first_id + ids_per_part(task.schema)))
    store = PyArrowObjectStore(task.storage_uri)
    writer = SegmentWriter(store, lambda n: _take(ids, n), lambda: task.write_ts)
    body = writer.write(task.ref, task.schema, rows, None, False)
    if _first_attempt():
        pause_point("spark.write_part.after_files")  # a test kills the worker here
    body["worker"] = os.getcwd()  # a standalone executor runs in its worker's work folder
    body["seconds"] = {"read": decoded - started, "write": time.perf_counter() - decoded}
    return body


def _first_attempt() -> bool:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx is not None and ctx.attemptNumber() == 0 and ctx.partitionId() == 0


def _take(ids: Iterator[int], n: int) -> int:
    got = [next(ids) for _ in range(n)]
    return got[0]


def _events(task: PartTask) -> Iterator[tuple[RowsRef, Any]]:
    """Yields each ref with its decoded record, in the refs' order."""
    from vectorlog.engines.spark.logsource import LogPartition, read_range

    serde = _serde(task.topic, task.schema_registry_url)
    found: dict[tuple[int, int], bytes] = {}
    by_p: dict[int, set[int]] = {}
    for r in task.rows:
        by_p.setdefault(r.pchannel, set()).add(r.offset)
    for p, offsets in sorted(by_p.items()):
        part = LogPartition(p, min(offsets), max(offsets) + 1)
        for rec in read_range(task.log_uri, task.topic, part):
            if rec.offset in offsets:
                found[(p, rec.offset)] = rec.value
    for r in task.rows:
        value = found.get((r.pchannel, r.offset))
        if value is None:
            raise LookupError(f"{task.topic}[{r.pchannel}] has no record at {r.offset}")
        yield r, serde.decode(value)


class SparkRowsWriter:
    """The data node's RowsWriter on Spark: segment writes run as tasks (see the module)."""

    def __init__(
        self,
        log_uri: str,
        topic: str,
        storage_uri: str,
        allocate_ids: Callable[[int], int],
        now: Callable[[], int],
        session: Callable[[], SparkSession],
        schema_registry_url: str | None = None,
        rows_per_task: int = ROWS_PER_TASK,
    ) -> None:
        self.log_uri, self.topic, self.storage_uri = log_uri, topic, storage_uri
        self.allocate_ids, self.now, self.session = allocate_ids, now, session
        self.url, self.rows_per_task = schema_registry_url, rows_per_task
        self.job_timeout_s = JOB_TIMEOUT_S
        self._stripped: dict[int, set[int]] = {}
        self._lock = threading.Lock()
        self.parts_written = 0
        self.workers: set[str] = set()  # the executors' work folders that wrote parts
        #: seconds the parts' tasks spent reading and decoding their records, and writing
        self.task_seconds = {"read": 0.0, "write": 0.0}
        #: per pchannel, the first dml offset not yet applied by the data node
        self.applied: Callable[[], dict[int, int]] = dict

    # -- what the micro-batches stripped ---------------------------------------------------
    def note_stripped(self, pchannel: int, offsets: list[int]) -> None:
        """Marks records handed over stripped; drops the marks of records applied already."""
        applied = self.applied()
        with self._lock:
            for p, below in applied.items():
                if p in self._stripped:
                    self._stripped[p] = {o for o in self._stripped[p] if o >= below}
            self._stripped.setdefault(pchannel, set()).update(offsets)

    def stripped(self, pchannel: int, offset: int) -> bool:
        with self._lock:
            return offset in self._stripped.get(pchannel, ())

    # -- the writes ------------------------------------------------------------------------
    def write_rows(
        self, ref: SegmentRef, schema: CollectionSchema, rows: RefBuffer
    ) -> list[dict[str, Any]]:
        """Writes the buffered rows as parts on the executors; returns their bodies in row
        order. Raises what a task raised (after its retries), having deleted every part."""
        return self.write_many([(ref, schema, rows)])[0]

    def write_many(self, writes: list[Write]) -> list[list[dict[str, Any]]]:
        """Writes several segments' buffered rows in one Spark job, every part a task (they
        run in parallel); returns each segment's part bodies in row order. Raises what a task
        raised (after its retries), having deleted every part of every segment."""
        sc = self.session().sparkContext
        size = self.part_rows(sum(rows.num_rows for _, _, rows in writes), sc.defaultParallelism)
        per = [self._tasks(ref, schema, rows, size) for ref, schema, rows in writes]
        tasks = [t for group in per for t in group]
        if not tasks:
            return [[] for _ in writes]
        first = tasks[0]
        group = f"vectorlog-write-{first.ref.segment_id}-{first.first_id}"
        # a cluster that lost its master or every worker never fails the job: it waits for
        # resources; cancelled, the write fails and the data node's loop retries it
        watchdog = threading.Timer(self.job_timeout_s, sc.cancelJobGroup, (group,))
        try:
            ids = sorted({t.ref.segment_id for t in tasks})
            sc.setJobGroup(group, f"vectorlog: write segments {ids}")
            watchdog.start()
            bodies = sc.parallelize(tasks, len(tasks)).map(write_part).collect()
        except BaseException:
            self._delete(tasks)
            raise
        finally:
            watchdog.cancel()
        for body in bodies:
            self.workers.add(body.pop("worker"))
            for step, took in body.pop("seconds").items():
                self.task_seconds[step] += took
        self.parts_written += len(bodies)
        out, at = [], 0
        for group_tasks in per:
            out.append(list(bodies[at : at + len(group_tasks)]))
            at += len(group_tasks)
        return out

    def part_rows(self, total: int, cores: int) -> int:
        """Returns the rows per part of a job writing `total` rows: `rows_per_task`, or less
        so that every one of `cores` executor cores gets a part (parts of at least
        MIN_ROWS_PER_PART rows)."""
        even = -(-total // max(cores, 1))
        return max(1, min(self.rows_per_task, max(even, MIN_ROWS_PER_PART)))

    def _tasks(
        self, ref: SegmentRef, schema: CollectionSchema, rows: RefBuffer, size: int
    ) -> list[PartTask]:
        if not rows.refs:
            return []
        groups: list[list[RowsRef]] = [[]]
        n = 0
        for r in rows.refs:
            if n >= size:
                groups.append([])
                n = 0
            groups[-1].append(r)
            n += r.num_rows
        per = ids_per_part(schema)
        first = self.allocate_ids(per * len(groups))
        now = self.now()
        make = partial(PartTask, self.log_uri, self.topic, self.url, self.storage_uri, ref, schema)
        return [make(tuple(g), first + i * per, now) for i, g in enumerate(groups)]

    def _delete(self, tasks: list[PartTask]) -> None:
        store = PyArrowObjectStore(self.storage_uri)
        for task in tasks:
            for path in task.paths():
                with contextlib.suppress(Exception):  # absent, or the store fails: recovery
                    store.delete(path)
