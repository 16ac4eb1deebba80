"""Time-tick aligned consumption of a partitioned topic (seed 001 s.5.3, PulsarTtMsgStream).

Each partition (pchannel) carries events and TimeTicks. A tick with ts T promises no event
with ts <= T follows on that partition. `TtMsgStream.consume` yields, per partition, a
`MsgPack` holding every event with ts in (previous tick, T], ordered by ts; events with a
larger ts wait in an unsolved buffer for the next tick. Undecodable records go to the
dead-letter sink with their reason and position, and consumption goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Log, Record

TIME_TICK = "TimeTick"
DeadLetterSink = Callable[[Record, str], None]


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
    ) -> None:
        self._serde, self._dead_letter = serde, dead_letter
        self._backlog: list[Record] = []  # read, not yet accepted (a dead letter failed)
        self._state = {p: _PartitionState(pos.tick, pos) for p, pos in positions.items()}
        self._reader = log.reader(topic, {p: pos.offset for p, pos in positions.items()})

    def consume(self, timeout: float = 0.1, max_records: int = 2000) -> list[MsgPack]:
        """Returns the packs completed by the records read within `timeout` (maybe none).

        If writing a dead letter fails, the packs cut so far are returned and the records
        not yet accepted are kept for the next call: nothing read is ever dropped.
        """
        records = self._backlog or self._reader.poll(max_records, timeout)
        self._backlog, packs = [], list[MsgPack]()
        for i, rec in enumerate(records):
            try:
                pack = self._accept(rec)
            except Exception:
                if not packs and i == 0:
                    self._backlog = list(records)
                    raise
                self._backlog = list(records[i:])
                break
            if pack is not None:
                packs.append(pack)
        return packs

    def _accept(self, rec: Record) -> MsgPack | None:
        try:
            event = self._serde.decode(rec.value)
        except MalformedEvent as exc:
            self._dead_letter(rec, exc.reason)
            return None
        event.source = (rec.partition, rec.offset)
        st = self._state[rec.partition]
        if event.type != TIME_TICK:
            if not (event.ts <= st.resumed.tick and rec.offset < st.resumed.tick_offset):
                st.pending.append((rec.offset, event))
            return None
        if event.ts <= st.last_tick:
            return None  # a repeated or stale tick promises nothing new
        return self._cut(rec, st, event.ts)

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
