"""What a rebuild reads from binlogs in place of dml records (seed 001 s.1.4, "fetch binlogs
before T"; vectorlog/engines/spark/binlog_events.py), and the coord events its datacoord then needs.

- Per pchannel whose oldest records retention deleted: the DDL broadcasts it carried, then
  the rows and deletes its segments' binlogs hold from before the first ts the log kept.
- Per bulk insert kept: its rows, read from its segments (or from the segment a compaction
  merged them into), as inserts at its ts, in place of its SegmentImported record.
- Compactions are never replayed: the rebuilt cluster holds the rows of the merged segments
  where they were inserted, and compacts them itself.
History is then exact for every T at or after the cuts, except where a compaction dropped
rows deleted at or before its horizon from segments read here: the oldest T available is
the latest of those cuts and horizons (`oldest_as_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from vectorlog.core.added_fields import with_field
from vectorlog.core.model import CollectionSchema, FieldSchema
from vectorlog.engines.spark.binlog_events import PrefixEvent, PrefixJob
from vectorlog.engines.spark.log_range import DmlScan
from vectorlog.processors.querynode.recovery import writes_of
from vectorlog.processors.rootcoord.rootcoord import BROADCAST
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage import CompactionSource
from vectorlog.storage.channel_fence import ChannelFence

DDL_FIRST = -1  # at one ts a DDL copy goes before the rows (never happens: distinct stamps)


@dataclass
class SourceSegment:
    """One segment of the source as its coord events describe it."""

    segment_id: int
    collection_id: int = 0
    partition_id: int = 0
    vchannel: str = ""
    opened: bool = False
    dropped: bool = False  # merged into another by a compaction
    merged_into: int | None = None  # the segment a compaction merged this one into
    saved_ts: int = 0  # the first BinlogPathsSaved's ts
    rows: int = 0
    writes: list[dict[int, str]] = field(default_factory=list)
    deltas: list[str] = field(default_factory=list)


def fold_segments(coord: list[Event]) -> dict[int, SourceSegment]:
    """Returns every segment the coord events name, with its binlogs in written order
    (fenced data node writes left out: storage.channel_fence)."""
    out: dict[int, SourceSegment] = {}
    fence = ChannelFence()
    for admitted in map(fence.admit, coord):
        if admitted is None:
            continue
        event, b = admitted, admitted.body
        if event.type == "SegmentOpened":
            _get(out, b["segment_id"]).opened = True
        elif event.type == "BinlogPathsSaved":
            seg = _get(out, b["segment_id"])
            seg.collection_id, seg.partition_id = b["collection_id"], b["partition_id"]
            seg.vchannel = b["vchannel"]
            seg.saved_ts = seg.saved_ts or event.ts
            seg.rows = max(seg.rows, b["num_rows"])
            seg.writes.extend(writes_of(b["field_binlogs"]))
            seg.deltas.extend(x["path"] for x in b["delta_binlogs"])
            for sid in b.get("compacted_from", []):
                _get(out, sid).dropped = True
                _get(out, sid).merged_into = b["segment_id"]
    return out


def _get(segments: dict[int, SourceSegment], sid: int) -> SourceSegment:
    if sid not in segments:
        segments[sid] = SourceSegment(sid)
    return segments[sid]


def cuts(scan: DmlScan, starts: dict[int, int], at: int) -> dict[int, int]:
    """Returns, per truncated pchannel, the ts below which its history comes from binlogs:
    the first ts the log kept there, or past `at` when it kept no stamped record."""
    return {p: scan.first_ts.get(p, at + 1) for p, start in starts.items() if start > 0}


def oldest_as_of(scan: DmlScan, starts: dict[int, int], segments: dict[int, SourceSegment]) -> int:
    """Returns the oldest T a rebuild gives exactly (0: any T): the latest first ts kept on
    a truncated pchannel, and horizon of a compaction that merged segments read here."""
    truncated = [p for p, start in starts.items() if start > 0]
    found = [scan.first_ts[p] for p in truncated if p in scan.first_ts]
    found += [c.horizon for p in truncated for c in scan.compactions.get(p, {}).values()]
    horizon = {c.segment_id: c.horizon for by in scan.compactions.values() for c in by.values()}
    for seen in (i for by in scan.imports.values() for i in by.values()):
        for sid in seen.segment_ids:
            found += [horizon.get(s, 0) for s in _merges(segments, sid)[1:]]
    return max(found, default=0)


def _merges(segments: dict[int, SourceSegment], sid: int) -> list[int]:
    """Returns `sid` and the segments it was merged into, in turn, to the live one."""
    chain = [sid]
    while sid in segments and segments[sid].merged_into is not None:
        sid = segments[sid].merged_into  # type: ignore[assignment]
        chain.append(sid)
    return chain


@dataclass
class Prefix:
    """What replaces records: binlog jobs, DDL copies per truncated pchannel (ts, vchannel,
    value), kept dml offsets not to copy (compactions, and bulk inserts replaced by their
    rows), segments whose coord events are left out, and those never opened (`coord` makes
    their events)."""

    jobs: list[PrefixJob] = field(default_factory=list)
    ddl: dict[int, list[tuple[int, str, bytes]]] = field(default_factory=dict)
    skipped: dict[int, set[int]] = field(default_factory=dict)
    unused: set[int] = field(default_factory=set)
    unopened: dict[int, tuple[SourceSegment, int]] = field(default_factory=dict)  # with pchannel

    def add(self, job: PrefixJob, seg: SourceSegment) -> None:
        """Adds a job, one per binlog write and one for the delta logs, so no task holds a
        whole segment (noting a segment a bulk insert or compaction made: never opened)."""
        source = job.segment
        for write in source.writes:
            part = CompactionSource(source.segment_id, (write,), ())
            self.jobs.append(replace(job, segment=part, deletes_below=0))
        if source.deltas and job.deletes_below:
            deltas = CompactionSource(source.segment_id, (), source.deltas)
            self.jobs.append(replace(job, segment=deltas, rows_below=0, rows_from=0))
        if not seg.opened:
            self.unopened[seg.segment_id] = (seg, job.pchannel)

    def coord(self, events: list[PrefixEvent]) -> list[Event]:
        """Returns SegmentOpened and SegmentsSealed for each unopened segment `events` fill,
        stamped with their first and last ts: datacoord starts its flush once the data node
        consumed past its last row (a segment that gets no row is left out: it would never
        flush)."""
        spans: dict[int, tuple[int, int]] = {}
        for e in events:
            lo, hi = spans.get(e.segment_id, (e.ts, e.ts))
            spans[e.segment_id] = (min(lo, e.ts), max(hi, e.ts))
        out = []
        for sid, (seg, pchannel) in sorted(self.unopened.items()):
            if sid in spans:
                out += _opened(seg, pchannel, *spans[sid])
        return out


def _schemas(ddl: list[Event]) -> dict[int, dict[str, Any]]:
    """Returns each created collection's schema (Avro) with the fields `ddl` adds to it:
    binlogs written after an add hold its column, those before read as its default."""
    out: dict[int, CollectionSchema] = {}
    for e in ddl:
        cid = int(e.body.get("collection_id") or 0)
        if e.type == "CollectionCreated":
            out[cid] = CollectionSchema.from_avro(e.body["schema"])
        elif e.type == "CollectionFieldAdded" and cid in out:
            out[cid] = with_field(out[cid], FieldSchema.from_avro(e.body["field"]))
    return {cid: schema.to_avro() for cid, schema in out.items()}


def plan(
    ddl: list[Event],
    segments: dict[int, SourceSegment],
    scan: DmlScan,
    cut: dict[int, int],
    at: int,
    serde: EventSerde,
) -> Prefix:
    """Returns what replaces the records of every truncated pchannel in `cut` and of every
    kept bulk insert."""
    created = {e.body["collection_id"]: e.body for e in ddl if e.type == "CollectionCreated"}
    schemas = _schemas(ddl)
    pchannel = {vc: p for b in created.values() for vc, p in _channels(b)}
    out = Prefix(skipped={p: set(found) for p, found in scan.compactions.items()})
    for p, seen in scan.imports.items():
        out.skipped.setdefault(p, set()).update(seen)
    for p in cut:
        out.ddl[p] = _ddl_copies(ddl, created, p, cut[p], serde)
    ended = _drops(ddl)
    for seg in segments.values():
        p = pchannel.get(seg.vchannel, -1)
        if p not in cut:
            continue
        if seg.dropped or ended(seg, cut[p]) or not seg.writes:
            if seg.segment_id not in scan.inserted:
                out.unused.add(seg.segment_id)
            continue
        job = _job(seg, p, schemas[seg.collection_id], rows_below=cut[p])
        out.add(replace(job, deletes_below=cut[p]), seg)
    for p, seen in scan.imports.items():
        for offset, imp in seen.items():
            for sid in {_merges(segments, s)[-1] for s in imp.segment_ids}:
                seg, schema = segments[sid], schemas[imp.collection_id]
                job = _job(seg, p, schema, rows_below=imp.ts + 1, rows_from=imp.ts)
                out.add(replace(job, replaces=offset), seg)
    return out


def _job(
    seg: SourceSegment, p: int, schema: dict[str, Any], rows_below: int, rows_from: int = 0
) -> PrefixJob:
    source = CompactionSource(seg.segment_id, tuple(seg.writes), tuple(seg.deltas))
    return PrefixJob(
        source, seg.collection_id, seg.partition_id, seg.vchannel, p, schema, rows_below, rows_from
    )


def _channels(body: dict[str, Any]) -> list[tuple[str, int]]:
    return list(zip(body["vchannels"], body["pchannels"], strict=True))


def _ddl_copies(
    ddl: list[Event], created: dict[int, Any], p: int, cut: int, serde: EventSerde
) -> list[tuple[int, str, bytes]]:
    """Returns the broadcast copies pchannel `p` carried of DDL events stamped before `cut`."""
    out = []
    for event in ddl:
        body = created.get(event.body.get("collection_id", event.collection_id))
        if event.type not in BROADCAST or not event.ts or event.ts >= cut or body is None:
            continue
        for vc, q in _channels(body):
            if q == p:
                out.append((event.ts, vc, serde.encode(replace(event, vchannel=vc))))
    return out


def _drops(ddl: list[Event]) -> Any:
    """Returns `ended(segment, cut)`: its collection or partition was dropped before `cut`
    (the rebuilt cluster ignores its rows, and the source may have deleted its binlogs)."""
    dropped: dict[tuple[int, int], int] = {}
    for e in ddl:
        if e.type == "CollectionDropped":
            dropped[(e.body["collection_id"], -1)] = e.ts
        elif e.type == "PartitionDropped":
            dropped[(e.body["collection_id"], e.body["partition_id"])] = e.ts

    def ended(seg: SourceSegment, cut: int) -> bool:
        keys = ((seg.collection_id, -1), (seg.collection_id, seg.partition_id))
        return any(dropped.get(k, cut) < cut for k in keys)

    return ended


def _opened(seg: SourceSegment, pchannel: int, first: int, last: int) -> list[Event]:
    """SegmentOpened and SegmentsSealed for a segment a bulk insert or compaction made."""
    opened = {
        "segment_id": seg.segment_id,
        "collection_id": seg.collection_id,
        "partition_id": seg.partition_id,
        "vchannel": seg.vchannel,
        "pchannel": pchannel,
        "max_rows": max(seg.rows, 1),
    }
    sealed = {"segment_ids": [seg.segment_id], "reason": "flush"}
    return [
        Event("SegmentOpened", first, opened, seg.collection_id, seg.vchannel),
        Event("SegmentsSealed", last, sealed),
    ]
