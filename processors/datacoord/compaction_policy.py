"""Which Flushed segments a compaction merges (Milvus's mix compaction trigger): small segments
of one partition and vchannel together, up to one segment's size, and any segment whose
delete records at or before the horizon cover a large fraction of its rows, alone, and any
segment holding rows the collection's TTL expired (Milvus's expired-entity trigger), alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vectorlog.processors.datacoord.segment import Segment, SegmentState


@dataclass(frozen=True)
class CompactionPolicy:
    """When segments are worth merging."""

    #: a Flushed segment holding fewer rows than this fraction of its capacity is small
    small_fraction: float = 0.5
    #: small segments merged together at least (fewer: left alone)
    min_segments: int = 2
    #: segments one merge reads at most (Milvus dataCoord.compaction.max.segment)
    max_segments: int = 30
    #: a segment whose expired delete records reach this fraction of its rows is rewritten
    #: (Milvus singleCompactionRatioThreshold)
    delete_ratio: float = 0.2


def plan_groups(
    segments: list[Segment], horizon: int, policy: CompactionPolicy, expire_ts: int = 0
) -> list[list[Segment]]:
    """Returns the groups of `segments` to merge, each of one partition and vchannel, oldest
    segments first; a segment is in at most one group. Rows inserted at or before
    `expire_ts` expired (0: none)."""
    by_channel: dict[tuple[int, str], list[Segment]] = {}
    for seg in sorted(segments, key=lambda s: s.segment_id):
        if seg.state is SegmentState.FLUSHED and seg.num_rows > 0:
            by_channel.setdefault((seg.partition_id, seg.vchannel), []).append(seg)
    groups: list[list[Segment]] = []
    for segs in by_channel.values():
        small = [s for s in segs if s.num_rows < policy.small_fraction * s.max_rows]
        merged = _packed(small, policy)
        groups += merged
        taken = {s.segment_id for g in merged for s in g}
        groups += [
            [s]
            for s in segs
            if s.segment_id not in taken
            and (_deleted(s, horizon, policy) or _expired(s, expire_ts))
        ]
    return groups


def _packed(small: list[Segment], policy: CompactionPolicy) -> list[list[Segment]]:
    """Returns runs of small segments whose rows fit one segment, of at least min_segments."""
    groups: list[list[Segment]] = []
    run: list[Segment] = []
    rows = 0
    for seg in small:
        full = run and (rows + seg.num_rows > run[0].max_rows or len(run) >= policy.max_segments)
        if full:
            groups.append(run)
            run, rows = [], 0
        run.append(seg)
        rows += seg.num_rows
    groups.append(run)
    return [g for g in groups if len(g) >= max(2, policy.min_segments)]


def _deleted(seg: Segment, horizon: int, policy: CompactionPolicy) -> bool:
    """Whether the segment's delete records at or before `horizon` reach the ratio."""
    logs = seg.binlogs.get("delta_binlogs", {}).values()
    expired = sum(b["entries"] for b in logs if b["timestamp_to"] <= horizon)
    return expired > 0 and expired >= policy.delete_ratio * seg.num_rows


def _expired(seg: Segment, expire_ts: int) -> bool:
    """Whether the segment holds a row inserted at or before `expire_ts` (0: none expire)."""
    logs = seg.binlogs.get("field_binlogs", {}).values()
    first = min((b["timestamp_from"] for per in logs for b in per.values()), default=None)
    return bool(expire_ts) and first is not None and first <= expire_ts


def group_files(group: list[Segment]) -> dict[str, Any]:
    """Returns what a merge of `group` reads: partition, vchannel, and per segment its id,
    rows, binlog writes in order (field id -> path) and delta log paths."""
    return {
        "partition_id": group[0].partition_id,
        "vchannel": group[0].vchannel,
        "segments": [_files(s) for s in group],
    }


def _files(seg: Segment) -> dict[str, Any]:
    fields = seg.binlogs.get("field_binlogs", {})
    per_field = {
        int(fid): [logs[k]["path"] for k in sorted(logs, key=int)] for fid, logs in fields.items()
    }
    count = max(map(len, per_field.values()), default=0)
    writes = [{fid: p[i] for fid, p in per_field.items() if i < len(p)} for i in range(count)]
    deltas = seg.binlogs.get("delta_binlogs", {})
    return {
        "segment_id": seg.segment_id,
        "num_rows": seg.num_rows,
        "writes": writes,
        "deltas": [deltas[k]["path"] for k in sorted(deltas, key=int)],
    }
