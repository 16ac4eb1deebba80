"""Time synchronization (seed 001 s.6.3, s.10.5): tick sources, the soft barrier, the ticker.

Every writer of the dml topic (each proxy, and rootcoord for DDL broadcasts) is a
`TickSource`: it stamps a request with a fresh timestamp and keeps it "in flight" until its
append returned. A source's tick is a promise that none of its future appends has a ts at or
below it: the smallest in-flight ts minus one, or a fresh timestamp when nothing is in flight.
The soft barrier takes the minimum over sources, and the `Ticker` appends that tick to every
pchannel every `interval` seconds (or sooner when asked, so Strong reads need not wait). A
request for a tick past a ts that the next tick cannot cover yet (a write stamped below it is
still in flight) stays pending: the ticker looks again every RETRY_S until a tick covers it,
rather than leaving the read to the next interval (a read behind a stream of writes, such as
the ingest consumer's, would otherwise wait most of an interval).

Each process that writes dml has its own barrier and `Ticker`, whose ticks carry the process's
source id: consumers take the minimum over the live sources (streams.msgstream). A lone writer
(`Standalone`, holding the cluster's only lease) skips ticks while nothing was stamped, and a
Strong read appends nothing when nothing was stamped since the last tick: it is served at that
tick (`Ticker.quiet_tick`). One of several writers (a process of the cluster mode) ticks even
when idle, every `idle_every` (VECTORLOG_IDLE_TICK_INTERVAL_MS) rather than every interval: its
ticks are its heartbeat, and consumers drop a silent source from the minimum; a read that
needs a newer tick asks for one. Requests for a tick made while one is being appended are
served together by the next one.

Idle writers (several writers, docs/cluster.md "Strong reads and idle writers"): a writer of
several ticks at once when its last stamp in flight ends, and once nothing was stamped for
IDLE_AFTER_S (`idle_after`; doubled, up to the interval, while it wakes up again within an
interval of its idle ticks: a trickle of writes) its next tick is idle (`TimeTick.idle`): a
promise to append nothing before a tick without the flag, so the consumers leave it out of
their minimum and a Strong read waits only for the writers busy when it began. A writer is idle
from its start. Its next stamp first appends an active tick (not below its last) and waits for
it to be on the log, then moves its clock past every timestamp the oracle gave out until then
(`fresh`), and only then stamps: every tick another writer appended before that active tick was
computed before it, so the stamp is above it. The gate orders stamps against the idle ticks: an
idle tick is appended only while no stamp is in flight, and a stamp waits while one is being
appended. A writer whose last tick's value is `stalled_after` old (its process was paused or
starved: the consumers may have dropped it from their minimum as a silent source, and a tick
computed before a pause may be appended after it) re-enters the same way: its next tick is idle
(if nothing is in flight), and its next stamp moves the clocks, appends an active tick of a
fresh value and moves them again, whichever of the two comes first.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.log.base import Append, Log

log = logging.getLogger(__name__)

#: how often the ticker looks again while a requested tick is not yet covered
RETRY_S = 0.002
#: a writer of several goes idle once nothing was stamped for this long (or the interval)
IDLE_AFTER_S = 0.05


class Clock(Protocol):
    """A source of fresh timestamps: the oracle, or a network client of it."""

    def now(self) -> int: ...


class TickSource:
    """Stamps requests and reports the tick it can promise (a proxy's time tick)."""

    def __init__(self, name: str, tso: Clock) -> None:
        self.name, self._tso = name, tso
        self._lock = threading.Lock()
        self._inflight: dict[int, int] = {}  # ts -> count
        self.activity = 0  # stamps begun + ended: unchanged means nothing new to promise
        #: entered around each stamp's start (the barrier's gate: a Ticker's idle protocol)
        self.gate: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext
        #: called when a stamp ends with none of this source's in flight
        self.settled: Callable[[], None] = lambda: None

    @contextlib.contextmanager
    def stamp(self) -> Iterator[int]:
        """Yields a fresh ts that stays in flight (holding the tick back) until exit."""
        with self.gate(), self._lock:
            ts = self._tso.now()
            self._inflight[ts] = self._inflight.get(ts, 0) + 1
            self.activity += 1
        try:
            yield ts
        finally:
            with self._lock:
                self._inflight[ts] -= 1
                self.activity += 1
                if not self._inflight[ts]:
                    del self._inflight[ts]
                settled = not self._inflight
            if settled:
                self.settled()

    def tick(self) -> int:
        """Returns a ts no future append of this source will be at or below."""
        with self._lock:
            if self._inflight:
                return min(self._inflight) - 1
            return self._tso.now()

    def busy(self) -> bool:
        """Returns whether a stamp of this source is in flight."""
        with self._lock:
            return bool(self._inflight)


class SoftBarrier:
    """The minimum of the ticks reported by every registered source."""

    def __init__(self) -> None:
        self._sources: list[TickSource] = []
        self._lock = threading.Lock()
        self._gate: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext
        self._settled: Callable[[], None] = lambda: None

    def register(self, source: TickSource) -> TickSource:
        """Returns `source`, its stamps now counted in the barrier's tick."""
        source.gate, source.settled = self.gate, self.settled
        with self._lock:
            self._sources.append(source)
        return source

    def guard(
        self, gate: Callable[[], AbstractContextManager[object]], settled: Callable[[], None]
    ) -> None:
        """Makes every stamp start inside `gate()` and call `settled()` when no stamp of
        any source is left in flight (a Ticker's idle protocol)."""
        self._gate, self._settled = gate, settled

    def gate(self) -> AbstractContextManager[object]:
        return self._gate()

    def settled(self) -> None:
        if not self.busy():
            self._settled()

    def activity(self) -> int:
        """Returns a number that changes whenever any source stamps or finishes a request."""
        with self._lock:
            return sum(s.activity for s in self._sources)

    def tick(self) -> int | None:
        """Returns the tick every source promises, or None without sources."""
        with self._lock:
            sources = list(self._sources)
        return min((s.tick() for s in sources), default=None)

    def busy(self) -> bool:
        """Returns whether any source has a stamp in flight."""
        with self._lock:
            sources = list(self._sources)
        return any(s.busy() for s in sources)


class Ticker:
    """Appends the barrier's tick to every partition of the dml topic, periodically."""

    def __init__(
        self,
        log: Log,
        topic: str,
        serde: EventSerde,
        barrier: SoftBarrier,
        interval: float = 0.2,
        on_error: Callable[[Exception], None] | None = None,
        *,
        source: str = "rootcoord",
        heartbeat: bool = False,
        lease: tuple[str, int] | None = None,
        fresh: Callable[[], object] | None = None,
        idle_every: float | None = None,
        stalled_after: float | None = None,
    ) -> None:
        """`source`: the id the ticks carry (one per writing process); `heartbeat`: tick every
        interval even when nothing was stamped, idle ticks while nothing is in flight (one of
        several writers: module docstring); `lease`: the role and epoch of the lease this
        process writes under (its ticks carry them, so consumers drop an older epoch's ticks
        at once, streams.msgstream); `fresh()`: makes the barrier's sources stamp above every
        timestamp the oracle gave out before the call (None: they do already, the oracle in
        this process); `idle_every`: seconds between a heartbeat writer's ticks while it is
        idle (None: the interval; never shorter); `stalled_after`: how old (seconds) the value
        of a heartbeat writer's last tick may be before its next stamp re-enters as an idle
        writer's does (module docstring; None: never)."""
        self.source, self._heartbeat = source, heartbeat
        self._idle_every = max(interval, idle_every or interval)
        self._fresh = fresh or (lambda: None)
        self._gate = threading.Lock()  # orders stamps' starts against idle ticks
        self.idle = heartbeat  # the last tick appended was idle (from the start: none yet)
        #: seconds without a stamp after which a writer of several ticks idle
        self.idle_after = min(interval, IDLE_AFTER_S)
        self._ticked_at = 0.0  # time.monotonic() of the last tick appended
        self._stalled_after = stalled_after
        self._value_at = 0.0  # time.monotonic() when the last tick's value was computed
        if heartbeat:
            barrier.guard(self._active, self.request)
        role, epoch = lease or ("", 0)
        self._tag = {"source": source, "lease": role, "epoch": epoch}
        self._log, self._topic, self._serde, self._barrier = log, topic, serde, barrier
        self._interval, self._on_error = interval, on_error
        self._wake, self._stop = threading.Event(), threading.Event()
        self._last = 0
        self._last_activity = -1
        self._covered = (0, -1)  # the last tick appended, the activity read before computing it
        self._requested = threading.Event()
        self._wanted = 0  # the largest ts a pending request asked a tick to reach
        self._wanted_lock = threading.Lock()
        #: the value of the last tick appended; None: none appended yet
        self.heard: int | None = None
        self._thread = threading.Thread(target=self._run, name="ticker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, after: int | None = None) -> None:
        """Asks for a tick now rather than at the next interval; with `after`, only if the
        last tick appended is below it. Requests made while a tick is being appended are
        served together by the next one."""
        if after is not None and after <= self._last:
            return
        if after is None:
            self._requested.set()
        else:  # served by the first tick at or past `after`, not by one more after it
            with self._wanted_lock:
                self._wanted = max(self._wanted, after)
        self._wake.set()

    def quiet_tick(self) -> int | None:
        """Returns the last tick appended if nothing was stamped since it was computed and
        nothing is in flight, else None.

        Such a tick is past every ts stamped by a request that finished before this call:
        the request finished before the activity was read for the tick (activity is
        unchanged), with nothing in flight then, so the tick was a fresh timestamp. The order
        matters: in-flight is read before activity, so neither changed in between.
        """
        tick, activity = self._covered
        if tick and not self._barrier.busy() and self._barrier.activity() == activity:
            return tick
        return None

    def tick_once(self) -> int | None:
        """Appends one tick to every partition if it advanced, or if it is the first idle
        one (one of several writers, once nothing was stamped for `idle_after` seconds, or
        once its last tick's value is `stalled_after` old: module docstring); returns it."""
        activity = self._barrier.activity()  # before the tick: see quiet_tick
        stalled = self._stalled()  # its first tick after a stall is idle: stamps re-enter
        if self._heartbeat and (self.idle or stalled or self._settled(activity)):
            with self._gate:  # no stamp starts until the idle tick is on the log
                quiet = self.idle or stalled or self._barrier.activity() == activity
                if not self._barrier.busy() and quiet:
                    return self._tick(activity, idle=True)
        return self._tick(activity, idle=False)

    def _settled(self, activity: int) -> bool:
        """Whether nothing was stamped since the last tick, `idle_after` seconds ago."""
        quiet = activity == self._covered[1] and not self._barrier.busy()
        return quiet and time.monotonic() - self._ticked_at >= self.idle_after

    def _tick(self, activity: int, idle: bool) -> int | None:
        at = time.monotonic()
        t = self._barrier.tick()
        if t is None or (t <= self._last and not (idle and not self.idle)):
            return None
        t = max(t, self._last)
        self._append(t, idle, at)
        self._covered = (t, activity)
        return t

    @contextlib.contextmanager
    def _active(self) -> Iterator[None]:
        """Holds the gate while a stamp starts; after an idle tick, first appends an active
        one and moves the sources' clocks past the oracle's (module docstring). Raises what
        the log or the oracle raised (nothing was stamped)."""
        with self._gate:
            stalled = self._stalled()
            if self.idle or stalled:
                self._adapt()
                if stalled:  # the clocks may serve a block from before the stall: a tick of
                    self._fresh()  # it would be that old; a fresh one keeps the writer live
                at = time.monotonic()
                self._append(max(self._barrier.tick() or 0, self._last), idle=False, at=at)
                try:
                    self._fresh()
                except BaseException:
                    self.idle = True  # the next stamp appends and moves the clocks again
                    raise
            yield

    def _stalled(self) -> bool:
        """Whether the last tick's value was computed `stalled_after` seconds ago or more (the
        ticker did not run: the process was paused or starved; module docstring)."""
        after = self._stalled_after
        if after is None or self.heard is None:  # none appended yet: idle from the start
            return False
        return time.monotonic() - self._value_at > after

    def _adapt(self) -> None:
        """On waking up: a writer that went idle less than an interval ago (a trickle of
        writes) waits twice as long before its next idle tick, up to the interval, so it
        stops paying a wake-up per write; one idle longer starts again at IDLE_AFTER_S."""
        if time.monotonic() - self._ticked_at < self._interval:
            self.idle_after = min(self._interval, self.idle_after * 2)
        else:
            self.idle_after = min(self._interval, IDLE_AFTER_S)

    def _append(self, t: int, idle: bool, at: float | None = None) -> None:
        """Appends the tick `t` to every partition, idle or not; `at`: the time.monotonic()
        its value was computed at (None: now)."""
        tick = Event("TimeTick", t, {**self._tag, "idle": idle})
        body, key = self._serde.encode(tick), self._serde.key(tick)
        n = self._log.partitions(self._topic)
        self._log.append(self._topic, [Append(p, body, key) for p in range(n)])
        self._last, self.heard, self.idle = t, t, idle
        self._ticked_at = time.monotonic()
        self._value_at = self._ticked_at if at is None else at

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._wait_s())
            self._wake.clear()
            if self._stop.is_set():
                break
            requested = self._requested.is_set() or self._wanted > self._last
            self._requested.clear()
            activity = self._barrier.activity()
            if not (requested or self._heartbeat) and activity == self._last_activity:
                continue  # idle: nothing new to promise, keep the log from growing
            try:
                self.tick_once()
                self._last_activity = activity
            except Exception as exc:  # keep ticking; the log may come back
                self._wanted = 0  # retried at the interval, not every RETRY_S
                log.warning("time tick failed: %s", exc)
                if self._on_error:
                    self._on_error(exc)

    def _wait_s(self) -> float:
        """Returns how long to sleep: RETRY_S while a read waits for a tick not yet covered;
        till the idle tick is due while a writer of several has nothing in flight; till its
        next heartbeat (`idle_every`) while it is idle; else the interval."""
        if self._wanted > self._last:
            return RETRY_S
        if self._heartbeat and not self.idle and not self._barrier.busy():
            due = self._ticked_at + self.idle_after - time.monotonic()
            return min(self._interval, max(RETRY_S, due))
        if self._heartbeat and self.idle and self._ticked_at:  # a stamp or a request wakes it
            return max(RETRY_S, self._ticked_at + self._idle_every - time.monotonic())
        return self._interval

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
