"""The rootcoord lease (issue 7, item 3): one rootcoord per cluster, claimed on the log; the
same lease serves any role that must run once per cluster (issue 23: `role`, e.g. datacoord;
each role's records are apart from the others' on the one topic).

A starting rootcoord appends a claim to `{cluster}.lease` (one partition, JSON values, see
lease_record.py) and reads the topic up to it: the first live claim wins; a later one raises
ClusterInUse naming the holder. A claim is live until its holder's last renewal is `ttl` old
by wall clock, or its holder releases it at close; a holder on this host whose process is
gone (SIGKILLed) is evicted at once. The holder renews every ttl/3; a renewal that finds a
later claim won fences this process: every later DDL, id and timestamp raises RootCoordFenced.
Between renewals the holder trusts its lease for LOCAL_VALIDITY of the ttl; past that (a long
pause, a slow log), an allocation renews first (LeaseUnconfirmed if the renewal fails). A
holder's reader of the topic is open only while it claims or renews (on Kafka an assigned
consumer fetches all the time: ten fetches a second of the broker's, idle).

On a log that is exclusive by itself (the embedded log's directory lock) claims are forced and
never expire: no renewals are written, and a crash never leaves a claim that blocks anyone.

A standby (`wait_acquire`) follows the topic and claims as soon as the holder released its
lease, its process on this host is gone, or its last renewal is `ttl` old: a leader that died
is replaced within the ttl (plus one poll), and the leader it replaced is fenced.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from vectorlog.core.errors import ClusterInUse, LeaseUnconfirmed, RootCoordFenced
from vectorlog.core.hybridts import wall_ms
from vectorlog.processors.rootcoord.lease_record import (
    Holder,
    LeaseRecord,
    LeaseState,
    process_gone,
    process_start,
)
from vectorlog.streams.errors import LogError, LogHistoryLost
from vectorlog.streams.log.base import Append, Log, Reader

log = logging.getLogger(__name__)

#: a holder trusts its lease for this share of the ttl after the start of its last renewal
LOCAL_VALIDITY = 0.8
#: lease records read back from a new claim at first; doubled until they span LOOKBACK ttls
FIRST_WINDOW = 64
LOOKBACK = 3
READ_TIMEOUT_S = 30.0
#: how often a standby looks at the topic for a holder gone (seconds)
STANDBY_POLL_S = 0.25


class Lease:
    """This process's claim on a cluster's rootcoord (or `role`). `ttl_s` None: the log is
    exclusive."""

    def __init__(
        self,
        log: Log,
        topic: str,
        cluster: str,
        ttl_s: float | None,
        clock: Callable[[], int] = wall_ms,
        monotonic: Callable[[], float] = time.monotonic,
        role: str = "rootcoord",
        address: str | None = None,
    ) -> None:
        """`clock`: the wall clock written into the records (ms); `monotonic`: what this
        holder measures its own lease with (s); `role`: whose lease; `address`: where this
        process serves the role's RPCs (written into its claims, for operators)."""
        self._log, self.topic, self.cluster, self._clock = log, topic, cluster, clock
        self.role, self.address = role, address
        self._monotonic = monotonic
        self.ttl_ms = None if ttl_s is None else max(1, int(ttl_s * 1000))
        self.instance, self.host, self.pid = uuid.uuid4().hex, socket.gethostname(), os.getpid()
        self._pid_start = process_start(self.pid)
        self.state = LeaseState()
        self.epoch: int | None = None
        self._reader: Reader | None = None
        self._next = 0  # the next offset self._reader returns
        self._io = threading.Lock()  # appends and reads of the lease topic
        self._valid_until = 0.0
        self._lost: str | None = None  # why this process no longer holds the lease
        self._kick, self._stopping = threading.Event(), False
        self._thread: threading.Thread | None = None
        self.renewals = 0

    # -- claiming -----------------------------------------------------------------------------
    def acquire(self) -> None:
        """Claims the lease. Raises ClusterInUse naming the holder if a live claim came
        first (this process then holds nothing), or a LogError."""
        with self._io:
            try:
                self._claim()
            except BaseException:
                self._close_reader()
                raise

    def _claim(self) -> None:
        started = self._monotonic()
        offset = self._append(self._record("claim", force=self.ttl_ms is None))
        self._read_window(offset)
        holder = self.state.holder
        if holder is not None and holder.epoch != offset and self._gone(holder):
            started = self._monotonic()
            offset = self._append(self._record("claim", evicts=holder.record.instance))
            self._read_through(offset)
            holder = self.state.holder
        if holder is None or holder.epoch != offset:
            raise ClusterInUse(self.cluster, self._describe(holder), self.role)
        self.epoch = offset
        self._confirmed(started)
        self._close_reader()  # a holder reads only at its renewals (`renew`)

    def _gone(self, holder: Holder) -> bool:
        """Returns whether the holder is a process of this host that no longer runs."""
        rec = holder.record
        if rec.host != self.host:
            return False
        if rec.pid == self.pid:  # this very process, or an earlier one that had its pid
            return rec.pid_start is not None and rec.pid_start != self._pid_start
        return process_gone(rec.pid, rec.pid_start)

    def _describe(self, holder: Holder | None) -> str:
        return "an unknown process" if holder is None else holder.describe(self._clock())

    # -- standing by --------------------------------------------------------------------------
    def wait_acquire(
        self, stopping: threading.Event, on_wait: Callable[[str], None] | None = None
    ) -> bool:
        """Claims the lease, waiting as a standby while another process holds it; returns
        True once held, False if `stopping` was set first. `on_wait(holder)` runs once, when
        it starts waiting. Raises a LogError."""
        waiting = False
        while not stopping.is_set():
            with self._io:
                try:
                    self._claim()
                    return True
                except ClusterInUse:
                    holder = self.state.holder
            if not waiting and on_wait is not None:
                on_wait(self._describe(holder))
            waiting = True
            self._follow_until_claimable(stopping)
        self._close_reader()
        return False

    def _follow_until_claimable(self, stopping: threading.Event) -> None:
        """Follows the topic (the reader `_claim` left open) until the holder released its
        lease, is gone from this host, or its last renewal is older than its ttl."""
        while not stopping.is_set():
            with self._io:
                for r in self._opened_reader().poll(1000, STANDBY_POLL_S):
                    rec = self._decode(r.value)
                    if r.offset >= self._next and rec is not None:
                        self.state.apply(rec, r.offset)
                    self._next = max(self._next, r.offset + 1)
                holder = self.state.holder
                if holder is None or holder.expired_at(self._clock()) or self._gone(holder):
                    return
            stopping.wait(STANDBY_POLL_S)

    # -- holding ------------------------------------------------------------------------------
    def start(self) -> None:
        """Starts renewing every ttl/3 (nothing to do for a lease without expiry)."""
        if self.ttl_ms is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lease", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self.ttl_ms is not None
        while not self._stopping and self._lost is None:
            self._kick.wait(self.ttl_ms / 3000)
            self._kick.clear()
            if not self._stopping:
                try:
                    self.renew()
                except Exception:  # a failure of one renewal must not end the renewals
                    log.exception("lease renewal of cluster %r failed", self.cluster)

    def renew(self, only_if_unconfirmed: bool = False) -> bool:
        """Renews the lease once (with `only_if_unconfirmed`, only if it is past
        LOCAL_VALIDITY); returns whether it is still held (False once fenced). A renewal that
        cannot reach the log is logged and changes nothing; one that finds the log lost its
        records raises LogHistoryLost."""
        with self._io:
            if self.epoch is None or self._lost is not None:
                return False
            if only_if_unconfirmed and self._valid():
                return True
            started = self._monotonic()
            try:
                if self._taken_over():
                    return False
                offset = self._append(self._record("renew", epoch=self.epoch))
                self._read_through(offset)
            except LogHistoryLost:
                raise  # for good: a check() names the cause, not a lapsed lease
            except LogError as exc:
                log.warning("lease renewal of cluster %r failed: %s", self.cluster, exc)
                return True
            finally:  # an assigned consumer fetches meanwhile: 10 fetches a second, idle
                self._close_reader()
            if self._fenced_by_state():
                return False
            self._confirmed(started)
            return True

    def _taken_over(self) -> bool:
        """Reads the records appended since the last renewal; returns True (and fences this
        process) if another claim won meanwhile: a fenced holder appends nothing more, not
        even a renewal."""
        end = self._log.end_offsets(self.topic).get(0, 0)
        if end > self._next:
            self._read_through(end - 1)
        return self._fenced_by_state()

    def _fenced_by_state(self) -> bool:
        """Returns True (and fences this process) if the records read say another holds it."""
        holder = self.state.holder
        if holder is not None and holder.epoch == self.epoch:
            return False
        self._lost = f"{self._describe(holder)} took its lease over"
        log.error("cluster %r: this %s is fenced: %s", self.cluster, self.role, self._lost)
        return True

    def _confirmed(self, started: float) -> None:
        if self.ttl_ms is not None:
            self._valid_until = started + self.ttl_ms * LOCAL_VALIDITY / 1000
        self.renewals += 1

    def check(self) -> None:
        """Returns if this process holds the lease. Past LOCAL_VALIDITY of the ttl since its
        last renewal (a long pause, a slow log) it renews first. Raises RootCoordFenced (for
        good: another rootcoord took over) or LeaseUnconfirmed (the renewal failed)."""
        if self._lost is None and (self.ttl_ms is None or self._valid()):
            return
        if self._lost is None:
            self.renew(only_if_unconfirmed=True)
        if self._lost is not None:
            raise RootCoordFenced(self.cluster, self._lost, self.role)
        if not self._valid():
            confirmed = self._valid_until - (self.ttl_ms or 0) * LOCAL_VALIDITY / 1000
            raise LeaseUnconfirmed(self.cluster, self._monotonic() - confirmed)

    def _valid(self) -> bool:
        return self._monotonic() < self._valid_until

    @property
    def fenced(self) -> bool:
        return self._lost is not None

    def stop(self) -> None:
        """Stops the renewals in the background (an allocation still renews a lapsed lease)."""
        self._stopping = True
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout=READ_TIMEOUT_S)

    def close(self) -> None:
        """Stops renewing and releases the lease (the next claim wins at once; a fenced
        holder appends nothing). Idempotent."""
        self.stop()
        with self._io:
            if self.epoch is not None and self._lost is None:
                try:
                    self._append(self._record("release", epoch=self.epoch))
                except LogError as exc:
                    log.warning("lease release of cluster %r failed: %s", self.cluster, exc)
            self.epoch = None
            self._close_reader()
            self._lost = self._lost or "its lease was released when it closed"

    # -- the topic ----------------------------------------------------------------------------
    def _record(self, op: str, **extra: object) -> LeaseRecord:
        return LeaseRecord(
            op=op,
            instance=self.instance,
            host=self.host,
            pid=self.pid,
            at=self._clock(),
            ttl_ms=self.ttl_ms,
            pid_start=self._pid_start,
            role=self.role,
            address=self.address,
            **extra,  # type: ignore[arg-type]
        )

    def _append(self, rec: LeaseRecord) -> int:
        return self._log.append(self.topic, [Append(0, rec.encode())])[0]

    def _read_window(self, claim: int) -> None:
        """Applies the records before `claim` (and it) that can matter: back far enough that
        every earlier one is older than LOOKBACK ttls (all of them without a ttl)."""
        start = max(0, claim - FIRST_WINDOW)
        self.state = LeaseState()  # a claim after a refused one reads the window afresh
        while True:
            self._close_reader()
            self._reader, self._next = self._log.reader(self.topic, {0: start}), start
            records = self._read_until(claim)
            if start == 0 or self._spans_lookback(records):
                break
            start = max(0, start - 2 * (claim - start))
        for offset, rec in records:
            if rec is not None:
                self.state.apply(rec, offset)

    def _spans_lookback(self, records: list[tuple[int, LeaseRecord | None]]) -> bool:
        parsed = [r for _, r in records if r is not None]
        if not parsed or any(r.ttl_ms is None for r in parsed):
            return False
        ttl = max(r.ttl_ms or 0 for r in parsed)
        return parsed[0].at + LOOKBACK * ttl < parsed[-1].at

    def _read_through(self, offset: int) -> None:
        """Applies the records from the reader's position through `offset`."""
        for at, rec in self._read_until(offset):
            if rec is not None:
                self.state.apply(rec, at)

    def _opened_reader(self) -> Reader:
        """Returns the reader of the topic, opened at the next record to apply if closed."""
        if self._reader is None:
            self._reader = self._log.reader(self.topic, {0: self._next})
        return self._reader

    def _read_until(self, offset: int) -> list[tuple[int, LeaseRecord | None]]:
        reader = self._opened_reader()
        out: list[tuple[int, LeaseRecord | None]] = []
        deadline, overshot = time.monotonic() + READ_TIMEOUT_S, False
        while self._next <= offset:
            if time.monotonic() > deadline:
                raise LogError(f"did not read {self.topic!r} up to offset {offset} in time")
            for r in reader.poll(1000, 0.2):
                overshot |= r.offset > offset
                if self._next <= r.offset <= offset:
                    out.append((r.offset, self._decode(r.value)))
                    self._next = r.offset + 1
        if overshot:  # the next read starts right after `offset`
            reader.seek(self.topic, 0, self._next)
        return out

    def _decode(self, raw: bytes) -> LeaseRecord | None:
        """Returns the record of this lease's role in `raw` (None: another role's, or none)."""
        rec = LeaseRecord.decode(raw)
        return rec if rec is not None and rec.role == self.role else None

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
