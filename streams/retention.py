"""Log retention for the embedded log: a sweeper deletes a topic's records that every consumer
is past (the floors its consumers report: the data node's checkpoint, published and committed,
the ingest consumer's mark) and that are older than the retention time or, oldest first, that
take a partition past the retention size (Kafka's retention.bytes: per partition).

Kafka deletes by its topics' `retention.ms` and `retention.bytes` instead (set when the topics
are created), without asking consumers: there the retention must stay well above how far a
consumer can lag.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from vectorlog.core.hybridts import physical_ms
from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Log, Truncatable
from vectorlog.streams.periodic import Periodic

log = logging.getLogger(__name__)

Floor = Callable[[], dict[int, int]]  # partition -> first offset that consumer may still need
#: records looked at past an undecodable one for a timestamp
SCAN_AHEAD = 16


class RetentionSweeper:
    """Deletes, every `interval_s`, the records of `topic` below every floor that are older
    than `retention_ms` (by their event's timestamp, `event_ts(value)`; None: no timestamp)
    or, oldest first, until a partition holds at most `retention_bytes`. None: no such rule."""

    def __init__(
        self,
        log_: Log,
        topic: str,
        event_ts: Callable[[bytes], int | None],
        floors: Sequence[Floor],
        now: Callable[[], int],
        retention_ms: int | None,
        interval_s: float = 60.0,
        *,
        retention_bytes: int | None = None,
    ) -> None:
        """`now()`: the current hybrid ts (the timestamp oracle's). Raises LogError if
        `log_` cannot delete records (Kafka: its topics' retention settings do), ValueError
        if neither retention is set."""
        if not isinstance(log_, Truncatable):
            raise LogError(f"{type(log_).__name__} does not delete records on request")
        if retention_ms is None and retention_bytes is None:
            raise ValueError("a retention sweeper needs retention_ms or retention_bytes")
        self.retention_bytes = retention_bytes
        self.log, self.trunc = log_, log_
        self.topic, self.event_ts, self.floors = topic, event_ts, list(floors)
        self.now, self.retention_ms, self.interval_s = now, retention_ms, interval_s
        self.deleted = 0  # records deleted by this sweeper
        self._periodic = Periodic(f"log retention of {topic}", self.sweep, interval_s)
        self.start, self.stop, self.close = (
            self._periodic.start,
            self._periodic.stop,
            self._periodic.close,
        )

    def sweep(self) -> dict[int, int]:
        """Deletes what retention allows now; returns each partition's start after it.
        Raises LogError."""
        floor = self._floor()
        limit_ms = None
        if self.retention_ms is not None:
            limit_ms = physical_ms(self.now()) - self.retention_ms
        starts = self.trunc.start_offsets(self.topic)
        for p, start in starts.items():
            cut = self._cut(p, start, floor.get(p, start), limit_ms)
            if cut > start:
                starts[p] = self.trunc.truncate(self.topic, p, cut)
                self.deleted += starts[p] - start
                log.info("retention deleted %s[%d] offsets %d..%d", self.topic, p, start, cut - 1)
        return starts

    def _floor(self) -> dict[int, int]:
        """Returns per partition the lowest offset any consumer may still need."""
        out: dict[int, int] = {}
        for floor in self.floors:
            for p, offset in floor().items():
                out[p] = min(out.get(p, offset), offset)
        return out

    def _cut(self, p: int, start: int, floor: int, limit_ms: int | None) -> int:
        """Returns the first offset of partition `p` to keep: past the records the time rule
        (`limit_ms`) or the size rule deletes, never past `floor`."""
        cut = start
        if limit_ms is not None:
            cut = self._first_kept(p, start, floor, limit_ms)
        if self.retention_bytes is not None:
            cut = max(cut, self._first_fitting(p, start, floor, self.retention_bytes))
        return cut

    def _first_fitting(self, p: int, lo: int, hi: int, limit: int) -> int:
        """Returns the first offset in [lo, hi) from which the partition holds at most `limit`
        bytes (a binary search: fewer bytes from a later offset), or `hi` if none is."""
        while lo < hi:
            mid = (lo + hi) // 2
            if self.trunc.bytes_from(self.topic, p, mid) <= limit:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _first_kept(self, p: int, lo: int, hi: int, limit_ms: int) -> int:
        """Returns the first offset in [lo, hi) whose record is newer than `limit_ms` (a
        binary search: timestamps grow along a partition), or `hi` if none is."""
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self._ts_at(p, mid, hi)
            if ts is not None and physical_ms(ts) > limit_ms:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _ts_at(self, p: int, offset: int, end: int) -> int | None:
        """Returns the event ts of the record at `offset` or, if it has none, of one of the
        next SCAN_AHEAD records before `end`; None if none has one."""
        reader = self.log.reader(self.topic, {p: offset})
        try:
            for rec in reader.poll(min(SCAN_AHEAD, max(1, end - offset)), timeout=0):
                ts = self.event_ts(rec.value)
                if ts is not None:
                    return ts
            return None
        finally:
            reader.close()
