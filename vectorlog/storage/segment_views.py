"""What the data node knows of segments from the coord topic: each segment's channel, whether
it is sealed (and when), whether datacoord started its flush, whether its binlogs cover it,
and up to which tick its binlogs hold its rows and deletes (so a replayed row or delete is not
written twice)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vectorlog.schemas.serde import Event
from vectorlog.storage.channel_fence import ChannelFence

COMPOUND_LOG_ID = 1  # the compound stats log's id (paths.compound_stats_path)


@dataclass
class SegmentView:
    segment_id: int
    collection_id: int = 0
    partition_id: int = 0
    vchannel: str = ""
    seal_ts: int | None = None
    flush_started: bool = False
    flushed: bool = False  # a BinlogPathsSaved with flushed=True was seen
    written_tick: int = 0  # its binlogs hold every row and delete with ts <= this
    rows_written: int = 0
    stats_paths: list[str] = field(default_factory=list)  # one stats log per write
    paths: set[str] = field(default_factory=set)  # every file an event references
    delta_paths: list[str] = field(default_factory=list)  # its delta logs, in order
    dropped: bool = False  # merged into another segment by a compaction


class SegmentViews:
    """Segment views built from coord events, in the order they were appended."""

    def __init__(self) -> None:
        self.by_id: dict[int, SegmentView] = {}
        self.ddl_ts: dict[int, int] = {}  # collection -> newest DDL ts in its DDL binlogs
        self.pending: set[int] = set()  # sealed, not yet written in full
        self.fence = ChannelFence()  # writes of a pchannel another data node owns: ignored

    def get(self, segment_id: int) -> SegmentView:
        if segment_id not in self.by_id:
            self.by_id[segment_id] = SegmentView(segment_id)
        return self.by_id[segment_id]

    def apply(self, event: Event) -> Event | None:
        """Folds one coord event into the views (events of other types are ignored).
        Returns it as admitted (storage.channel_fence; None: a fenced data node write)."""
        admitted = self.fence.admit(event)
        if admitted is None:
            return None
        self._apply(admitted)
        return admitted

    def _apply(self, event: Event) -> None:
        b = event.body
        if event.type == "SegmentOpened":
            seg = self.get(b["segment_id"])
            seg.collection_id, seg.partition_id = b["collection_id"], b["partition_id"]
            seg.vchannel = b["vchannel"]
        elif event.type == "SegmentsSealed":
            for sid in b["segment_ids"]:
                seg = self.get(sid)
                seg.seal_ts = event.ts if seg.seal_ts is None else seg.seal_ts
                if not seg.flushed:
                    self.pending.add(sid)
        elif event.type == "SegmentsFlushStarted":
            for sid in b["segment_ids"]:
                self.get(sid).flush_started = True
        elif event.type == "BinlogPathsSaved":
            self._binlogs_saved(b)
        elif event.type == "SegmentFlushed":
            self.get(b["segment_id"]).flushed = True
            self.pending.discard(b["segment_id"])

    def _binlogs_saved(self, b: dict) -> None:
        seg = self.get(b["segment_id"])
        seg.collection_id, seg.partition_id = b["collection_id"], b["partition_id"]
        seg.vchannel = seg.vchannel or b["vchannel"]
        seg.flushed = seg.flushed or b["flushed"]
        if seg.flushed:
            self.pending.discard(seg.segment_id)
        for fb in b["field_binlogs"] + b["stats_binlogs"]:
            seg.paths.update(log["path"] for log in fb["binlogs"])
        for log in b["delta_binlogs"] + b["ddl_binlogs"]:
            seg.paths.add(log["path"])
        seg.delta_paths += [
            x["path"] for x in b["delta_binlogs"] if x["path"] not in seg.delta_paths
        ]
        for sid in b.get("compacted_from", []):
            self.get(sid).dropped = True
            self.pending.discard(sid)
        end = b["end_position"]
        end = end[1] if isinstance(end, tuple) else end
        if end:
            seg.written_tick = max(seg.written_tick, end["ts"])
        seg.rows_written = max(seg.rows_written, b["num_rows"])
        for fb in b["stats_binlogs"]:
            new = [log["path"] for log in fb["binlogs"] if log["log_id"] != COMPOUND_LOG_ID]
            seg.stats_paths += [path for path in new if path not in seg.stats_paths]
        for log in b["ddl_binlogs"]:
            cid = b["collection_id"]
            self.ddl_ts[cid] = max(self.ddl_ts.get(cid, 0), log["timestamp_to"])

    def referenced(self) -> set[str]:
        """Returns every path some BinlogPathsSaved references."""
        return {p for seg in self.by_id.values() for p in seg.paths}
