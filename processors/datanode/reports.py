"""What the data node tells datacoord between flushes (DataNodeTicked on coord, as Milvus's
data node sends its segments' stats with its time tick): a vchannel's tick once it passed the
seal ts of a segment there, and the rows of its growing segments when they changed."""

from __future__ import annotations

import time
from collections.abc import Callable

from vectorlog.processors.datanode.service import RefBuffer
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage.buffers import InsertBuffer
from vectorlog.storage.segment_views import SegmentViews
from vectorlog.storage.writer import SegmentRef
from vectorlog.streams.log.base import Append, Log

#: how often the rows of growing segments are reported to datacoord, when they changed (as
#: Milvus's data node sends its segments' stats with its time tick, dataNode.timetick.interval)
ROWS_REPORT_EVERY_S = 1.0


class TickReports:
    """The reports of one data node: it reads the node's segment views, buffers and refs
    (the same dicts), and remembers what it last reported."""

    def __init__(
        self,
        log: Log,
        topic: str,
        serde: EventSerde,
        views: SegmentViews,
        buffers: dict[int, InsertBuffer | RefBuffer],
        refs: dict[int, SegmentRef],
        tick_of: Callable[[str], int],
    ) -> None:
        """`topic` is coord; `tick_of(vchannel)` is the tick the node consumed it to."""
        self.log, self.topic, self.serde = log, topic, serde
        self.views, self.buffers, self.refs, self.tick_of = views, buffers, refs, tick_of
        self._reported: dict[str, int] = {}
        self._rows_reported: dict[int, int] = {}  # segment -> the rows last reported
        self._rows_reported_at = 0.0  # time.monotonic() of the last rows report

    def forget(self, sid: int) -> None:
        """Forgets the rows reported of a segment flushed (they reach datacoord in
        SegmentFlushed) or dropped."""
        self._rows_reported.pop(sid, None)

    def report_ticks(self) -> None:
        """Tells datacoord a vchannel's tick once it passed the seal ts of a segment there."""
        due: dict[str, int] = {}
        for seg in (self.views.by_id[sid] for sid in self.views.pending):
            if seg.seal_ts is None or seg.flush_started or seg.flushed or not seg.vchannel:
                continue
            tick = self.tick_of(seg.vchannel)
            if tick >= seg.seal_ts and self._reported.get(seg.vchannel, 0) < seg.seal_ts:
                due[seg.vchannel] = tick
        self._append_ticks(due)

    def report_rows(self) -> None:
        """Tells datacoord, at most once every ROWS_REPORT_EVERY_S, the rows of the growing
        segments of each vchannel where some gained rows since its last report (with the
        vchannel's tick), so that a Growing segment's num_rows is right without a flush."""
        now = time.monotonic()
        if now - self._rows_reported_at < ROWS_REPORT_EVERY_S:
            return
        self._rows_reported_at = now
        changed = {
            self.refs[sid].vchannel
            for sid in self.buffers
            if self._rows_reported.get(sid) != self.rows_of(sid)
        }
        self._append_ticks({vch: self.tick_of(vch) for vch in changed})

    def _append_ticks(self, due: dict[str, int]) -> None:
        """Appends a DataNodeTicked per vchannel of `due` ({vchannel: tick}) to coord."""
        events = [self._ticked(vch, tick) for vch, tick in due.items()]
        if events:
            self.log.append(
                self.topic,
                [Append(0, self.serde.encode(e), self.serde.key(e)) for e in events],
            )
            for vch, tick in due.items():
                self._reported[vch] = max(self._reported.get(vch, 0), tick)
            for e in events:
                self._rows_reported.update(
                    (r["segment_id"], r["num_rows"]) for r in e.body["segments"]
                )

    def _ticked(self, vch: str, tick: int) -> Event:
        """Returns the DataNodeTicked of `vch` at `tick`: the rows of each of its buffered
        segments (those in its binlogs already, and those buffered)."""
        rows = [
            {"segment_id": sid, "num_rows": self.rows_of(sid)}
            for sid in self.buffers
            if self.refs[sid].vchannel == vch
        ]
        return Event("DataNodeTicked", tick, {"vchannel": vch, "tick": tick, "segments": rows})

    def rows_of(self, sid: int) -> int:
        """Returns the rows of a buffered segment: written to its binlogs and buffered."""
        view = self.views.by_id.get(sid)
        return (view.rows_written if view is not None else 0) + self.buffers[sid].num_rows
