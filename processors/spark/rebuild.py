"""The Spark side of `vectorlog rebuild --as-of T`: a batch job over the dml topic finds the
records stamped at or before T.

Tasks of up to RECORDS_PER_TASK records each read their range of the log (as the log data
source's tasks do: an embedded log through a RocksDB secondary instance, Kafka with an
assigned consumer), decode the envelopes in the executors' Python workers and return the
offsets to keep; the driver then copies those records from the log into the new cluster's,
in each partition's offset order. Plain RDD tasks: the Python data source's planning costs
seconds per job, and the values never need to pass through the JVM.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from vectorlog.processors.spark.logsource import LogPartition, read_range
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.topics import Serdes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RECORDS_PER_TASK = 256  # records read and decoded per task


def offsets_as_of(
    session: SparkSession,
    log_uri: str,
    topic: str,
    ends: dict[int, int],
    as_of: int,
    schema_registry_url: str | None = None,
    per_task: int = RECORDS_PER_TASK,
) -> dict[int, set[int]]:
    """Returns {partition: offsets} of the records of `topic` below `ends` stamped at or
    before `as_of` (or not decodable: the new cluster dead-letters it as the old one did).
    Only offsets come back to the driver, never the records (they reach 1 MB each): the
    driver copies the values from the log itself. Raises what a failed task raised."""
    ranges = [
        LogPartition(p, lo, min(end, lo + per_task))
        for p, end in sorted(ends.items())
        for lo in range(0, end, per_task)
    ]
    out: dict[int, set[int]] = {p: set() for p in ends}
    if not ranges:
        return out
    keep = partial(_kept_in, log_uri, topic, as_of, schema_registry_url)
    rdd = session.sparkContext.parallelize(ranges, len(ranges))
    for p, offset in rdd.flatMap(keep).collect():
        out[p].add(offset)
    return out


def _kept_in(
    log_uri: str, topic: str, as_of: int, url: str | None, part: LogPartition
) -> list[tuple[int, int]]:
    """A task: the (partition, offset) of the records of one range stamped <= `as_of`."""
    serde = Serdes(url).for_topic(topic) if url else EventSerde()
    return [
        (rec.partition, rec.offset)
        for rec in read_range(log_uri, topic, part)
        if _kept(serde.stamp(rec.value), as_of)
    ]


def _kept(ts: int | None, as_of: int) -> bool:
    """A record stamped at or before `as_of` is kept; so is an undecodable one (the new
    cluster dead-letters it as the old one did)."""
    return ts is None or ts <= as_of
