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

Batches (`streams.batches`): the records of one append that carry a batch header are released
together. A partition's pack that would hold a part of a batch not yet whole waits, with the
packs after it on that partition, until the batch is whole (every part read) or torn (a tick at
or past its ts read on every partition short of parts): a torn batch's parts are dead-lettered,
naming their batch and position, and never delivered. So a multi-partition write that a crash
cut short on Kafka is never partly visible.

Sources (seed 001 s.10.5, the soft barrier): every writer of a partition appends its own ticks,
named by `TimeTick.source` (a proxy, rootcoord for DDL broadcasts, datacoord). A partition's
tick is the minimum over its live sources' latest ticks, and never goes back. A source is live
while its latest tick is within `TickPolicy.liveness_ms` of the newest tick read on the
partition (log time, so every replay decides alike); one that falls behind leaves the minimum,
and a new source joins at its first tick. A stream resumed with `warm_up` (several writers: the
cluster runner) waits until the ticks read span a liveness window before it cuts, so every live
source was heard (a writer that holds the only lease, `Standalone`, needs no warm-up). The
window may begin before the resume offset: a stream resumed at a tick first reads back the
ticks of the liveness window before it (`streams.tickback`; their events are not delivered
again), so it cuts at once rather than a liveness window of new ticks later.

Idle sources: a tick with `idle` set says its source has nothing in flight and appends nothing
before a tick without the flag (processors.rootcoord.timesync): the source leaves the minimum
until such a tick, so a Strong read waits only for the sources busy when it began. With every
live source idle, the partition's tick is the newest tick read: a source that becomes busy
again stamps only after its active tick is on the log, above every tick before it.

Leases (rootcoord's, datacoord's): a source that ticks under a lease names it and its epoch.
The first tick of a newer epoch read on a partition drops every source of an older epoch of
that lease from the partition's minimum at once, and later ticks of an older epoch are
ignored: a standby that took over need not wait out the liveness window for its dead leader.
That passes nothing a live source could still stamp: the older epoch's holder was fenced
before the newer epoch existed, and every append it acknowledged was on the log, so before
the newer epoch's ticks on every partition (`streams.log.fenced` checks the lease after an
append as well as before).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

from vectorlog.core.hybridts import LOGICAL_BITS, compose, physical_ms, wall_ms
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.batches import Batches, BatchTag, Shortfall, count_back
from vectorlog.streams.log.base import Log, Record, start_offsets
from vectorlog.streams.tickback import ticks_before

TIME_TICK = "TimeTick"
#: DDL copies broadcast into every pchannel; a repeated one (with its original ts) is a no-op
BROADCAST_DDL = frozenset(
    {"CollectionCreated", "CollectionDropped", "PartitionCreated", "PartitionDropped"}
)
#: how far ahead of the clock an event's ts may be (VECTORLOG_MAX_CLOCK_SKEW_MS)
DEFAULT_MAX_SKEW_MS = 60_000
DeadLetterSink = Callable[[Record, str], None]
#: a source whose latest tick is this far behind the newest on its partition leaves the minimum
DEFAULT_LIVENESS_MS = 5_000
#: the reason a torn batch's part is dead-lettered with
TORN_REASON = "torn batch: a tick passed its ts on every partition before all its parts came"


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


@dataclass(frozen=True)
class TickPolicy:
    """How a stream folds its sources' ticks: `liveness_ms`, how far behind the newest tick a
    source's latest may be and stay in the minimum; `warm_up`, whether a resumed partition
    waits for a liveness window of ticks before it cuts (several writers)."""

    liveness_ms: int = DEFAULT_LIVENESS_MS
    warm_up: bool = False


@dataclass
class _PartitionState:
    last_tick: int  # the partition's tick: the minimum over live sources, never going back
    resumed: StreamPosition
    cut_tick: int = 0  # the end of the last pack cut
    sources: dict[str, int] = field(default_factory=dict)  # live source -> its latest tick
    idle: dict[str, int] = field(default_factory=dict)  # live idle source -> its latest tick
    heard: dict[str, int] = field(default_factory=dict)  # every source -> its latest tick
    read_to: int = -1  # the offset of the last record read
    warm_from: int | None = None  # the first tick read after resuming, while warming up
    #: (offset, event, its batch id or None) read, not yet cut
    pending: list[tuple[int, Event, str | None]] = field(default_factory=list)
    ticks: list[tuple[int, int]] = field(default_factory=list)  # (tick, offset) read, not yet cut
    #: lease -> (its newest epoch read here, the sources that ticked under that epoch)
    epochs: dict[str, tuple[int, set[str]]] = field(default_factory=dict)


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
        history: Log | None = None,
        ticks: TickPolicy | None = None,
    ) -> None:
        """`seen(record)`: whether `dead_letter` took that record before (it is skipped);
        `clock()`: now as a hybrid ts (the timestamp oracle's, or the wall clock); `history`:
        the log to read back from for batches resumed past (default `log`); `ticks`: how
        sources' ticks are folded (default TickPolicy())."""
        self._ticks = ticks or TickPolicy()
        self._serde, self._dead_letter = serde, dead_letter
        self._seen = seen or (lambda rec: False)
        self._clock, self._skew_ms, self._horizon = clock, max_skew_ms, 0
        self._backlog: list[Record] = []  # read, not yet accepted (a dead letter failed)
        self._topic, self._history = topic, history or log
        self._state = {p: self._resumed(p, pos) for p, pos in positions.items()}
        self._batches = Batches(self._count_back)
        #: torn batches whose parts are being dead-lettered -> why (named in the letters)
        self._torn: dict[str, str] = {}
        self._reader = log.reader(topic, {p: pos.offset for p, pos in positions.items()})
        serde.shared.join(topic)  # its other readers in this process share large decodes

    def consume(self, timeout: float = 0.1, max_records: int = 2000) -> list[MsgPack]:
        """Returns the packs completed by the records read within `timeout` (maybe none).

        If writing a dead letter fails, the packs cut so far are returned and the records
        not yet accepted are kept for the next call: nothing read is ever dropped, and no
        tick after an unresolved record is passed on. Raises what the sink raised if it
        failed on the first record, or on a torn batch's part (the caller retries later).
        """
        records = self._backlog or self._reader.poll(max_records, timeout)
        self._backlog, failed = [], None
        for i, rec in enumerate(records):
            try:
                self._accept(rec)
            except Exception as exc:
                self._backlog, failed = list(records[i:]), (i, exc)
                break
        packs = self._release()
        if failed is not None and failed[0] == 0 and not packs:
            raise failed[1]
        return packs

    def _accept(self, rec: Record) -> None:
        self._state[rec.partition].read_to = rec.offset
        tag = BatchTag.of(rec)
        if self._seen(rec):  # dead-lettered before: final (a part still counts for its batch)
            if tag is not None:
                self._batches.add(tag, rec, self._serde.stamp(rec.value))
            return
        try:
            event = self._serde.decode_at((self._topic, rec.partition, rec.offset), rec.value)
        except MalformedEvent as exc:
            if tag is not None:
                self._batches.add(tag, rec, None)
            self._dead_letter(rec, exc.reason)
            return
        event.source = (rec.partition, rec.offset)
        st = self._state[rec.partition]
        if event.type != TIME_TICK and _delivered(st.resumed, rec.offset, event.ts):
            return
        problem = self._impossible(st, rec, event)
        if problem is not None:
            self._dead_letter(rec, problem)
            return
        if event.type != TIME_TICK:
            if tag is not None:
                self._batches.add(tag, rec, event.ts)
            st.pending.append((rec.offset, event, tag.id if tag is not None else None))
        elif event.ts > 0 and _current(st, event.body):  # else an end marker, or fenced
            self._tick(st, event, rec.offset)

    def _resumed(self, partition: int, pos: StreamPosition) -> _PartitionState:
        st = _PartitionState(pos.tick, pos, pos.tick)
        if self._ticks.warm_up:
            st.warm_from = -1  # set at the first tick read
            if pos.tick_offset >= 0:  # resumed at a tick: the window's ticks before it
                self._read_back(partition, st)
        return st

    def _read_back(self, partition: int, st: _PartitionState) -> None:
        """Folds in the ticks of the liveness window before the resume offset (their
        sources, epochs and the warm-up's start), cutting nothing (module docstring)."""
        floor = st.resumed.tick - (self._ticks.liveness_ms << LOGICAL_BITS)
        start = start_offsets(self._history, self._topic).get(partition, 0)
        back = ticks_before(
            self._history, self._topic, partition, st.resumed.offset, floor, self._back_tick, start
        )
        for offset, event in back:
            if _current(st, event.body):
                self._tick(st, event, offset, cut=False)

    def _back_tick(self, rec: Record) -> Event | None:
        """Returns the tick `rec` holds as the stream would count it, else None."""
        if self._seen(rec):
            return None
        try:
            event = self._serde.decode(rec.value)
        except MalformedEvent:
            return None
        ok = event.type == TIME_TICK and event.ts > 0 and not self._ahead(event.ts)
        return event if ok else None

    def _tick(self, st: _PartitionState, event: Event, offset: int, cut: bool = True) -> None:
        """Folds one source's tick into the partition's: the minimum over live sources that
        are not idle, else the newest tick (a source whose latest tick is a liveness window
        behind the newest is dropped). `cut` False: a tick read back, which moves nothing
        past the resumed tick."""
        source, ts = str(event.body.get("source", "")), event.ts
        if event.body.get("idle"):
            st.sources.pop(source, None)
            st.idle[source] = max(ts, st.idle.get(source, 0))
        else:
            st.idle.pop(source, None)
            st.sources[source] = max(ts, st.sources.get(source, 0))
        st.heard[source] = max(ts, st.heard.get(source, 0))
        newest = max([*st.sources.values(), *st.idle.values()])
        floor = newest - (self._ticks.liveness_ms << LOGICAL_BITS)
        st.sources = {s: t for s, t in st.sources.items() if t >= floor}
        st.idle = {s: t for s, t in st.idle.items() if t >= floor}
        if st.warm_from is not None:
            if st.warm_from < 0:
                st.warm_from = ts
            if newest - st.warm_from < self._ticks.liveness_ms << LOGICAL_BITS:
                return  # a live source may not have been heard yet
            st.warm_from = None
        tick = min(st.sources.values(), default=newest)  # every live source idle: the newest
        if cut and tick > st.last_tick:  # else a repeated or stale tick, or a source behind
            st.last_tick = tick
            st.ticks.append((tick, offset))

    def _release(self) -> list[MsgPack]:
        """Decides the batches it can, drops the torn ones' parts, and cuts every pack whose
        tick was read and that holds no part of an undecided batch, in order per partition.
        Raises what the sink raised on a torn part (the rest are dropped on the next call)."""
        if self._batches.has_open():
            resumed = {p: st.resumed.tick for p, st in self._state.items()}
            read = {p: st.last_tick for p, st in self._state.items()}
            for batch_id, short in self._batches.resolve(resumed, read)[1].items():
                self._torn[batch_id] = self._why_torn(short)
        for batch_id in sorted(self._torn):
            self._drop(batch_id)
        packs = []
        for p, st in self._state.items():
            while st.ticks and not self._held(st, st.ticks[0][0]):
                tick, offset = st.ticks.pop(0)
                packs.append(self._cut(p, st, tick, offset))
        return packs

    def _held(self, st: _PartitionState, tick: int) -> bool:
        """Whether the pack up to `tick` would hold a part of an undecided batch."""
        if not self._batches.has_open():
            return False
        return any(
            b is not None and e.ts <= tick and self._batches.is_open(b) for _, e, b in st.pending
        )  # (a part read after the tick would break its promise: it was dead-lettered)

    def _drop(self, batch_id: str) -> None:
        """Dead-letters the read parts of a torn batch and forgets them."""
        why = self._torn[batch_id]
        for p, st in self._state.items():
            for offset, event, b in list(st.pending):
                if b != batch_id:
                    continue
                rec = Record(self._topic, p, offset, self._serde.encode(event))
                reason = f"{TORN_REASON} (batch {batch_id}, ts {event.ts} = {_clock(event.ts)}"
                self._dead_letter(rec, f"{reason}; {why})")
                st.pending.remove((offset, event, b))
        del self._torn[batch_id]

    def _why_torn(self, short: Shortfall) -> str:
        """Returns, per partition short of a torn batch's parts, how many were read, up to
        which offset, and the sources' ticks that made the partition's tick pass the batch
        (the live ones, the minimum's first; then those a liveness window behind)."""
        out = []
        for p, (have, want) in sorted(short.items()):
            st = self._state[p]
            live = sorted(st.sources.items(), key=lambda s: s[1])
            gone = sorted((s, t) for s, t in st.heard.items() if s not in st.sources)
            ticks = ", ".join(f"{s} {_clock(t)}" for s, t in live)
            behind = ", ".join(f"{s} {_clock(t)}" for s, t in gone) or "none"
            out.append(
                f"partition {p}: {have} of {want} parts read by offset {st.read_to}, its tick "
                f"{_clock(st.last_tick)}; live sources' ticks {ticks}; sources not live {behind}"
            )
        return "; ".join(out)

    def _count_back(self, tag: BatchTag, partition: int, ts: int) -> int:
        """Returns the parts of a batch that a partition resumed past holds (read back)."""
        resumed = self._state[partition].resumed
        if resumed.tick_offset < 0:
            return tag.parts(partition)
        start = start_offsets(self._history, self._topic).get(partition, 0)
        return count_back(
            self._history, self._topic, partition, resumed.tick_offset, tag, ts, self._ts_of, start
        )

    def _ts_of(self, rec: Record) -> tuple[int, bool] | None:
        try:
            event = self._serde.decode(rec.value)
        except Exception:
            return None
        return event.ts, event.type == TIME_TICK

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

    def _cut(self, partition: int, st: _PartitionState, tick: int, offset: int) -> MsgPack:
        # what was read after the tick (a DDL broadcast again) goes with the next one
        ready = [(o, e) for o, e, _ in st.pending if e.ts <= tick and o < offset]
        st.pending = [(o, e, b) for o, e, b in st.pending if e.ts > tick or o > offset]
        ready.sort(key=lambda oe: (oe[1].ts, oe[0]))
        resume = min([o for o, _, _ in st.pending], default=offset + 1)
        pack = MsgPack(partition, st.cut_tick, tick, [e for _, e in ready], resume, offset)
        st.cut_tick = tick
        return pack

    def close(self) -> None:
        self._reader.close()
        self._serde.shared.leave(self._topic)


def _current(st: _PartitionState, body: dict[str, object]) -> bool:
    """Returns whether a tick with `body` counts: False for a tick of a lease's older epoch
    than one read on this partition. A newer epoch's first tick drops the older epoch's
    sources from the partition's minimum."""
    lease, epoch = str(body.get("lease") or ""), int(cast(int, body.get("epoch") or 0))
    if not lease:
        return True
    newest, sources = st.epochs.get(lease, (-1, set()))
    if epoch < newest:
        return False
    if epoch > newest:
        for source in sources:
            st.sources.pop(source, None)
            st.idle.pop(source, None)
        st.epochs[lease] = (epoch, sources := set())
    sources.add(str(body.get("source", "")))
    return True


def _clock(ts: int) -> str:
    """Returns a hybrid ts's physical time as UTC HH:MM:SS.mmm (for operators)."""
    return datetime.fromtimestamp(physical_ms(ts) / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def _delivered(resumed: StreamPosition, offset: int, ts: int) -> bool:
    """Whether an event re-read after resuming at `resumed` was delivered before the stop."""
    return ts <= resumed.tick and offset < resumed.tick_offset
