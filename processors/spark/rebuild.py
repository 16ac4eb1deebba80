"""The Spark side of `vectorlog rebuild --as-of T`: a batch read of the dml topic through the
log data source finds the records stamped at or before T.

Tasks of up to 64 records each decode the envelopes (in the executors' Python workers) and
return the offsets of the records to keep; the driver then copies those records from the log
into the new cluster's, in each partition's offset order.
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


def offsets_as_of(
    session: SparkSession,
    log_uri: str,
    topic: str,
    ends: dict[int, int],
    as_of: int,
    schema_registry_url: str | None = None,
) -> dict[int, set[int]]:
    """Returns {partition: offsets} of the records of `topic` below `ends` stamped at or
    before `as_of` (or not decodable: the new cluster dead-letters it as the old one did).
    Only offsets come back to the driver, never the records (they reach 1 MB each): the
    driver copies the values from the log itself. Raises what Spark raises for a failed task."""
    register(session)
    frame = (
        session.read.format(NAME)
        .option("log", log_uri)
        .option("topic", topic)
        .option("endingOffsets", offsets_json(ends))
        .load()
    )
    keep = partial(_keep_as_of, as_of, schema_registry_url, topic)
    kept = frame.mapInArrow(keep, "partition int, offset long").toArrow()
    out: dict[int, set[int]] = {p: set() for p in ends}
    for p, offset in zip(
        kept.column("partition").to_pylist(), kept.column("offset").to_pylist(), strict=True
    ):
        out[p].add(offset)
    return out


def _keep_as_of(
    as_of: int, url: str | None, topic: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Filters record batches (partition, offset, key, value) to those stamped <= `as_of`."""
    serde = Serdes(url).for_topic(topic) if url else EventSerde()
    for batch in batches:
        values = batch.column(3).to_pylist()
        keep = [_stamp(serde, v) <= as_of for v in values]
        yield batch.select(["partition", "offset"]).filter(pa.array(keep, pa.bool_()))


def _stamp(serde: EventSerde, value: Any) -> int:
    """Returns a record's event ts; -1 (kept) if it does not decode."""
    try:
        return serde.decode(value).ts
    except Exception:
        return -1
