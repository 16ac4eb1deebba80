"""What a processor reads: plain records of whole topics from its committed positions
(`RecordSource`: ddl, coord, ingest), or tick-aligned packs of the dml topic
(`tick_aligned`: a `TtMsgStream` that dead-letters through the processor's writer)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.log.base import KnowsFetchedEnds, Log, Reader, Record
from vectorlog.streams.log.lease_fence import FenceState, seeded
from vectorlog.streams.msgstream import StreamPosition, TickPolicy, TtMsgStream

log = logging.getLogger(__name__)

#: {topic: {partition: the next offset to read}}
Positions = dict[str, dict[int, int]]


class RecordSource:
    """Readers of some topics, opened at the positions `positions()` returns (the committed
    ones); `reset` closes them, so the next `open` starts again from what was committed.
    `fence(topic, positions)`: the lease fence state there (streams.snapshots.resume_fence),
    so a reader that starts past a takeover marker hides the fenced leader's late records."""

    def __init__(
        self,
        log_: Log,
        positions: Callable[[], Positions],
        fence: Callable[[str, dict[int, int]], FenceState] | None = None,
    ) -> None:
        self._log, self._positions, self._fence = log_, positions, fence
        self._readers: dict[str, Reader] = {}

    @property
    def is_open(self) -> bool:
        return bool(self._readers)

    def open(self) -> None:
        """Opens a reader per topic at its positions, unless open. Raises LogError."""
        if self._readers:
            return
        try:
            for topic, at in self._positions().items():
                state = None if self._fence is None else self._fence(topic, at)
                self._readers[topic] = seeded(self._log.reader(topic, at), state)
        except Exception:
            self.reset()
            raise

    def topics(self) -> list[str]:
        """Returns the topics read, in the order `positions()` named them."""
        return list(self._readers)

    def poll(self, topic: str, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        """Returns the next records of `topic` (maybe none after `timeout`). Raises
        KeyError if the source is not open, LogError if the log failed."""
        return self._readers[topic].poll(max_records, timeout)

    def fetched_ends(self, topic: str) -> dict[int, int]:
        """Returns {partition: an offset every record of `topic` below which was in the log
        when its reader last fetched} (`KnowsFetchedEnds`; {} from a reader that does not
        know). Raises KeyError if the source is not open."""
        reader = self._readers[topic]
        return reader.fetched_ends() if isinstance(reader, KnowsFetchedEnds) else {}

    def reset(self) -> None:
        """Closes the readers (best effort); nothing read since the last commit counts."""
        readers, self._readers = self._readers, {}
        for reader in readers.values():
            try:
                reader.close()
            except Exception as exc:  # closing a broken reader: nothing more to do
                log.debug("closing a reader failed: %s", exc)

    def close(self) -> None:
        self.reset()


def tick_aligned(
    log_: Log,
    topic: str,
    positions: dict[int, StreamPosition],
    serde: EventSerde,
    dead_letter: DeadLetterWriter,
    clock: Callable[[], int],
    max_skew_ms: int,
    history: Log | None = None,
    ticks: TickPolicy | None = None,
) -> TtMsgStream:
    """Returns a tick-aligned stream of `topic` from `positions` that dead-letters undecodable
    and impossible records through `dead_letter` and skips those it dead-lettered before;
    `history`: the log a batch resumed past is read back from (default `log_`); `ticks`: how
    the writers' ticks are folded (several writers: warm up after resuming)."""
    return TtMsgStream(
        log_,
        topic,
        positions,
        serde,
        dead_letter,
        dead_letter.contains,
        clock,
        max_skew_ms,
        history,
        ticks,
    )
