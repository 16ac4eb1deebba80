"""A cluster-mode process's wait for rootcoord at its start: it asks rootcoord's RPC for a
timestamp until one answers (a rootcoord started later, restarting, or slow under load),
logging one line per retry with the address, and refuses to start naming rootcoord once the
configured total (VECTORLOG_RUN_PEER_WAIT_S) has passed, instead of failing at the first
timeout."""

from __future__ import annotations

import logging
import threading
import time

from vectorlog.core.errors import (
    LeaseUnconfirmed,
    RootCoordFenced,
    ServiceUnavailable,
    VectorlogError,
)
from vectorlog.rpc.channel import DEFAULT_DEADLINE_S
from vectorlog.rpc.rootcoord_client import RootCoordClient

log = logging.getLogger("vectorlog.run")
#: what rootcoord may answer while it is not up yet, restarting or taking over: retried
RETRIED = (ServiceUnavailable, LeaseUnconfirmed, RootCoordFenced)
#: seconds between two attempts (after one that failed at once: nothing listens yet)
RETRY_S = 1.0


class PeerUnavailable(VectorlogError):
    """A peer a process needs at its start did not answer within the configured wait."""

    def __init__(self, who: str, peer: str, address: str, waited: float, why: str) -> None:
        super().__init__(
            f"{who}: {peer} at {address} did not answer in {waited:g} s "
            f"(VECTORLOG_RUN_PEER_WAIT_S): {why}"
        )
        self.peer, self.address = peer, address


def wait_for_rootcoord(
    who: str,
    address: str,
    token: str | None,
    total_s: float,
    stopping: threading.Event | None = None,
) -> None:
    """Returns once rootcoord at `address` answers an AllocTimestamp (`who`: the waiting
    process, named in its log lines; `stopping` set ends the wait early, as a failure).
    Retries RETRIED (unreachable, too slow, a lease unconfirmed or lost), one log line each;
    raises PeerUnavailable after `total_s` seconds, or another VectorlogError rootcoord
    answered (a refused token)."""
    stopping = stopping or threading.Event()
    start = time.monotonic()
    deadline = start + total_s
    attempt = 0
    while True:
        attempt += 1
        left = deadline - time.monotonic()
        rc = RootCoordClient(address, min(DEFAULT_DEADLINE_S, max(left, 0.1)), token=token)
        try:
            rc.allocate_timestamps(1)
            return
        except RETRIED as exc:
            why = str(exc)
        finally:
            rc.close()
        left = deadline - time.monotonic()
        if stopping.is_set():
            raise PeerUnavailable(who, "rootcoord", address, total_s, f"stopped; {why}")
        if left <= 0:
            raise PeerUnavailable(who, "rootcoord", address, total_s, why)
        log.info(
            "%s: waiting for rootcoord at %s (attempt %d, %.0f s of %.0f s): %s",
            who, address, attempt, time.monotonic() - start, total_s, why,
        )  # fmt: skip
        stopping.wait(min(RETRY_S, left))
