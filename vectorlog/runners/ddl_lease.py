"""`DdlLease`: a process that caches the meta (a proxy, an ingest worker, datacoord) holds a
DDL lease from the leading rootcoord, so its requests need no end-of-topic query to the broker
to see every DDL acknowledged before them (the read-your-DDL of runners.ddl_watch).

A daemon thread renews the lease with a long poll (processors.rootcoord.ddl_followers): it
reports how far the ddl reader has read and the fence it holds, and gets the offset of the
last DDL appended, at once if that is past its fence, else when the next DDL is appended or
after POLL_S. The answer becomes its fence, and the lease runs the answer's ttl (times
LOCAL_VALIDITY) from when the renewal was sent. Rootcoord returns a DDL only once every live
follower reported a fence at or past it (renewed after it), or read past it, or its lease
lapsed; so while the lease is valid, the DDLs acknowledged before a request are at or below
the fence, and the request waits only for the reader to pass the fence (`fence()`: a local
read, no RPC). When the lease has lapsed (rootcoord paused, dead or taking over; its answer
late under load), `fence()` says so and the watch asks the broker where the topic ends for
each request, as before leases: slower, never stale. A rootcoord of a version without leases
(NotServed) is never asked again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from vectorlog.rpc.errors import NotServed

log = logging.getLogger(__name__)
#: seconds a renewal waits at rootcoord for the next DDL before it answers anyway
POLL_S = 1.0
#: the share of the ttl a lease is held for here (the rest covers clock rates)
LOCAL_VALIDITY = 0.9
#: seconds the renewals wait after a failed one
RETRY_S = 0.2
#: the fence a stopping follower renews with: past every offset, so no DDL waits for it
RELEASED = (1 << 63) - 1

Renew = Callable[[str, int, int, float], dict[str, Any]]


class DdlLease:
    """This process's DDL lease, renewed by `renew(follower, read_through, fence, wait_s)`
    (DdlLeaseClient.renew) in a daemon thread between `start` and `stop`."""

    def __init__(
        self,
        renew: Renew,
        name: str,
        read_through: Callable[[], int],
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`name`: this process's name (the follower id adds a random part: a process
        restarted under the same name is another follower); `read_through`: the next ddl
        offset the reader reads."""
        self.follower = f"{name}-{uuid.uuid4().hex[:8]}"
        self._renew, self._read_through = renew, read_through
        self.poll_s, self._clock = poll_s, clock
        self._fence, self._until = -1, -math.inf
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddl-lease", daemon=True)
        self.served = True  # False: rootcoord does not serve leases (never asked again)
        self.renewals = 0

    def fence(self) -> int | None:
        """Returns the offset the reader must read past before a request is answered, or
        None if the lease is not valid now (the caller asks the broker instead)."""
        with self._lock:
            return self._fence if self._clock() < self._until else None

    def renew_once(self, wait_s: float) -> None:
        """Renews the lease once (a long poll of up to `wait_s`). Raises what the renewal
        raised (NotServed, ServiceUnavailable, RootCoordFenced, LeaseUnconfirmed)."""
        with self._lock:
            fence = self._fence
        sent = self._clock()
        answer = self._renew(self.follower, self._read_through(), fence, wait_s)
        with self._lock:
            self._fence = max(self._fence, int(answer["required"]))
            self._until = sent + int(answer["ttl_ms"]) / 1000 * LOCAL_VALIDITY
            self.renewals += 1

    def start(self) -> None:
        """Renews once at once (a failure leaves the lease lapsed: the broker is asked) and
        starts the renewals."""
        self._attempt(0.0)
        if self.served:
            self._thread.start()

    def _run(self) -> None:
        while self.served and not self._stopping.is_set():
            if not self._attempt(self.poll_s):
                self._stopping.wait(RETRY_S)

    def _attempt(self, wait_s: float) -> bool:
        """Returns whether a renewal succeeded; logs why not."""
        try:
            self.renew_once(wait_s)
            return True
        except NotServed:
            log.info("ddl lease: rootcoord serves no DDL leases; asking the broker per request")
            self.served = False
        except Exception as exc:  # rootcoord away: the lease lapses, the broker is asked
            log.debug("ddl lease: renewal failed: %r", exc)
        return False

    def stop(self) -> None:
        """Stops renewing and gives the lease up: from here on `fence()` is None, and a last
        renewal with the fence RELEASED tells rootcoord that this follower needs no DDL's
        notice (its DDLs wait for it no more; a failure leaves the lease to lapse)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(self.poll_s + 1)  # a daemon: a renewal in flight is let go
        with self._lock:
            self._until = -math.inf
        if self.served and self.renewals:
            try:
                self._renew(self.follower, self._read_through(), RELEASED, 0.0)
            except Exception as exc:  # rootcoord away: the lease lapses by itself
                log.debug("ddl lease: release failed: %r", exc)
