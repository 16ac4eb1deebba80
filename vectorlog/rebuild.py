"""`vectorlog rebuild --as-of T`: a new embedded data dir holding a cluster as it was at T.

The new cluster's log gets the old one's records stamped at or before T: every ddl record
(collections, partitions, indexes, aliases, id and timestamp reservations), the coord events
of segment allocation (opened, allocated, sealed; never binlog paths, which name the old
storage root), and the dml records, read by a Spark batch job that drops those stamped after
T (processors/spark/rebuild.py). Opening it then rebuilds the meta, writes its own binlogs and
builds its indexes, so it answers get / query / search / describe as the old cluster answered
as of T, and its history before T (as_of reads) is the old one's.

Refused, naming why, before anything is written: a T in the future; a source whose dml
records were deleted by retention (this rebuild replays the log; rebuilding the prefix from
binlogs is not built), naming the first offsets kept; a target that already holds a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vectorlog import hybridts
from vectorlog.config import Config
from vectorlog.errors import InvalidArgument
from vectorlog.processors.datanode.service import PyArrowObjectStore
from vectorlog.processors.spark.service import acquire_session, offsets_as_of, release_session
from vectorlog.schemas.serde import EventSerde
from vectorlog.standalone import open_log
from vectorlog.streams.log.base import Append, Log, Record, start_offsets
from vectorlog.streams.scan import read_all
from vectorlog.streams.snapshots import read_whole
from vectorlog.streams.topics import Serdes, Topics

#: coord events a rebuilt cluster needs (its datacoord's segments); the rest it makes itself
COORD_KEPT = frozenset({"SegmentOpened", "SegmentsAllocated", "SegmentsSealed"})
CHUNK = 500  # records per append
Progress = Callable[[str, int], None]  # (topic, records copied so far)


class RebuildRefused(InvalidArgument):
    """A rebuild cannot give what was asked: names why (and what is available)."""


@dataclass
class RebuildReport:
    """What a rebuild copied: records per topic, rows of the dml kept, and seconds."""

    as_of: int
    target: str
    cluster: str  # open the target with this cluster name (its topics and vchannels keep it)
    ddl: int = 0
    coord: int = 0
    dml: int = 0
    seconds: float = 0.0


def rebuild(
    source: Config, target: str, as_of: int | None = None, progress: Progress | None = None
) -> RebuildReport:
    """Writes the source cluster as of `as_of` (default: its newest event) into a new
    embedded data dir `target`; returns what was copied. The source may be running on Kafka;
    an embedded source must be closed. Raises RebuildRefused (nothing written), LogError."""
    started = time.monotonic()
    src = open_log(source)
    try:
        topics = Topics(source.cluster, source.dml_partitions)
        _check_retention(src, topics)
        serdes = Serdes(source.schema_registry_url)
        store = PyArrowObjectStore(source.storage_uri())
        ddl = list(read_whole(src, topics.ddl, store))
        at = _as_of(as_of, ddl, serdes.for_topic(topics.ddl))
        dst_cfg = Config.load(
            log=target, cluster=source.cluster, dml_partitions=topics.dml_partitions
        )
        dst = _new_target(dst_cfg, topics)
        try:
            report = RebuildReport(at, target, source.cluster)
            report.ddl = _copy(dst, topics.ddl, _stamped(ddl, serdes.for_topic(topics.ddl), at))
            records = read_whole(src, topics.coord, store)
            coord = _coord_kept(records, serdes.for_topic(topics.coord), at)
            report.coord = _copy(dst, topics.coord, coord)
            report.dml = _copy_dml(source, src, dst, topics, at, progress)
        finally:
            dst.close()
    finally:
        src.close()
    report.seconds = time.monotonic() - started
    return report


def _check_retention(src: Log, topics: Topics) -> None:
    starts = start_offsets(src, topics.dml)
    if any(starts.values()):
        raise RebuildRefused(
            f"retention deleted dml records before offsets {starts}; a rebuild replays the dml "
            "log from its first record, so no T can be rebuilt from this log"
        )


def _as_of(as_of: int | None, ddl: list[Record], serde: EventSerde) -> int:
    """Returns the T to rebuild at (default: now). Raises RebuildRefused for a T later than
    now, or earlier than the cluster's first event (naming the oldest T available)."""
    now = hybridts.compose(hybridts.wall_ms())
    at = now if as_of is None else int(as_of)
    if at > now:
        raise RebuildRefused(f"as_of {at} is in the future (now is {now})")
    stamps = (serde.stamp(r.value) for r in ddl)
    first = min((s for s in stamps if s), default=None)  # markers and reservations: ts 0
    if first is not None and at < first:
        raise RebuildRefused(f"as_of {at} is before the cluster's first event; oldest T: {first}")
    return at


def _new_target(cfg: Config, topics: Topics) -> Log:
    """Opens the target's log; raises RebuildRefused if it holds a cluster already."""
    if cfg.is_kafka:
        raise RebuildRefused("the rebuild target must be an embedded data dir, not Kafka")
    dst = open_log(cfg)
    topics.ensure(dst, cfg.log_retention_ms, cfg.log_retention_bytes)
    if any(dst.end_offsets(topics.ddl).values()):
        dst.close()
        raise RebuildRefused(f"{cfg.log} holds a cluster already: rebuild into a new data dir")
    return dst


def _stamped(records: list[Record], serde: EventSerde, at: int) -> Iterator[Append]:
    for r in records:
        ts = serde.stamp(r.value)
        if ts is None or ts <= at:
            yield Append(r.partition, r.value, r.key, r.headers)


def _coord_kept(records: Iterator[Record], serde: EventSerde, at: int) -> Iterator[Append]:
    for r in records:
        try:
            event = serde.decode(r.value)
        except Exception:
            continue
        if event.type in COORD_KEPT and event.ts <= at:
            yield Append(r.partition, r.value, r.key, r.headers)


def _copy(dst: Log, topic: str, records: Iterator[Append] | Any) -> int:
    """Appends `records` in chunks, in order; returns how many."""
    n, chunk = 0, []
    for rec in records:
        chunk.append(rec)
        if len(chunk) >= CHUNK:
            dst.append(topic, chunk)
            n, chunk = n + len(chunk), []
    if chunk:
        dst.append(topic, chunk)
        n += len(chunk)
    return n


def _copy_dml(
    source: Config, src: Log, dst: Log, topics: Topics, at: int, progress: Progress | None
) -> int:
    """Copies the dml records stamped <= `at` (found by the Spark job) in each partition's
    order; returns how many."""
    ends = _true_ends(src, topics.dml)
    uri = source.log if source.is_kafka else str(Path(source.log) / "log")
    session = acquire_session(source.spark_master)
    try:
        kept = offsets_as_of(session, uri, topics.dml, ends, at, source.schema_registry_url)
    finally:
        release_session(session)
    records = _kept_records(src, topics.dml, ends, kept)
    return _copy(dst, topics.dml, _counted(records, topics.dml, progress))


def _kept_records(
    src: Log, topic: str, ends: dict[int, int], kept: dict[int, set[int]]
) -> Iterator[Append]:
    """Yields the records at the `kept` offsets, partition by partition in offset order."""
    for p, end in sorted(ends.items()):
        if not kept.get(p):
            continue
        reader = src.reader(topic, {p: 0})
        try:
            at = 0
            while at < end:
                batch = reader.poll(1000, timeout=1.0)
                for r in batch:
                    if r.offset < end and r.offset in kept[p]:
                        yield Append(p, r.value, r.key, r.headers)
                at = batch[-1].offset + 1 if batch else at
        finally:
            reader.close()


def _counted(records: Iterator[Append], topic: str, progress: Progress | None) -> Iterator[Append]:
    for i, rec in enumerate(records, 1):
        if progress is not None and i % CHUNK == 0:
            progress(topic, i)
        yield rec


def _true_ends(log: Log, topic: str) -> dict[int, int]:
    """Returns each partition's end: the end offsets, then on past them until idle (a Kafka
    high watermark may lag the real end); reads nothing before them."""
    ends = log.end_offsets(topic)
    for rec in read_all(log, topic, start=dict(ends), idle=0.5):
        ends[rec.partition] = max(ends[rec.partition], rec.offset + 1)
    return ends
