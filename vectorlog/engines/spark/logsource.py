"""A PySpark data source over the vectorlog log (`pyspark.sql.datasource`, streaming reader).

Spark's Kafka connector jar cannot be installed here (DESIGN.md s.8), and the embedded log is
no Kafka at all, so Spark reads topics through this Python data source, built on the same log
backends:

    spark.dataSource.register(LogDataSource)
    df = (spark.readStream.format("vectorlog-log")
          .option("log", "/data/log")              # an embedded log directory, or kafka://h:p
          .option("topic", "vectorlog.dml")
          .option("startingOffsets", '{"0": 120, "1": 0}')   # next offset per partition
          .load())                         # rows: partition, offset, key, value, batch

Partitions are the topic's partitions; a streaming offset is {"<partition>": next offset} (a
JSON dict); a micro-batch [start, end) of a partition is one Spark task, and `read` yields
exactly the records of those offsets, so consecutive batches neither skip nor repeat a record.

Where the end of a partition is (`latestOffset`, on the driver in Spark's source runner process):
- embedded: a RocksDB secondary instance of the log (the main process holds the lock) caught
  up with the primary; its last key + 1 (`streams/log/secondary.py`);
- Kafka: never the high watermark (Tansu's lags the real end by a whole record batch, and does
  not catch up until another append). A consumer owned by the reader reads the partitions
  ahead and the end is 1 + the last offset it has *seen*. It may lag what was appended a
  moment ago; the next batch picks that up. The records' values are read twice (here and by
  the task), which costs little next to decoding them.
Options: `log`, `topic` (required); `startingOffsets` (JSON, default every partition from 0);
`maxRecordsPerTrigger` (default 2000: a backlog after a restart is read in batches of bounded
size); `pollMs` (default 250: how long `latestOffset` waits for a record when it has none new;
it returns as soon as one is there).
"""

from __future__ import annotations

import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from vectorlog.core.errors import InvalidArgument
from vectorlog.streams.batches import BATCH_HEADER
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Record
from vectorlog.streams.log.secondary import EmbeddedFollower

NAME = "vectorlog-log"
SCHEMA = StructType(
    [
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), False),
        StructField("batch", BinaryType(), True),  # the record's BATCH_HEADER (streams.batches)
    ]
)
KAFKA_PREFIX = "kafka://"
DEFAULT_MAX_RECORDS = 2000
DEFAULT_POLL_MS = 250
#: a task waits this long for records its batch's offsets promise before failing the batch
READ_TIMEOUT_S = 60.0
_ROWS_PER_ARROW_BATCH = 256


class LogSourceError(InvalidArgument):
    """The data source's options are wrong (names the option)."""


@dataclass(frozen=True)
class LogPartition(InputPartition):
    """The records of one log partition with offsets [start, end)."""

    partition: int
    start: int
    end: int


def offsets_json(offsets: dict[int, int]) -> str:
    """Returns the `startingOffsets` option for {partition: next offset}."""
    return json.dumps({str(p): int(o) for p, o in sorted(offsets.items())})


class LogDataSource(DataSource):
    """`spark.readStream.format("vectorlog-log")`: a topic of an embedded or Kafka log."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> LogStreamReader:
        return LogStreamReader(dict(self.options))


def register(spark: Any) -> None:
    """Registers the data source with a SparkSession (idempotent)."""
    spark.dataSource.register(LogDataSource)


class LogStreamReader(DataSourceStreamReader):
    """Plans micro-batches over a topic's partitions and reads them from the log."""

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        self.log, self.topic = _required(opts, "log"), _required(opts, "topic")
        self.max_records = _int_option(opts, "maxrecordspertrigger", DEFAULT_MAX_RECORDS)
        self.poll_s = _int_option(opts, "pollms", DEFAULT_POLL_MS) / 1000
        self.start = _offsets_option(opts, "startingoffsets")
        self._ends: _Ends | None = None

    # -- driver side (Spark's Python source runner) ------------------------------------------
    def _tail(self) -> _Ends:
        if self._ends is None:
            self._ends = _open_ends(self.log, self.topic, self.start)
        return self._ends

    def initialOffset(self) -> dict[str, int]:
        n = self._tail().partitions
        return {str(p): self.start.get(p, 0) for p in range(n)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        ends = self._tail().ends(self.poll_s, {int(p): int(o) for p, o in start.items()})
        first = {p: int(start.get(str(p), 0)) for p in ends}
        if isinstance(limit, ReadAllAvailable) or not isinstance(limit, ReadMaxRows):
            return {str(p): max(e, first[p]) for p, e in ends.items()}
        cap = max(1, math.ceil(limit.max_rows / max(1, len(ends))))
        return {str(p): max(first[p], min(e, first[p] + cap)) for p, e in ends.items()}

    def reportLatestOffset(self) -> dict[str, int] | None:
        if self._ends is None:
            return None
        return {str(p): e for p, e in self._ends.known.items()}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        out: list[InputPartition] = []
        for key, stop in sorted(end.items(), key=lambda kv: int(kv[0])):
            begin = int(start.get(key, self.start.get(int(key), 0)))
            if int(stop) > begin:
                out.append(LogPartition(int(key), begin, int(stop)))
        return out

    def commit(self, end: dict[str, int]) -> None:
        """Nothing: the data node's own checkpoint is the truth, never Spark's."""

    def stop(self) -> None:
        if self._ends is not None:
            self._ends.close()
            self._ends = None

    # -- executor side -----------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LogPartition)
        rows = read_range(self.log, self.topic, partition)
        yield from _arrow_batches(rows)


def _offsets_option(opts: dict[str, str], name: str) -> dict[int, int]:
    """Returns an offsets option ({"<partition>": offset} JSON) as {partition: offset}."""
    try:
        raw = json.loads(opts.get(name) or "{}")
        return {int(p): int(o) for p, o in raw.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise LogSourceError(f"option {name} is not a JSON object of offsets: {exc}") from exc


# -- finding the ends ---------------------------------------------------------------------------
class _Ends(ABC):
    """Per partition, 1 + the last offset known to exist."""

    partitions: int
    known: dict[int, int]

    @abstractmethod
    def ends(self, wait: float, start: dict[int, int]) -> dict[int, int]: ...

    def close(self) -> None:  # noqa: B027 - nothing to release unless a subclass says so
        return None


class _EmbeddedEnds(_Ends):
    def __init__(self, path: str, topic: str) -> None:
        self.topic = topic
        self.follower = EmbeddedFollower(path)
        self.partitions = self.follower.partitions(topic)
        self.known = {p: 0 for p in range(self.partitions)}

    def ends(self, wait: float, start: dict[int, int]) -> dict[int, int]:
        deadline, pause = time.monotonic() + wait, 0.005
        while True:
            self.follower.catch_up()
            grew = False
            for p in range(self.partitions):
                end = self.follower.end(self.topic, p)
                grew = grew or end > max(self.known[p], start.get(p, 0))
                self.known[p] = max(self.known[p], end)
            left = deadline - time.monotonic()
            if grew or left <= 0:
                return dict(self.known)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.04)  # idle: catch up less often (each costs ~1 ms)

    def close(self) -> None:
        self.follower.close()


class _KafkaEnds(_Ends):
    """A consumer of its own reads ahead from the start offsets; ends are what it has seen."""

    def __init__(self, bootstrap: str, topic: str, start: dict[int, int]) -> None:
        from vectorlog.streams.log.kafka import KafkaReader

        consumer = kafka_consumer(bootstrap)
        self.partitions = _kafka_partitions(consumer, topic)
        self.known = {p: start.get(p, 0) for p in range(self.partitions)}
        self.reader = KafkaReader(consumer, topic, dict(self.known))

    def ends(self, wait: float, start: dict[int, int]) -> dict[int, int]:
        got = self.reader.poll(10_000, wait)
        while got:
            for rec in got:
                self.known[rec.partition] = max(self.known[rec.partition], rec.offset + 1)
            got = self.reader.poll(10_000, 0) if len(got) >= 10_000 else []
        return dict(self.known)

    def close(self) -> None:
        self.reader.close()


def _open_ends(log: str, topic: str, start: dict[int, int]) -> _Ends:
    if log.startswith(KAFKA_PREFIX):
        return _KafkaEnds(log[len(KAFKA_PREFIX) :], topic, start)
    return _EmbeddedEnds(log, topic)


# -- reading a range (in the executors' Python workers) ----------------------------------------
#: Per worker process (Spark reuses Python workers): followers and consumers stay open between
#: micro-batches, so a task does not reopen RocksDB or reconnect to the broker.
_FOLLOWERS: dict[str, EmbeddedFollower] = {}
_CONSUMERS: dict[tuple[str, str, int], tuple[Any, list[int]]] = {}
_CACHE_SIZE = 8


def read_range(log: str, topic: str, part: LogPartition) -> Iterator[Record]:
    """Yields the records of one range of a partition (in an executor's Python worker)."""
    if log.startswith(KAFKA_PREFIX):
        yield from _read_kafka(log[len(KAFKA_PREFIX) :], topic, part)
        return
    follower = _FOLLOWERS.get(log)
    if follower is None:
        if len(_FOLLOWERS) >= _CACHE_SIZE:
            _FOLLOWERS.pop(next(iter(_FOLLOWERS))).close()
        follower = _FOLLOWERS[log] = EmbeddedFollower(log)
    if follower.end(topic, part.partition) < part.end:
        follower.catch_up()
    yield from follower.read(topic, part.partition, part.start, part.end, READ_TIMEOUT_S)


def _read_kafka(bootstrap: str, topic: str, part: LogPartition) -> Iterator[Record]:
    from vectorlog.streams.log.kafka import KafkaReader

    key = (bootstrap, topic, part.partition)
    cached = _CONSUMERS.pop(key, None)
    if cached is None:
        if len(_CONSUMERS) >= _CACHE_SIZE:
            _CONSUMERS.pop(next(iter(_CONSUMERS)))[0].close()
        reader = KafkaReader(kafka_consumer(bootstrap), topic, {part.partition: part.start})
        nxt = [part.start]
    else:
        reader, nxt = cached
        if nxt[0] != part.start:
            reader.seek(topic, part.partition, part.start)
            nxt[0] = part.start
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while nxt[0] < part.end:
            got = reader.poll(1000, 0.2)
            for rec in got:
                if rec.offset >= part.end:
                    reader.seek(topic, part.partition, part.end)  # read ahead: drop the rest
                    nxt[0] = part.end
                    break
                if rec.offset >= nxt[0]:
                    nxt[0] = rec.offset + 1
                    yield rec
            if nxt[0] < part.end and time.monotonic() > deadline:
                raise LogError(
                    f"{topic}[{part.partition}]: offsets {nxt[0]}..{part.end - 1} not read "
                    f"within {READ_TIMEOUT_S}s"
                )
    except BaseException:
        reader.close()
        raise
    _CONSUMERS[key] = (reader, nxt)


def kafka_consumer(bootstrap: str) -> Any:
    """Returns a confluent-kafka Consumer for `assign()` reads (no group, nothing committed)."""
    from confluent_kafka import Consumer

    from vectorlog.streams.log.kafka import reader_config

    config = reader_config(bootstrap, "vectorlog-spark", 64 << 20)
    return Consumer({**config, "queued.max.messages.kbytes": 64 << 10})


def _kafka_partitions(consumer: Any, topic: str) -> int:
    from confluent_kafka import KafkaException

    from vectorlog.streams.errors import TopicNotFound

    try:
        found = consumer.list_topics(timeout=10).topics.get(topic)
    except KafkaException as exc:
        raise LogError(f"read metadata of {topic}: {exc}") from exc
    if found is None or found.error is not None or not found.partitions:
        raise TopicNotFound(topic)
    return len(found.partitions)


def _arrow_batches(records: Iterator[Record]) -> Iterator[pa.RecordBatch]:
    schema = _arrow_schema()
    cols: tuple[list[int], list[int], list[bytes | None], list[bytes], list[bytes | None]]
    cols, size = ([], [], [], [], []), 0
    for rec in records:
        cols[0].append(rec.partition)
        cols[1].append(rec.offset)
        cols[2].append(rec.key)
        cols[3].append(rec.value)
        cols[4].append(rec.header(BATCH_HEADER))
        size += len(rec.value)
        if len(cols[0]) >= _ROWS_PER_ARROW_BATCH or size >= 16 << 20:
            yield _batch(cols, schema)
            cols, size = ([], [], [], [], []), 0
    if cols[0]:
        yield _batch(cols, schema)


def _batch(cols: Sequence[list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    arrays = [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _arrow_schema() -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SCHEMA, timezone="UTC")


def _required(opts: dict[str, str], name: str) -> str:
    value = opts.get(name)
    if not value:
        raise LogSourceError(f"the {NAME} data source needs the option {name!r}")
    return value


def _int_option(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise LogSourceError(f"option {name}={raw!r} is not an integer") from None
    if value < 1:
        raise LogSourceError(f"option {name}={raw!r} must be at least 1")
    return value
