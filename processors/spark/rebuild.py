"""The Spark side of `vectorlog rebuild --as-of T`: a batch read of the dml topic through the
log data source, keeping the records stamped at or before T, in each partition's order.

One task per dml partition decodes its records' envelopes (in the executors' Python workers)
and drops those stamped after T; the driver receives the kept records partition by partition,
in offset order, and appends them to the new cluster's log.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from vectorlog.processors.spark.logsource import NAME, offsets_json, register
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.topics import Serdes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def records_as_of(
    session: SparkSession,
    log_uri: str,
    topic: str,
    ends: dict[int, int],
    as_of: int,
    schema_registry_url: str | None = None,
) -> Iterator[tuple[int, int, bytes | None, bytes]]:
    """Yields (partition, offset, key, value) of every record of `topic` below `ends` stamped
    at or before `as_of` (or not decodable: the new cluster dead-letters it as the old one
    did), each partition's in offset order. Raises what Spark raises for a failed task."""
    register(session)
    frame = (
        session.read.format(NAME)
        .option("log", log_uri)
        .option("topic", topic)
        .option("endingOffsets", offsets_json(ends))
        .load()
    )
    keep = partial(_keep_as_of, as_of, schema_registry_url, topic)
    kept = frame.mapInArrow(keep, frame.schema)
    for row in kept.toLocalIterator(prefetchPartitions=True):
        yield row["partition"], row["offset"], row["key"], row["value"]


def _keep_as_of(
    as_of: int, url: str | None, topic: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Filters record batches (partition, offset, key, value) to those stamped <= `as_of`."""
    serde = Serdes(url).for_topic(topic) if url else EventSerde()
    for batch in batches:
        values = batch.column(3).to_pylist()
        keep = [_stamp(serde, v) <= as_of for v in values]
        yield batch.filter(pa.array(keep, pa.bool_()))


def _stamp(serde: EventSerde, value: Any) -> int:
    """Returns a record's event ts; -1 (kept) if it does not decode."""
    try:
        return serde.decode(value).ts
    except Exception:
        return -1
