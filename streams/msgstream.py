"""Time-tick aligned consumption of a partitioned topic (seed 001 s.5.3, PulsarTtMsgStream).

Each partition (pchannel) carries events and TimeTicks. A tick with ts T promises no event
with ts <= T follows on that partition. `TtMsgStream.consume` yields, per partition, a
`MsgPack` holding every event with ts in (previous tick, T], ordered by ts; events with a
larger ts wait in an unsolved buffer for the next tick. Records go to the dead-letter sink
with their reason and position, and consumption goes on, when they:
  * cannot be decoded;
  * carry an impossible timestamp: ahead of the clock by more than `max_skew_ms` (any event,
    ticks too: a future tick would promise past events not yet written, a future row would
    wait for a tick forever), or a data event at or below a tick read before it on its
    partition (it breaks that tick's promise). Broadcast DDL may go back: rootcoord's
    recovery re-broadcasts a DDL with its original ts, and consumers treat it as a no-op.
A record the sink dead-lettered before (`seen`) is skipped without a second look: the
decision is final, even once the clock has passed its ts, so every replay agrees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vectorlog.core.hybridts import LOGICAL_BITS, compose, physical_ms, wall_ms
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Log, Record

TIME_TICK = "TimeTick"
#: DDL copies broadcast into every pchannel; a repeated one (with its original ts) is a no-op
BROADCAST_DDL = frozenset(
    {"CollectionCreated", "CollectionDropped", "PartitionCreated", "PartitionDropped"}
)
#: how far ahead of the clock an event's ts may be (VECTORLOG_MAX_CLOCK_SKEW_MS)
DEFAULT_MAX_SKEW_MS = 60_000
DeadLetterSink = Callable[[Record, str], None]


def wall_clock() -> int:
    """Returns the wall clock as a hybrid timestamp."""
    return compose(wall_ms())


@dataclass
class MsgPack:
    """The events of one partition with ts in (begin_ts, end_ts], in ts order."""

    partition: int
    begin_ts: int
    end_ts: int
    events: list[Event]
    resume_offset: int  # the first offset not fully consumed
    tick_offset: int  # offset of the tick that closed this pack

    @property
    def position(self) -> StreamPosition:
        """Returns the position to store with state derived from this pack."""
        return StreamPosition(self.resume_offset, self.end_ts, self.tick_offset)

    def by_vchannel(self) -> dict[str, list[Event]]:
        """Returns the events grouped by vchannel, each group in ts order."""
        out: dict[str, list[Event]] = {}
        for e in self.events:
            out.setdefault(e.vchannel, []).append(e)
        return out


@dataclass(frozen=True)
class StreamPosition:
    """Where to resume one partition: the first offset not fully consumed, the last tick
    consumed and that tick's offset. Events re-read from `offset` with ts <= `tick` and an
    offset before `tick_offset` were delivered already and are skipped."""

    offset: int = 0
    tick: int = 0
    tick_offset: int = -1


@dataclass
class _PartitionState:
    last_tick: int
    resumed: StreamPosition
    pending: list[tuple[int, Event]] = field(default_factory=list)  # (offset, event)


class TtMsgStream:
    """Consumes partitions of a topic and emits tick-aligned `MsgPack`s."""

    def __init__(
        self,
        log: Log,
        topic: str,
        positions: dict[int, StreamPosition],
        serde: EventSerde,
        dead_letter: DeadLetterSink,
        seen: Callable[[Record], bool] | None = None,
        clock: Callable[[], int] = wall_clock,
        max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
    ) -> None:
        """`seen(record)`: whether `dead_letter` took that record before (it is skipped);
        `clock()`: now as a hybrid ts (the timestamp oracle's, or the wall clock)."""
        self._serde, self._dead_letter = serde, dead_letter
        self._seen = seen or (lambda rec: False)
        self._clock, self._skew_ms, self._horizon = clock, max_skew_ms, 0
        self._backlog: list[Record] = []  # read, not yet accepted (a dead letter failed)
        self._state = {p: _PartitionState(pos.tick, pos) for p, pos in positions.items()}
        self._reader = log.reader(topic, {p: pos.offset for p, pos in positions.items()})

    def consume(self, timeout: float = 0.1, max_records: int = 2000) -> list[MsgPack]:
        """Returns the packs completed by the records read within `timeout` (maybe none).

        If writing a dead letter fails, the packs cut so far are returned and the records
        not yet accepted are kept for the next call: nothing read is ever dropped, and no
        tick after an unresolved record is passed on. Raises what the sink raised if it
        failed on the first record (the caller retries later).
        """
        records = self._backlog or self._reader.poll(max_records, timeout)
        self._backlog, packs = [], list[MsgPack]()
        for i, rec in enumerate(records):
            try:
                pack = self._accept(rec)
            except Exception:
                self._backlog = list(records[i:])
                if not packs and i == 0:
                    raise
                break
            if pack is not None:
                packs.append(pack)
        return packs

    def _accept(self, rec: Record) -> MsgPack | None:
        if self._seen(rec):
            return None  # dead-lettered before: final
        try:
            event = self._serde.decode(rec.value)
        except MalformedEvent as exc:
            self._dead_letter(rec, exc.reason)
            return None
        event.source = (rec.partition, rec.offset)
        st = self._state[rec.partition]
        if event.type != TIME_TICK and _delivered(st.resumed, rec.offset, event.ts):
            return None
        problem = self._impossible(st, rec, event)
        if problem is not None:
            self._dead_letter(rec, problem)
            return None
        if event.type != TIME_TICK:
            st.pending.append((rec.offset, event))
            return None
        if event.ts <= st.last_tick:
            return None  # a repeated or stale tick (or an end marker) promises nothing new
        return self._cut(rec, st, event.ts)

    def _impossible(self, st: _PartitionState, rec: Record, event: Event) -> str | None:
        """Returns why the event's ts cannot be trusted, or None if it can."""
        if self._ahead(event.ts):
            ahead = physical_ms(event.ts) - physical_ms(self._horizon) + self._skew_ms
            return (
                f"timestamp from the future: {event.type} ts {event.ts} is {ahead} ms ahead of "
                f"the clock (max_clock_skew_ms {self._skew_ms})"
            )
        if event.type == TIME_TICK or event.type in BROADCAST_DDL or event.ts > st.last_tick:
            return None
        return (
            f"{event.type} ts {event.ts} is at or below tick {st.last_tick}, read before it on "
            f"partition {rec.partition}: it breaks that tick's promise"
        )

    def _ahead(self, ts: int) -> bool:
        """Whether `ts` is more than the allowed skew ahead of the clock (read only when `ts`
        passes the horizon computed at the last reading)."""
        if ts <= self._horizon:
            return False
        self._horizon = self._clock() + (self._skew_ms << LOGICAL_BITS)
        return ts > self._horizon

    def _cut(self, rec: Record, st: _PartitionState, tick: int) -> MsgPack:
        ready = [(o, e) for o, e in st.pending if e.ts <= tick]
        st.pending = [(o, e) for o, e in st.pending if e.ts > tick]
        ready.sort(key=lambda oe: (oe[1].ts, oe[0]))
        resume = min([o for o, _ in st.pending], default=rec.offset + 1)
        pack = MsgPack(rec.partition, st.last_tick, tick, [e for _, e in ready], resume, rec.offset)
        st.last_tick = tick
        return pack

    def close(self) -> None:
        self._reader.close()


def _delivered(resumed: StreamPosition, offset: int, ts: int) -> bool:
    """Whether an event re-read after resuming at `resumed` was delivered before the stop."""
    return ts <= resumed.tick and offset < resumed.tick_offset
