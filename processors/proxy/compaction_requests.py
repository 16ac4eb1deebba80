"""The commit of a compaction: the segment its merge wrote replaces the merged ones at one
stamped ts, through one SegmentsCompacted on the merged segments' vchannel (dml).

Readers apply it in ts order with the vchannel's other events: the data node points the
merged segments' keys at the new one (later deletes go to it) and records it Flushed on coord
with the merged ones Dropped; the query node moves their rows into it. Before the append
nothing references the new files: a failed or killed compaction leaves the old segments
serving.
"""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import VectorlogError
from vectorlog.core.model import CollectionInfo
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Append

#: the ImportedSegment fields of a merge's result
SEGMENT_FIELDS = ("segment_id", "num_rows", "field_binlogs", "stats_binlogs")


class CompactionConflict(VectorlogError):
    """The segments a compaction merged changed meanwhile (not all Flushed any more)."""

    def __init__(self, plan_id: int, states: dict[int, str]) -> None:
        super().__init__(f"compaction {plan_id}: segments are no longer Flushed: {states}")
        self.states = states


def check_flushed(plan_id: int, infos: list[dict[str, Any]]) -> None:
    """Raises CompactionConflict unless every segment info says Flushed."""
    states = {i["segment_id"]: i["state"] for i in infos if i["state"] != "Flushed"}
    if states:
        raise CompactionConflict(plan_id, states)


def compacted_event(
    info: CollectionInfo,
    group: dict[str, Any],
    result: dict[str, Any],
    plan_id: int,
    horizon: int,
    ts: int,
    serde: EventSerde,
) -> Append:
    """Returns the SegmentsCompacted record of a merge's `result` for `group` (see
    datacoord's compaction_policy.group_files), stamped `ts`."""
    vch = group["vchannel"]
    body = {
        "collection_id": info.collection_id,
        "partition_id": group["partition_id"],
        "plan_id": plan_id,
        "compacted_from": [s["segment_id"] for s in group["segments"]],
        "consumed_deltas": result["consumed_deltas"],
        "horizon": horizon,
        "segment": {k: result[k] for k in SEGMENT_FIELDS},
        "delta_binlogs": result["delta_binlogs"],
    }
    event = Event("SegmentsCompacted", ts, body, info.collection_id, vch)
    pch = info.pchannels[info.vchannels.index(vch)]
    return Append(pch, serde.encode(event), serde.vchannel_key(vch))
