"""`DdlFollowers`: rootcoord's side of the DDL leases (cluster mode), its equivalent of
Milvus's InvalidateCollectionMetaCache: a DDL returns only once every process that caches
the meta (proxies, ingest workers, datacoord: each a `runners.ddl_lease.DdlLease`) has been
told the `ddl` offset it must read past before it serves again, or its lease lapsed.

A follower renews its lease with `renew` (the DdlLease.RenewDdlLease RPC), a long poll: it
reports how far its ddl reader has read and the fence it holds (the offset it must read past
before it answers a request), and gets the offset of the last DDL appended (its new fence)
at once if that is past its fence, else when the next DDL is appended or after `wait_s`.
Its lease runs `ttl_s` from when it sent the renewal; here it runs `ttl_s` from when the
renewal arrived, so it ends here no sooner than there.

`settle(offset)`, called after a DDL was appended at `offset` and applied, wakes the long
polls and waits until each live follower holds a fence at or past `offset` (it renewed
after the wake) or has read past it, and each lease granted before it lapsed otherwise (a
follower that died or cannot reach rootcoord: its lapsed lease makes it ask the broker for
the ddl topic's end before each request, as before leases, so it sees the DDL all the same).
A leader that has just claimed the cluster does not know the leases its predecessor
granted: its first DDLs wait until `ttl_s` after its start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: seconds a follower's lease runs from its renewal
DEFAULT_TTL_S = 4.0
#: seconds `settle` waits at most (a lease lapses sooner: this only bounds a stuck clock)
SETTLE_CAP_S = 60.0


@dataclass
class _Follower:
    read_through: int  # the next ddl offset its reader reads
    fence: int  # the offset it reads past before it answers a request
    seen: float  # when its last renewal arrived (monotonic s)


class DdlFollowers:
    """The followers' leases of one leading rootcoord."""

    def __init__(
        self,
        required: int,
        ttl_s: float = DEFAULT_TTL_S,
        check: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        grace_s: float | None = None,
    ) -> None:
        """`required`: the offset of the last `ddl` record recovered (every follower reads
        past it); `check`: raises if this process no longer leads (no lease is granted
        then); `clock`: monotonic seconds; `grace_s`: how long after the start the leases a
        predecessor granted may run (None: `ttl_s`; 0 for a rootcoord that had none)."""
        self.ttl_s, self._check, self._clock = ttl_s, check, clock
        self._required = required
        self._grace_until = clock() + (ttl_s if grace_s is None else grace_s)
        self._followers: dict[str, _Follower] = {}
        #: one lock, two waits: `renew`s wait for a DDL (`_appended`), `settle`s for the
        #: followers (`_cond`); a renewal wakes only the settles (with one wait, each
        #: renewal woke every other follower's long poll, which went back to waiting)
        lock = threading.RLock()
        self._cond, self._appended = threading.Condition(lock), threading.Condition(lock)
        self.waits = 0  # DDLs that waited for a follower or the grace
        self.lapsed = 0  # followers a DDL passed over because their lease lapsed

    def renew(self, follower: str, read_through: int, fence: int, wait_s: float) -> dict[str, Any]:
        """Records `follower`'s renewal; returns {"required": the offset of the last DDL
        appended, "ttl_ms": the lease's length} once that is past `fence`, or after `wait_s`
        seconds. Raises what `check` raises (this rootcoord lost its lease)."""
        if self._check is not None:
            self._check()
        deadline = self._clock() + max(0.0, wait_s)
        with self._cond:
            self._note(follower, read_through, fence)
            while self._required <= fence and self._clock() < deadline:
                self._appended.wait(deadline - self._clock())
            self._note(follower, read_through, fence)
            required = self._required
        if self._check is not None:  # never grant a lease after losing the cluster's
            self._check()
        return {"required": required, "ttl_ms": int(self.ttl_s * 1000)}

    def _note(self, follower: str, read_through: int, fence: int) -> None:
        self._followers[follower] = _Follower(read_through, fence, self._clock())
        self._cond.notify_all()

    def settle(self, offset: int) -> None:
        """Returns once every follower has read past `offset`, holds a fence at or past it,
        or its lease lapsed (dropping those), and the start's grace is over."""
        cap = self._clock() + SETTLE_CAP_S
        with self._cond:
            self._required = max(self._required, offset)
            self._appended.notify_all()
            waited = False
            while self._clock() < cap:
                left = self._pending(offset)
                if left <= 0:
                    break
                waited = True
                self._cond.wait(left)
            self.waits += waited

    def _pending(self, offset: int) -> float:
        """Returns 0 if nothing is left to wait for, else the seconds until the next lease
        (or the grace) lapses; drops followers whose lease lapsed."""
        now = self._clock()
        lapses = [self._grace_until - now] if self._grace_until > now else []
        for name, f in list(self._followers.items()):
            told = f.read_through > offset or f.fence >= offset
            if f.seen + self.ttl_s <= now:  # gone (a released lease too): forgotten
                del self._followers[name]
                self.lapsed += not told
            elif not told:
                lapses.append(f.seen + self.ttl_s - now)
        return min(lapses, default=0.0)

    def followers(self) -> dict[str, tuple[int, int]]:
        """Returns {follower: (read_through, fence)} of the leases held."""
        with self._cond:
            return {n: (f.read_through, f.fence) for n, f in self._followers.items()}
