"""`vectorlog rebuild --as-of T`: a new embedded data dir holding a cluster as it was at T.

The new cluster's log gets the old one's records stamped at or before T: every ddl record
(collections, partitions, indexes, aliases, id and timestamp reservations), the coord events
of segment allocation (opened, allocated, sealed; never binlog paths, which name the old
storage root), and the dml records, read by a Spark batch job that drops those stamped after
T (vectorlog/engines/spark/log_range.py). Opening it then rebuilds the meta, writes its own
binlogs and builds its indexes, so it answers get / query / search / describe as the old
cluster answered as of T, and its history before T (as_of reads) is the old one's.

Where retention deleted a pchannel's oldest dml records, what they carried is rebuilt from
the source's binlogs instead (vectorlog/jobs/rebuild_prefix.py): the new log starts with their
DDL copies, rows and deletes as events with their own ts, then the records kept. A bulk
insert's record is replaced by its rows read from binlogs (it named the old storage root);
compactions are left out (the new cluster holds the rows where they were inserted).

Where the source's data node published a checkpoint at or before T and retention deleted
nothing, the rows are not copied: the new cluster takes the source's binlogs and only the keys
of the rows they hold go through its log (vectorlog/jobs/rebuild_direct.py); the records after
the checkpoint (rows still only in the source data node's memory at T) are copied whole.

Refused, naming why, before anything is written: a T in the future; a T before the oldest
T the log and binlogs give (retention deleted what it needs), naming that T; a target that
already holds a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from vectorlog.config import Config, open_log
from vectorlog.core import hybridts
from vectorlog.core.errors import InvalidArgument
from vectorlog.engines.spark import acquire_session, offsets_as_of, release_session
from vectorlog.engines.spark.binlog_events import PrefixEvent, Spool, prefix_events
from vectorlog.engines.spark.log_range import DmlScan
from vectorlog.jobs.rebuild_direct import (
    DirectDml,
    DirectPlan,
    coord_records,
    key_plan,
    link_binlogs,
    link_vector_cache,
    missing_in,
    plan_direct,
    scan_dml,
)
from vectorlog.jobs.rebuild_prefix import DDL_FIRST, Prefix, cuts, fold_segments, oldest_as_of, plan
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage import ObjectNotFound, PyArrowObjectStore
from vectorlog.streams.log.base import Append, Log, Record, start_offsets
from vectorlog.streams.scan import read_all
from vectorlog.streams.snapshots import read_whole
from vectorlog.streams.topics import Serdes, Topics

#: coord events a rebuilt cluster needs (its datacoord's segments); the rest it makes itself
COORD_KEPT = frozenset({"SegmentOpened", "SegmentsAllocated", "SegmentsSealed"})
CHUNK = 500  # records per append
Progress = Callable[[int, int], None]  # (dml records copied so far, dml records to copy)


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
    binlogs: int = 0  # files taken from the source's storage (a rebuild from its binlogs)
    seconds: float = 0.0


def rebuild(
    source: Config, target: str, as_of: int | None = None, progress: Progress | None = None
) -> RebuildReport:
    """Writes the source cluster as of `as_of` (default: its newest event) into a new
    embedded data dir `target`; returns what was copied. The source may be running on Kafka;
    an embedded source must be closed. Raises RebuildRefused (nothing written), LogError,
    CorruptBinlog or ObjectNotFound (a binlog the source lost)."""
    started = time.monotonic()
    src = open_log(source)
    try:
        topics = Topics(source.cluster, source.dml_partitions)
        serdes = Serdes(source.schema_registry_url)
        store = PyArrowObjectStore(source.storage_uri())
        ddl = list(read_whole(src, topics.ddl, store))
        at = _as_of(as_of, ddl, serdes.for_topic(topics.ddl))
        coord = list(read_whole(src, topics.coord, store))
        direct = _direct(source, src, topics, serdes, ddl, coord, at, store)
        if direct is not None:
            report = _write_direct(target, source, topics, serdes, ddl, coord, direct, progress)
        else:
            report = _row_copy(target, source, src, topics, serdes, ddl, coord, at, progress)
    finally:
        src.close()
    report.seconds = time.monotonic() - started
    return report


def _row_copy(
    target: str,
    source: Config,
    src: Log,
    topics: Topics,
    serdes: Serdes,
    ddl: list[Record],
    coord: list[Record],
    at: int,
    progress: Progress | None,
) -> RebuildReport:
    """Rebuilds by copying the dml records (and rows read from binlogs where retention
    deleted records) into the new log; returns what was copied."""
    spool = Spool()
    try:
        read = _read_source(source, src, topics, ddl, coord, at, spool)
        return _write_target(target, source, topics, serdes, ddl, coord, read, progress)
    finally:
        spool.close()


@dataclass
class _Direct:
    """A direct rebuild's checkpoint and new dml topic (rebuild_direct.py)."""

    src: Log
    plan: DirectPlan
    dml: DirectDml
    at: int


def _direct(
    source: Config,
    src: Log,
    topics: Topics,
    serdes: Serdes,
    ddl: list[Record],
    coord: list[Record],
    at: int,
    store: PyArrowObjectStore,
) -> _Direct | None:
    """Returns the direct rebuild at `at`, or None where the row copy is needed."""
    plan_ = plan_direct(
        coord, serdes.for_topic(topics.coord), at, start_offsets(src, topics.dml), store
    )
    if plan_ is None:
        return None
    schemas = key_plan(_decoded(serdes, topics.ddl, ddl))
    ends = _true_ends(src, topics.dml)
    dml = scan_dml(src, topics.dml, serdes.for_topic(topics.dml), ends, at, plan_, schemas)
    if dml is None or not all(map(store.exists, dml.needed)):
        return None  # a bulk insert after the checkpoint names a binlog that is gone
    return _Direct(src, plan_, dml, at)


def _write_direct(
    target: str,
    source: Config,
    topics: Topics,
    serdes: Serdes,
    ddl: list[Record],
    coord: list[Record],
    direct: _Direct,
    progress: Progress | None,
) -> RebuildReport:
    """Writes the new data dir from the source's binlogs (rebuild_direct.py); returns what
    it holds. Raises RebuildRefused if it holds a cluster already."""
    dst_cfg = Config.load(log=target, cluster=source.cluster, dml_partitions=topics.dml_partitions)
    dst = _new_target(dst_cfg, topics)
    try:
        report = RebuildReport(direct.at, target, source.cluster)
        report.ddl = _copy(dst, topics.ddl, _stamped(ddl, serdes.for_topic(topics.ddl), direct.at))
        report.binlogs = link_binlogs(source.storage_uri(), dst_cfg.storage_uri())
        link_vector_cache(source.state_dir(), dst_cfg.state_dir())
        serde = serdes.for_topic(topics.coord)
        gone = missing_in(coord, serde, direct.plan, direct.dml.needed, dst_cfg.storage_uri())
        if gone is not None:
            raise ObjectNotFound(
                gone,
                "the running source deleted it during the rebuild: rebuild into a new "
                "data dir again",
            )
        held = PyArrowObjectStore(dst_cfg.storage_uri())
        after = COORD_KEPT | {"SegmentIndexesDropped"}  # of reports copied from before it
        kept = coord_records(coord, serde, direct.at, direct.plan, after, held)
        report.coord = _copy(dst, topics.coord, kept)
        report.dml = _copy_direct(direct.src, dst, topics.dml, direct.dml, progress)
    finally:
        dst.close()
    return report


def _write_target(
    target: str,
    source: Config,
    topics: Topics,
    serdes: Serdes,
    ddl: list[Record],
    coord: list[Record],
    read: _SourceRead,
    progress: Progress | None,
) -> RebuildReport:
    """Writes the new data dir's log; returns what it holds. Raises RebuildRefused if it
    holds a cluster already."""
    dst_cfg = Config.load(log=target, cluster=source.cluster, dml_partitions=topics.dml_partitions)
    dst = _new_target(dst_cfg, topics)
    try:
        report = RebuildReport(read.at, target, source.cluster)
        stamped = _stamped(ddl, serdes.for_topic(topics.ddl), read.at)
        report.ddl = _copy(dst, topics.ddl, stamped)
        kept = _coord_kept(coord, serdes.for_topic(topics.coord), read.at, read)
        report.coord = _copy(dst, topics.coord, kept)
        report.dml = _copy_dml(read.src, dst, topics, read, progress)
    finally:
        dst.close()
    return report


@dataclass
class _SourceRead:
    """What the Spark jobs found: the dml scan, each partition's range, and the prefix of
    the truncated partitions with its events."""

    src: Log
    at: int
    scan: DmlScan
    starts: dict[int, int]
    ends: dict[int, int]
    prefix: Prefix
    events: list[PrefixEvent]
    spool: Spool


def _read_source(
    source: Config,
    src: Log,
    topics: Topics,
    ddl: list[Record],
    coord: list[Record],
    at: int,
    spool: Spool,
) -> _SourceRead:
    """Scans the dml topic and reads the binlogs of its truncated part. Raises
    RebuildRefused for a T before the oldest the log and the binlogs give."""
    starts, ends = start_offsets(src, topics.dml), _true_ends(src, topics.dml)
    uri = source.log if source.is_kafka else str(Path(source.log) / "log")
    session = acquire_session(source.spark_master)
    try:
        url = source.schema_registry_url
        scan = offsets_as_of(session, uri, topics.dml, ends, at, url, starts)
        serdes = Serdes(url)
        events_of = partial(_decoded, serdes)
        segments = fold_segments(events_of(topics.coord, coord))
        oldest = oldest_as_of(scan, starts, segments)
        if at < oldest:
            raise RebuildRefused(
                f"as_of {at} is outside retention: dml records before offsets {starts} were "
                f"deleted, or rows deleted before a compaction's horizon; oldest T available: "
                f"{oldest}"
            )
        prefix = plan(
            events_of(topics.ddl, ddl), segments, scan, cuts(scan, starts, at), at, EventSerde()
        )
        events = prefix_events(session, source.storage_uri(), prefix.jobs, spool)
    finally:
        release_session(session)
    return _SourceRead(src, at, scan, starts, ends, prefix, events, spool)


def _decoded(serdes: Serdes, topic: str, records: list[Record]) -> list[Event]:
    """Returns the events of `records` that decode (the others were dead-lettered)."""
    serde, out = serdes.for_topic(topic), []
    for r in records:
        try:
            out.append(serde.decode(r.value))
        except Exception:
            continue
    return out


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


def _coord_kept(
    records: list[Record], serde: EventSerde, at: int, read: _SourceRead
) -> Iterator[Append]:
    """Yields the segment allocation records stamped <= `at` (less those of segments the
    prefix left unused), then the prefix's own coord events."""
    for r in records:
        try:
            event = serde.decode(r.value)
        except Exception:
            continue
        if event.type in COORD_KEPT and event.ts <= at and not _unused(event, read.prefix.unused):
            yield Append(r.partition, r.value, r.key, r.headers)
    for event in read.prefix.coord(read.events):
        yield Append(0, serde.encode(event), serde.key(event))


def _unused(event: Event, unused: set[int]) -> bool:
    """Whether a segment allocation event is about unused segments only."""
    b = event.body
    if event.type == "SegmentOpened":
        return b["segment_id"] in unused
    if event.type == "SegmentsSealed":
        return set(b["segment_ids"]) <= unused
    return {a["segment_id"] for a in b["allocations"]} <= unused


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
    src: Log, dst: Log, topics: Topics, read: _SourceRead, progress: Progress | None
) -> int:
    """Copies, per partition in order, its prefix (for a truncated one) then the records the
    scan kept, less the prefix's skipped ones; returns how many. Reports (copied, total) to
    `progress` at the start, every CHUNK records and at the end."""
    prefix, replaced = _synthesized(read)
    records = _dml_records(src, topics, read, prefix, replaced)
    if progress is None:
        return _copy(dst, topics.dml, records)
    total = _dml_total(read, prefix, replaced)
    progress(0, total)
    n = _copy(dst, topics.dml, _counted(records, total, progress))
    progress(n, total)
    return n


def _copy_direct(src: Log, dst: Log, topic: str, dml: DirectDml, progress: Progress | None) -> int:
    """Copies, per partition in order, the records before the checkpoint as `dml` holds them,
    then the tail's from the source; returns how many. Reports (copied, total) to
    `progress` as `_copy_dml` does."""

    def records() -> Iterator[Append]:
        for p, end in sorted(dml.ends.items()):
            yield from dml.before.get(p, [])
            tail = dml.tail.get(p, set())
            for r in _kept_records(src, topic, p, min(tail, default=end), end, tail):
                yield Append(p, r.value, r.key, r.headers)

    if progress is None:
        return _copy(dst, topic, records())
    total = dml.total()
    progress(0, total)
    n = _copy(dst, topic, _counted(records(), total, progress))
    progress(n, total)
    return n


def _kept_offsets(read: _SourceRead, p: int, replaced: Replaced) -> set[int]:
    """Returns the offsets of partition `p` whose records (or their replacements) are copied."""
    kept = read.scan.kept.get(p, set()) - read.prefix.skipped.get(p, set())
    return kept | {offset for q, offset in replaced if q == p}


def _dml_total(read: _SourceRead, prefix: PrefixByPartition, replaced: Replaced) -> int:
    """Returns how many records `_dml_records` yields."""
    total = sum(len(entries) for entries in prefix.values())
    for p, end in read.ends.items():
        start = read.starts.get(p, 0)
        kept = (o for o in _kept_offsets(read, p, replaced) if start <= o < end)
        total += sum(len(replaced[(p, o)]) if (p, o) in replaced else 1 for o in kept)
    return total


def _dml_records(
    src: Log, topics: Topics, read: _SourceRead, prefix: PrefixByPartition, replaced: Replaced
) -> Iterator[Append]:
    """Per partition: the prefix (DDL copies, rows and deletes in ts order), then the kept
    records in offset order, a bulk insert's replaced by its rows, a compaction left out.
    Synthesized values are read from the spool as they are copied."""
    for p, end in sorted(read.ends.items()):
        yield from (_append(read, e) for _, _, e in sorted(prefix.get(p, []), key=_order))
        kept = _kept_offsets(read, p, replaced)
        for r in _kept_records(src, topics.dml, p, read.starts.get(p, 0), end, kept):
            if (p, r.offset) in replaced:
                yield from (_append(read, e) for e in replaced[(p, r.offset)])
            else:
                yield Append(p, r.value, r.key, r.headers)


Synthesized = PrefixEvent | Append  # a DDL copy is an Append already
#: the prefix per partition, with its (ts, kind) order
PrefixByPartition = dict[int, list[tuple[int, int, Synthesized]]]
#: the events replacing kept records (a bulk insert's rows), by (partition, offset)
Replaced = dict[tuple[int, int], list[PrefixEvent]]


def _order(item: tuple[int, int, Synthesized]) -> tuple[int, int]:
    return item[0], item[1]


def _append(read: _SourceRead, e: Synthesized) -> Append:
    if isinstance(e, Append):
        return e
    return Append(e.pchannel, read.spool.value(e), EventSerde().vchannel_key(e.vchannel))


def _synthesized(read: _SourceRead) -> tuple[PrefixByPartition, Replaced]:
    """Returns the prefix per partition, with its (ts, kind) order, and the events replacing
    kept records, by (partition, offset)."""
    key = EventSerde().vchannel_key
    prefix: PrefixByPartition = {}
    replaced: Replaced = {}
    for p, copies in read.prefix.ddl.items():
        prefix[p] = [(ts, DDL_FIRST, Append(p, value, key(vc))) for ts, vc, value in copies]
    for e in read.events:
        if e.replaces is None:
            prefix.setdefault(e.pchannel, []).append((e.ts, e.kind, e))
        else:
            replaced.setdefault((e.pchannel, e.replaces), []).append(e)
    return prefix, replaced


def _kept_records(
    src: Log, topic: str, p: int, start: int, end: int, kept: set[int]
) -> Iterator[Record]:
    """Yields the records of partition `p` at the `kept` offsets, in offset order."""
    if not kept:
        return
    reader = src.reader(topic, {p: start})
    try:
        at = start
        while at < end:
            batch = reader.poll(1000, timeout=1.0)
            for r in batch:
                if r.offset < end and r.offset in kept:
                    yield r
            at = batch[-1].offset + 1 if batch else at
    finally:
        reader.close()


def _counted(records: Iterator[Append], total: int, progress: Progress) -> Iterator[Append]:
    for i, rec in enumerate(records, 1):
        if i % CHUNK == 0:
            progress(i, total)
        yield rec


def _true_ends(log: Log, topic: str) -> dict[int, int]:
    """Returns each partition's end: the end offsets, then on past them until idle (a Kafka
    high watermark may lag the real end); reads nothing before them."""
    ends = log.end_offsets(topic)
    for rec in read_all(log, topic, start=dict(ends), idle=0.5):
        ends[rec.partition] = max(ends[rec.partition], rec.offset + 1)
    return ends
