"""The Spark side of `vectorlog rebuild --as-of T`: a batch job over the dml topic finds the
records stamped at or before T.

Tasks of up to RECORDS_PER_TASK records each read their range of the log (as the log data
source's tasks do: an embedded log through a RocksDB secondary instance, Kafka with an
assigned consumer), decode the envelopes in the executors' Python workers and return the
offsets to keep (and what a rebuild of a truncated log needs: DmlScan); the driver then
copies those records from the log into the new cluster's, in each partition's offset order.
Plain RDD tasks: the Python data source's planning costs seconds per job, and the values
never need to pass through the JVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from vectorlog.engines.spark.logsource import LogPartition, read_range
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.topics import Serdes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RECORDS_PER_TASK = 256  # records read and decoded per task


@dataclass(frozen=True)
class Compaction:
    """A SegmentsCompacted record: the new segment and the horizon it dropped rows up to."""

    segment_id: int
    horizon: int


@dataclass(frozen=True)
class Import:
    """A SegmentImported record: its ts, where its rows went and the segments holding them."""

    ts: int
    collection_id: int
    partition_id: int
    vchannel: str
    segment_ids: tuple[int, ...]


@dataclass
class DmlScan:
    """What the dml records below the ends say, per partition: the offsets stamped at or
    before T (or not decodable), the first ts kept, and what a rebuild reads from binlogs
    in place of records: segments inserted into by kept records, every compaction (kept or
    not) and the kept bulk inserts."""

    kept: dict[int, set[int]] = field(default_factory=dict)
    first_ts: dict[int, int] = field(default_factory=dict)  # partitions with a stamped record
    inserted: set[int] = field(default_factory=set)  # segment ids of RowsInserted kept
    compactions: dict[int, dict[int, Compaction]] = field(default_factory=dict)  # by offset
    imports: dict[int, dict[int, Import]] = field(default_factory=dict)  # by offset

    def merge(self, other: DmlScan) -> None:
        """Folds another range's scan in."""
        for p, offsets in other.kept.items():
            self.kept.setdefault(p, set()).update(offsets)
        for p, ts in other.first_ts.items():
            self.first_ts[p] = min(ts, self.first_ts.get(p, ts))
        self.inserted |= other.inserted
        for p, found in other.compactions.items():
            self.compactions.setdefault(p, {}).update(found)
        for p, seen in other.imports.items():
            self.imports.setdefault(p, {}).update(seen)


def offsets_as_of(
    session: SparkSession,
    log_uri: str,
    topic: str,
    ends: dict[int, int],
    as_of: int,
    schema_registry_url: str | None = None,
    starts: dict[int, int] | None = None,
    per_task: int = RECORDS_PER_TASK,
) -> DmlScan:
    """Returns the scan of the records of `topic` below `ends` (see DmlScan): kept are those
    stamped at or before `as_of` or not decodable (the new cluster dead-letters it as the old
    one did); a partition is read from its offset in `starts` (retention deleted those
    below). Only offsets and ids come back to the driver, never the records (they reach
    1 MB each): the driver copies the values from the log itself. Raises what a failed task
    raised."""
    ranges = [
        LogPartition(p, lo, min(end, lo + per_task))
        for p, end in sorted(ends.items())
        for lo in range((starts or {}).get(p, 0), end, per_task)
    ]
    out = DmlScan(kept={p: set() for p in ends})
    if not ranges:
        return out
    scan = partial(_scan_range, log_uri, topic, as_of, schema_registry_url)
    rdd = session.sparkContext.parallelize(ranges, len(ranges))
    for part in rdd.map(scan).collect():
        out.merge(part)
    return out


def _scan_range(
    log_uri: str, topic: str, as_of: int, url: str | None, part: LogPartition
) -> DmlScan:
    """A task: the scan of one range (records below a truncated start are not read)."""
    serde = Serdes(url).for_topic(topic) if url else EventSerde()
    out = DmlScan(kept={part.partition: set()})
    for rec in read_range(log_uri, topic, part):
        try:
            event = serde.decode(rec.value)
        except Exception:
            out.kept[rec.partition].add(rec.offset)  # dead-lettered again by the new cluster
            continue
        if event.ts:
            first = out.first_ts.get(rec.partition, event.ts)
            out.first_ts[rec.partition] = min(first, event.ts)
        if event.type == "SegmentsCompacted":
            found = Compaction(event.body["segment"]["segment_id"], event.body["horizon"])
            out.compactions.setdefault(rec.partition, {})[rec.offset] = found
        if event.ts <= as_of:
            out.kept[rec.partition].add(rec.offset)
            _note(out, rec.partition, rec.offset, event)
    return out


def _note(out: DmlScan, partition: int, offset: int, event: Event) -> None:
    b = event.body
    if event.type == "RowsInserted":
        out.inserted.add(b["segment_id"])
    elif event.type == "SegmentImported":
        ids = tuple(seg["segment_id"] for seg in b["segments"])
        seen = Import(event.ts, b["collection_id"], b["partition_id"], event.vchannel, ids)
        out.imports.setdefault(partition, {})[offset] = seen
