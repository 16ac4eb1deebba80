"""The data node's Spark engine: a Structured Streaming query feeds the one writer code path.

`datanode = "spark"` runs the same `DataNode` as the local engine (its event handling,
`SegmentWriter`, checkpoint and reports to datacoord); only where its dml records come from
changes. How records flow:

    log (embedded RocksDB / Kafka)
      -> Spark: readStream.format("vectorlog-log") (logsource.py), one task per partition
      -> with `spark_writes="executors"` (the default), in the same tasks: each RowsInserted
         reduced to its primary keys (executor_write.py); the node buffers its position,
         and Spark tasks write the segment's insert and stats binlogs when the node writes it
      -> foreachBatch, in this process: the batch's rows collected as Arrow, sorted by
         (partition, offset), handed to `FedRecords.offer`, which returns once the data node
         has applied them (backpressure: Spark plans the next batch only then)
      -> `FedRecords.poll` is the `Reader` under the DataNode's `TtMsgStream`; the DataNode's
         own loop steps as in the local engine (coord events, ticks, flushes, checkpoints go on
         between Spark batches too).

Where reading starts: the DataNode's checkpoint in its StateStore, never Spark's. Its buffers
live in memory, so only its own checkpoint says what a restart must replay. `recover()` asks
its `dml_log` for a reader at the checkpoint (`FedLog.reader` -> `FedRecords`), and the query
starts from exactly those offsets (`startingOffsets`). Spark's own checkpoint lives under
the data dir (<state dir>/datanode-spark-checkpoint), emptied before each query: the node's
checkpoint, not Spark's, says what a restart must replay (its buffers were in memory), and a
failed hand-over is kept from Spark (see `_batch`), which then commits offsets the node never
got. If the query fails, a new one starts from the offsets after the last record handed over.
`offer` checks each partition continues exactly where the previous batch ended (log offsets
are dense): a record is never skipped or handed over twice.

Opening a Client never waits for the JVM: the session starts on a background thread; until it
is up the data node sees no dml (it still follows coord). The session is shared by every job
of the process (and reused if the application created one); it is stopped when the last job
closes, and only if a job created it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from vectorlog.core import exits
from vectorlog.engines.spark.executor_write import (
    STRIPPED_SCHEMA,
    SparkRowsWriter,
    StripPlan,
    strip_batches,
)
from vectorlog.streams.batches import BATCH_HEADER
from vectorlog.streams.errors import LogClosed, LogError
from vectorlog.streams.log.base import Append, Log, Reader, Record

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"
APP_NAME = "vectorlog-datanode"
#: a failed query is started again after this long
RESTART_DELAY_S = 1.0
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


class RecordGap(LogError):
    """Spark handed over records that do not continue where the previous ones ended."""


# -- the record source the DataNode reads -------------------------------------------------------
class FedRecords:
    """A `Reader` of one topic fed by the Spark job: `poll` returns what `offer` queued."""

    def __init__(self, topic: str, positions: dict[int, int]) -> None:
        self.topic = topic
        self.start_positions = dict(positions)
        self._next = dict(positions)
        self._queue: deque[Record] = deque()
        self._cond = threading.Condition()
        self._offered = 0  # records ever queued
        self._taken = 0  # records handed out by poll
        self._done = 0  # records handed out before the consumer's latest poll: applied
        self._closed = False
        self._cancelled = False

    def resume_positions(self) -> dict[int, int]:
        """Per partition, the offset after the last record handed over."""
        with self._cond:
            return dict(self._next)

    def offer(self, records: Sequence[Record]) -> int:
        """Queues records (sorted by partition, offset) and waits until the reader's consumer
        has applied them, or until `cancel` (the job stops; what was not applied is read again
        from the data node's checkpoint after a restart). Records before a partition's next
        offset were handed over already and are dropped; returns how many were new. Raises
        RecordGap if a partition would skip an offset (nothing is queued), LogClosed if the
        reader is closed."""
        with self._cond:
            nxt, fresh = dict(self._next), list[Record]()
            for rec in records:
                if rec.partition not in nxt:
                    raise RecordGap(f"{self.topic} has no partition {rec.partition} here")
                if rec.offset < nxt[rec.partition]:
                    continue
                if rec.offset > nxt[rec.partition]:
                    raise RecordGap(
                        f"{self.topic}[{rec.partition}]: got offset {rec.offset}, "
                        f"expected {nxt[rec.partition]}"
                    )
                fresh.append(rec)
                nxt[rec.partition] = rec.offset + 1
            self._check_open()
            if self._cancelled:
                return 0
            self._next = nxt
            self._queue.extend(fresh)
            self._offered += len(fresh)
            target = self._offered
            self._cond.notify_all()
            while self._done < target and not self._cancelled:
                self._check_open()
                self._cond.wait(0.5)
        return len(fresh)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"the Spark-fed reader of {self.topic}")

    def cancel(self) -> None:
        """Makes a waiting and every later `offer` return at once (the job is stopping)."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()

    # -- Reader -------------------------------------------------------------------------------
    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        with self._cond:
            if self._closed:
                raise LogClosed(f"the Spark-fed reader of {self.topic}")
            self._done = self._taken  # the consumer is back: what it took before is applied
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            while not self._queue and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            out = [self._queue.popleft() for _ in range(min(max_records, len(self._queue)))]
            self._taken += len(out)
            return out

    def seek(self, topic: str, partition: int, offset: int) -> None:
        raise LogError(f"the Spark-fed reader of {self.topic} cannot seek")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class FedLog:
    """The `Log` a DataNode reads dml from under the Spark engine: the real log, except that
    a reader of `topic` is a `FedRecords` the job feeds (created by `DataNode.recover`)."""

    def __init__(self, log: Log, topic: str) -> None:
        self._log, self.topic = log, topic
        self.max_message_bytes = log.max_message_bytes
        self.records: FedRecords | None = None

    def create_topic(
        self,
        topic: str,
        partitions: int,
        compacted: bool = False,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
    ) -> None:
        self._log.create_topic(topic, partitions, compacted, retention_ms, retention_bytes)

    def partitions(self, topic: str) -> int:
        return self._log.partitions(topic)

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        return self._log.append(topic, records)

    def end_offsets(self, topic: str) -> dict[int, int]:
        return self._log.end_offsets(topic)

    def reader(self, topic: str, positions: dict[int, int]) -> Reader:
        if topic != self.topic:
            return self._log.reader(topic, positions)
        if self.records is not None:
            raise LogError(f"{topic} already has a Spark-fed reader")
        self.records = FedRecords(topic, positions)
        return self.records

    def close(self) -> None:
        """Closes the fed reader; the real log belongs to whoever opened it."""
        if self.records is not None:
            self.records.close()


# -- the Spark session ---------------------------------------------------------------------------
class _Shared:
    """The process's SparkSession as the jobs share it."""

    lock = threading.Lock()
    session: SparkSession | None = None
    owned = False
    users = 0


def build_session(master: str | None = None) -> SparkSession:
    """Returns a SparkSession with the data node's settings: `master` (default local[2]),
    2 shuffle partitions, UI and console progress off, JVM logs at ERROR. If a SparkContext
    is running already, Spark returns its session and the settings may not all apply."""
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    fd, log4j = tempfile.mkstemp(prefix="vectorlog-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_LOG4J)
    atexit.register(os.unlink, log4j)  # read once, when the JVM starts
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
    builder = (
        SparkSession.builder.master(master)
        .appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for name, value in os.environ.items():  # settings and test hooks reach the executors
        if name.startswith("VECTORLOG_"):
            builder = builder.config(f"spark.executorEnv.{name}", value)
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        # Python workers are this interpreter (its venv has vectorlog), not `python3` on PATH
        session.sparkContext.pythonExec = sys.executable
    return session


def acquire_session(master: str | None) -> SparkSession:
    """Returns the shared session, creating it (and owning it) if no SparkContext runs."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    with _Shared.lock:
        session = _Shared.session
        if session is None or session.sparkContext._jsc is None:
            running = SparkContext._active_spark_context is not None
            session = SparkSession.builder.getOrCreate() if running else build_session(master)
            if running and not os.environ.get("PYSPARK_PYTHON"):
                sc = session.sparkContext
                if str(sc.master).startswith("local"):
                    sc.pythonExec = sys.executable
            _Shared.session, _Shared.owned, _Shared.users = session, not running, 0
            exits.run_first()  # before PySpark's kill of the JVM it may just have started
        _Shared.users += 1
        return session


def release_session(session: SparkSession) -> None:
    """Stops the shared session when its last job releases it, if a job created it."""
    with _Shared.lock:
        if _Shared.session is not session:
            return
        _Shared.users -= 1
        if _Shared.users <= 0:
            owned, _Shared.session, _Shared.owned = _Shared.owned, None, False
            if owned:
                for query in session.streams.active:  # each stop() joins its query's thread
                    with contextlib.suppress(Exception):
                        query.stop()
                session.stop()


# -- the job -------------------------------------------------------------------------------------
class SparkDataNodeJob:
    """Runs the streaming query that feeds a DataNode's `FedRecords` from the log."""

    def __init__(
        self,
        records: FedRecords,
        log_uri: str,
        master: str | None = None,
        max_records_per_batch: int = 2000,
        name: str = "datanode",
        checkpoint_dir: str | None = None,
        writer: SparkRowsWriter | None = None,
        plan: Callable[[], StripPlan] | None = None,
        storage_uri: str | None = None,
    ) -> None:
        """`checkpoint_dir`: Spark's checkpoint location (default: a temporary folder).
        `writer`: the executors write the binlogs (executor_write.py), stripping records of
        the collections `plan()` names. `storage_uri`: checked readable by the executors of a
        cluster master before reading."""
        self.records, self.log_uri, self.master = records, log_uri, master
        self.max_records = max_records_per_batch
        self.name = name
        self.checkpoint_dir, self.writer, self.plan = checkpoint_dir, writer, plan
        self.storage_uri = storage_uri
        self.session: SparkSession | None = None
        self.session_ready = threading.Event()
        self.running = threading.Event()  # a query is running
        self.failure: BaseException | None = None
        self.batches = 0
        self.restarts = 0  # queries started again after a failure
        self._stopping = threading.Event()
        self._batch_error: BaseException | None = None  # the running query must be replaced
        self._query: StreamingQuery | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Starts the session and the query on a background thread; returns at once."""
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-spark", daemon=True)
        self._thread.start()

    def wait_running(self, timeout: float) -> bool:
        return self.running.wait(timeout)

    def _run(self) -> None:
        try:
            session = acquire_session(self.master)
        except Exception as exc:  # no JVM, a master that does not answer, ...
            log.error("the Spark data node could not start Spark; it reads nothing: %s", exc)
            self.failure = exc
            return
        try:
            from vectorlog.engines.spark.logsource import register
            from vectorlog.engines.spark.prerequisites import check_executors

            if self.storage_uri is not None:
                check_executors(session, self.storage_uri)
            if self.writer is not None:
                self._warm(session)
            self.session = session
            self.session_ready.set()
            register(session)
            while not self._stopping.is_set():
                self._run_query(session)
                if not self._stopping.is_set():
                    self._stopping.wait(RESTART_DELAY_S)
        except Exception as exc:
            log.error("the Spark data node stopped: %s", exc)
            self.failure = exc
        finally:
            self.running.clear()
            release_session(session)

    def _warm(self, session: SparkSession) -> None:
        """Starts the executors' Python workers before the first batch (see `warm_workers`);
        a failure is only logged: the batches start them then."""
        from vectorlog.engines.spark.executor_write import warm_workers

        try:
            warm_workers(session)
        except Exception as exc:
            log.warning("could not warm the Spark executors' Python workers: %s", exc)

    def _run_query(self, session: SparkSession) -> None:
        """Runs one query from the offsets after the last record handed over until it ends."""
        from vectorlog.engines.spark.logsource import NAME, offsets_json

        checkpoint = self._checkpoint_location()
        try:
            start = self.records.resume_positions()
            frame = (
                session.readStream.format(NAME)
                .option("log", self.log_uri)
                .option("topic", self.records.topic)
                .option("startingOffsets", offsets_json(start))
                .option("maxRecordsPerTrigger", str(self.max_records))
                .load()
            )
            query = (
                frame.writeStream.queryName(f"{self.name}-{os.getpid()}-{id(self)}")
                .foreachBatch(self._batch)
                .option("checkpointLocation", checkpoint)
                .start()
            )
            self._query = query
            self.running.set()
            if self._stopping.is_set():
                query.stop()
            while not query.awaitTermination(1):
                if self._batch_error is not None:
                    query.stop()
            failure = self._batch_error or query.exception()
            self._batch_error = None
            if failure is not None and not self._stopping.is_set():
                log.warning("the Spark data node's query failed, restarting it: %s", failure)
                self.failure = failure
                self.restarts += 1
        except Exception as exc:
            if self._stopping.is_set():
                return
            log.warning("the Spark data node's query failed, restarting it: %s", exc)
            self.failure = exc
            self.restarts += 1
        finally:
            self.running.clear()
            self._query = None
            if self.checkpoint_dir is None:
                shutil.rmtree(checkpoint, ignore_errors=True)

    def _checkpoint_location(self) -> str:
        """Returns Spark's checkpoint location: `checkpoint_dir`, emptied before each query
        (the data node's checkpoint says where reading starts: its buffers were in memory;
        and a failed hand-over is not raised into Spark, so Spark commits batches the node
        never got); else a temporary folder."""
        if self.checkpoint_dir is None:
            return tempfile.mkdtemp(prefix="vectorlog-spark-checkpoint-")
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        return self.checkpoint_dir

    def _batch(self, frame: DataFrame, batch_id: int) -> None:
        """foreachBatch: hands the batch's records to the data node, in (partition, offset)
        order, and returns once it has applied them.

        It never raises into Spark: Spark 4 matches the whole message of a Python error
        against a backtracking regex (StreamExecution.isInterruptionException), and with a
        long traceback the stream thread died of a StackOverflowError in java.util.regex here
        instead of failing the query. A failed batch is kept instead, the monitor
        stops the query and starts another from the offsets after the last record handed
        over; the batches Spark runs until then hand over nothing."""
        if self._stopping.is_set() or self._batch_error is not None:
            return
        try:
            table = self._collect(frame)
            if table.num_rows:
                table = table.sort_by([("partition", "ascending"), ("offset", "ascending")])
                names = ("partition", "offset", "key", "value", "batch")
                cols = [table.column(c).to_pylist() for c in names]
                topic = self.records.topic
                batch = [
                    Record(topic, p, o, v, k, ((BATCH_HEADER, b),) if b is not None else ())
                    for p, o, k, v, b in zip(*cols, strict=True)
                ]
                self.records.offer(batch)
        except Exception as exc:
            if not self._stopping.is_set():  # else: the query's own interruption
                self._batch_error = exc
            return
        self.batches += 1
        self.failure = None

    def _collect(self, frame: DataFrame) -> pa.Table:
        """Returns the batch's records on the driver; with a writer, stripped on the
        executors first (the stripped ones noted for the data node)."""
        if self.writer is None or self.plan is None:
            return frame.toArrow()
        strip = partial(strip_batches, self.plan(), self.records.topic, self.writer.url)
        table = frame.mapInArrow(strip, STRIPPED_SCHEMA).toArrow()
        flags = table.column("stripped").to_pylist()
        if any(flags):
            parts, offsets = table.column("partition").to_pylist(), table.column("offset")
            by_p: dict[int, list[int]] = {}
            for p, o, f in zip(parts, offsets.to_pylist(), flags, strict=True):
                if f:
                    by_p.setdefault(p, []).append(o)
            for p, found in by_p.items():
                self.writer.note_stripped(p, found)
        return table

    def close(self, timeout: float = 60.0) -> None:
        """Stops the query and waits for the thread (the session is released by it)."""
        self._stopping.set()
        self.records.cancel()
        query = self._query
        if query is not None:
            try:
                query.stop()
            except Exception as exc:  # it may be ending on its own
                log.debug("stopping the Spark data node's query: %s", exc)
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self) -> None:
        self.close()

    def status(self) -> dict[str, Any]:
        """What the job is doing, for operators and tests."""
        return {
            "running": self.running.is_set(),
            "batches": self.batches,
            "restarts": self.restarts,
            "failure": repr(self.failure) if self.failure else None,
            "resume": self.records.resume_positions(),
        }
