"""A cluster-mode process's patience with its peers at its start, as Milvus components have:
it asks rootcoord's RPC for a timestamp (and datacoord's and the index node's, which cluster
they serve, where it calls them) until one answers (a rootcoord started later,
restarting, or slow under load), logging one line per retry with the address; and a start
that a peer's RPC interrupts later (a call timing out under load, a rootcoord paused or
taking over) is closed and made again, logging one line each. Only once the configured total
(VECTORLOG_RUN_PEER_WAIT_S) has passed does it refuse to start, naming the peer and its
address. Bad configuration (a refused token, another cluster's lease, a port in use, a
rootcoord, datacoord or index node that serves another cluster than --cluster names) is
not retried: it refuses at once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from vectorlog.core.errors import (
    LeaseUnconfirmed,
    RootCoordFenced,
    ServiceUnavailable,
    VectorlogError,
)
from vectorlog.rpc.channel import DEFAULT_DEADLINE_S
from vectorlog.rpc.member_client import MemberClient
from vectorlog.rpc.rootcoord_client import RootCoordClient

log = logging.getLogger("vectorlog.run")
_T = TypeVar("_T")
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


class OtherCluster(VectorlogError):
    """A peer serves another cluster than this process's own (--cluster): its topics are
    other topics, so the process would serve or write a cluster that is not its peers'."""

    def __init__(self, peer: str, address: str, theirs: str | None, ours: str) -> None:
        if theirs is None:
            super().__init__(
                f"{peer} at {address} does not say which cluster it serves (a version "
                f"before this one): upgrade it first, then start this process of {ours!r}"
            )
        else:
            super().__init__(
                f"{peer} at {address} serves cluster {theirs!r}, not {ours!r} (--cluster or "
                "VECTORLOG_CLUSTER): give every process of a cluster the same name"
            )
        self.peer, self.address, self.theirs, self.ours = peer, address, theirs, ours


def check_cluster(peer: str, address: str, theirs: str | None, ours: str) -> None:
    """Raises OtherCluster if the peer at `address` serves cluster `theirs` (None: it does
    not say), not `ours`."""
    if theirs != ours:
        raise OtherCluster(peer, address, theirs, ours)


#: seconds each address of a role given several (standbys) has to answer `check_listed`
LISTED_S = 2.0


def listed(addresses: str) -> list[str]:
    """Returns the addresses of a comma-separated list, in order."""
    return [a.strip() for a in addresses.split(",") if a.strip()]


def check_listed(
    peer: str,
    addresses: str,
    token: str | None,
    cluster: str,
    also: Callable[[str], None] | None = None,
) -> list[str]:
    """For a role given several `addresses` (comma-separated: its standbys), checks every
    one that answers within LISTED_S, not only the one a client reached first: that it
    serves `cluster`, then `also(address)` (rootcoord: its storage identity). One that does
    not answer (a standby serves no RPC, a machine down) is not checked. Returns those that
    answered. Raises OtherCluster naming the address that disagreed, or what `also`
    raises."""
    answered = []
    for one in listed(addresses) if len(listed(addresses)) > 1 else []:
        member = MemberClient(one, LISTED_S, token)
        try:
            theirs = member.cluster_name()
        except RETRIED as exc:
            log.info("%s at %s did not answer (%s): not checked", peer, one, exc)
            continue
        finally:
            member.close()
        check_cluster(peer, one, theirs, cluster)
        if also is not None:
            also(one)
        answered.append(one)
    return answered


def wait_for_rootcoord(
    who: str,
    address: str,
    token: str | None,
    total_s: float,
    stopping: threading.Event | None = None,
    cluster: str | None = None,
) -> None:
    """Returns once rootcoord at `address` answers an AllocTimestamp and, given this
    process's `cluster`, says it serves that cluster (`who`: the waiting process, named in
    its log lines; `stopping` set ends the wait early, as a failure). Retries RETRIED
    (unreachable, too slow, a lease unconfirmed or lost), one log line each; raises
    PeerUnavailable after `total_s` seconds, OtherCluster (another cluster's rootcoord, or
    one that does not say), or another VectorlogError rootcoord answered (a refused
    token)."""

    def ask(deadline_s: float) -> None:
        rc = RootCoordClient(address, deadline_s, token=token)
        member = MemberClient(address, deadline_s, token)
        try:
            rc.allocate_timestamps(1)
            if cluster is not None:
                check_cluster("rootcoord", address, member.cluster_name(), cluster)
        finally:
            rc.close()
            member.close()

    _wait_for(who, "rootcoord", address, total_s, stopping, ask)


def wait_for_member(
    who: str,
    peer: str,
    address: str,
    token: str | None,
    total_s: float,
    stopping: threading.Event | None,
    cluster: str,
) -> None:
    """Returns once the `peer` (datacoord, indexnode) at `address` answers which cluster it
    serves, and it is `cluster`; waits, raises and logs as wait_for_rootcoord does
    (OtherCluster at once for another cluster's peer, or one that does not say)."""

    def ask(deadline_s: float) -> None:
        member = MemberClient(address, deadline_s, token)
        try:
            check_cluster(peer, address, member.cluster_name(), cluster)
        finally:
            member.close()

    _wait_for(who, peer, address, total_s, stopping, ask)


def _wait_for(
    who: str,
    peer: str,
    address: str,
    total_s: float,
    stopping: threading.Event | None,
    ask: Callable[[float], None],
) -> None:
    """Calls `ask(deadline_s)` until it returns, retrying RETRIED with one log line each;
    raises PeerUnavailable naming `peer` at `address` after `total_s` seconds (or once
    `stopping` is set), and what else `ask` raised at once."""
    stopping = stopping or threading.Event()
    start = time.monotonic()
    deadline = start + total_s
    attempt = 0
    while True:
        attempt += 1
        left = deadline - time.monotonic()
        try:
            ask(min(DEFAULT_DEADLINE_S, max(left, 0.1)))
            if attempt > 1:
                log.info("%s: %s at %s answered (attempt %d)", who, peer, address, attempt)
            return
        except RETRIED as exc:
            why = str(exc)
        left = deadline - time.monotonic()
        if stopping.is_set():
            raise PeerUnavailable(who, peer, address, total_s, f"stopped; {why}")
        if left <= 0:
            raise PeerUnavailable(who, peer, address, total_s, why)
        log.info(
            "%s: waiting for %s at %s (attempt %d, %.0f s of %.0f s): %s",
            who, peer, address, attempt, time.monotonic() - start, total_s, why,
        )  # fmt: skip
        stopping.wait(min(RETRY_S, left))


def start_patiently(
    who: str,
    make: Callable[[float], _T],
    total_s: float,
    stopping: threading.Event | None = None,
) -> _T:
    """Returns `make(seconds_left)` (a process's start, which closes what it opened when it
    raises), made again while a peer it called fails with RETRIED, one log line each, until
    `total_s` seconds have passed since the first failure (a standby's wait for its lease
    before it does not count); then raises PeerUnavailable naming the peer and address of
    the last failure. What `make` raises otherwise (PeerUnavailable from its own wait for
    rootcoord, bad configuration) is raised at once; `stopping` set ends the retries, as a
    failure."""
    stopping = stopping or threading.Event()
    first: float | None = None  # when the first attempt failed
    attempt = 0
    while True:
        attempt += 1
        left = total_s if first is None else first + total_s - time.monotonic()
        try:
            return make(max(left, 0.1))
        except RETRIED as exc:
            failure = exc
        first = time.monotonic() if first is None else first
        left = first + total_s - time.monotonic()
        peer, address = _peer_of(failure)
        if stopping.is_set() or left <= 0:
            why = " ".join(str(failure).split())
            raise PeerUnavailable(who, peer, address, total_s, why) from None
        log.info(
            "%s: waiting for %s at %s (start attempt %d, %.0f s of %.0f s): %s",
            who, peer, address, attempt, time.monotonic() - first, total_s, failure,
        )  # fmt: skip
        stopping.wait(min(RETRY_S, left))


def _peer_of(failure: VectorlogError) -> tuple[str, str]:
    """Returns the peer and address that `failure` came from: a transport failure names
    both, an error a peer answered carries them (rpc.errors); else this process's own lease
    could not be confirmed on the log."""
    service, address = getattr(failure, "service", None), getattr(failure, "address", None)
    if isinstance(service, str) and isinstance(address, str):
        return service, address
    answered_by = getattr(failure, "answered_by", None)
    if isinstance(answered_by, tuple):
        return str(answered_by[0]), str(answered_by[1])
    return "its own lease", "the log"
