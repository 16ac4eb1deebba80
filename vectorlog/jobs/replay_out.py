"""Writers of replayed events: JSON lines, Parquet (one row per event), raw Avro (each
record's value as on the log, length-prefixed), or the records themselves appended to a topic."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import IO, Any

from vectorlog.jobs.replay import Replayed, dumps, to_json
from vectorlog.streams.log.base import Append, Headers, Log

FORMATS = ("jsonl", "parquet", "avro")
#: Parquet rows buffered before a row group is written
BATCH = 1000


def write_jsonl(items: Iterable[Replayed], out: IO[str]) -> int:
    """Writes one JSON object per event (see `replay.to_json`); returns how many."""
    n = 0
    for item in items:
        out.write(dumps(to_json(item)).decode() + "\n")
        n += 1
    return n


def write_avro(items: Iterable[Replayed], out: IO[bytes]) -> int:
    """Writes each event's record value as on the log (Avro single-object, or Confluent's
    wire format with a schema registry), prefixed by its length as a 4-byte big-endian
    integer; returns how many."""
    n = 0
    for item in items:
        out.write(struct.pack(">I", len(item.value)) + item.value)
        n += 1
    return n


def write_topic(items: Iterable[Replayed], log: Log, topic: str, headers: Headers = ()) -> int:
    """Appends each event's record value to `topic` of `log` (partition: the source's, modulo
    the target's partition count), with `headers`, `BATCH` records per append; returns how
    many. Raises LogError (TopicNotFound if `topic` does not exist)."""
    n, count = 0, len(log.end_offsets(topic))
    batch: list[Append] = []
    for item in items:
        batch.append(Append(item.partition % count, item.value, None, headers))
        n += 1
        if len(batch) >= BATCH:
            log.append(topic, batch)
            batch = []
    if batch:
        log.append(topic, batch)
    return n


def parquet_schema() -> Any:
    """Returns the Parquet schema: the position, the envelope, and the body as JSON text."""
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("type", pa.string()),
            ("ts", pa.int64()),
            ("collection_id", pa.int64()),
            ("vchannel", pa.string()),
            ("body", pa.string()),
        ]
    )


def write_parquet(items: Iterable[Replayed], out: IO[bytes]) -> int:
    """Writes one Parquet row per event, in row groups of `BATCH`; returns how many."""
    import pyarrow.parquet as pq

    schema = parquet_schema()
    n = 0
    with pq.ParquetWriter(out, schema) as writer:
        rows: list[dict[str, Any]] = []
        for item in items:
            row = to_json(item)
            rows.append({**row, "body": dumps(row["body"]).decode()})
            n += 1
            if len(rows) >= BATCH:
                _flush(writer, rows, schema)
        _flush(writer, rows, schema)
    return n


def _flush(writer: Any, rows: list[dict[str, Any]], schema: Any) -> None:
    """Writes the buffered rows as one row group (none if empty) and empties the buffer."""
    import pyarrow as pa

    if rows:
        writer.write_table(pa.Table.from_pylist(rows, schema=schema))
        rows.clear()
