"""Opportunistic coalescing of the proxy's fan-out searches (group commit, no timer).

Up to IN_FLIGHT (2) searches with a given key (see `search_key`) go to the query nodes at
once; while that many are in flight, further searches with the same key queue, and when one
returns, the queued ones go in its place as ONE search whose queries are theirs concatenated
(nq = the sum of theirs, at most MAX_NQ a call: the rest waits for the next), and each gets
back its own rows of every pchannel's answer. An idle proxy sends a search at once: nothing
waits for company, and a busy one makes one RPC to each owner per batch instead of one per
search (the query node searches a batch's nq queries in one call per segment; an exact
scan of up to 16 reads each stored row from memory once for all of them: exact.few_queries).

Why two in flight, not one: with one, a query node searched a batch and then sat idle while
its answer went back, the proxy handed the queue on and the next batch came: measured on
a quiet machine, 1 node x 1 search thread at 200k rows, its search slot was busy 72% of the
time, each batch followed by about 4.5 ms of round trip (more on a loaded machine, where each
hop waits for a core); with two, the next batch is on the node while it searches one (93%).

Why a batch may read at the greatest guarantee ts of its members: every member is a read
whose guarantee ts is a lower bound (Strong: "now" when it arrived; Session: the client's
last write; Bounded: now minus the staleness bound; Eventually: whatever the node applied),
never an exact one (DESIGN.md s.6: a Bounded read "never hides applied rows"). Reading at a
later ts answers as if the read had arrived later, while it was still waiting for its
answer: the rows visible then include every row visible at its own ts, unless a write or
delete concurrent with the search changed them, and a read concurrent with a write may see
it or not (as in Milvus, where a Strong search also reads at the tsafe it waited for). The
later ts costs no wait: the proxy waited for each member's ts before it searched
(Proxy.read_ts), so the owners' tsafe is already past the greatest one. A time-travel read
(`as_of`) has an exact ts: it is never coalesced (the proxy says so: `read_later`).

A failing batch shares its error only where it does not depend on the members' queries or
ts (NoQueryNode, SegmentsNotLoadable: a pchannel without an owner); otherwise each member
of a batch of several asks again alone, within what is left of its own timeout, and gets
its own answer or error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectorlog.core.results import SearchResult
from vectorlog.processors.querycoord.errors import NoQueryNode, SegmentsNotLoadable

#: the most queries a coalesced search carries (Milvus's nq limit)
MAX_NQ = 16_384
#: the index search parameters a coalesced search may carry (their effect is per query);
#: any other (a range search's radius, an iterator's) keeps a search alone
KNOBS = frozenset({"ef", "nprobe", "search_list", "itopk_size", "search_width", "reorder_k"})
#: errors a batch shares with each member: they depend on the pchannels' owners only
SHARED_ERRORS = (NoQueryNode, SegmentsNotLoadable)
#: searches (batches) of one key in flight at once: with two, the owners have the next batch
#: in hand while they search one (see the module docstring)
IN_FLIGHT = 2

#: the fan-out of one search: (queries, ts, timeout or None: the default) -> (found, result)
#: of each pchannel, as FanOutQueryNodes.fan returns them
Run = Callable[[np.ndarray, int, float | None], list[tuple[bool, Any]]]


def search_key(args: dict[str, Any], queries: Any, read_later: bool) -> tuple[Hashable, ...] | None:
    """Returns the key under which a search with `args` (FanOutQueryNodes.search's, without
    queries and ts) may join others, or None if it goes alone: a time-travel read (not
    `read_later`), sparse queries, grouping, a range search or another parameter than
    KNOBS, more than MAX_NQ queries. The key holds everything but the queries and the ts:
    the collection, vector field, metric, knobs, filter (the parsed object itself: equal
    texts with other filter_params are other objects), partitions, output fields, limit
    (limit + offset: the offset is applied per search, when the proxy merges), expiry."""
    if not read_later or not isinstance(queries, np.ndarray) or queries.ndim != 2:
        return None
    params = args["params"] or {}
    if args["group_by"] is not None or not set(params) <= KNOBS or len(queries) > MAX_NQ:
        return None
    partitions = args["partitions"]
    return (
        args["collection_id"],
        args["anns_field"],
        args["metric"],
        tuple(sorted((k, repr(v)) for k, v in params.items())),
        id(args["expr"]),
        None if partitions is None else tuple(partitions),
        tuple(args["output_fields"]),
        args["limit"],
        args["group_size"],
        args["expire_ts"],
        queries.dtype.str,
        queries.shape[1],
    )


@dataclass(eq=False)
class _Kind:
    """The searches of one key: the first batch's args (keeping its filter alive: its id is
    in the key), how many batches are in flight, and the searches queued behind them."""

    args: dict[str, Any]
    flying: int = 0
    queue: list[_Member] = field(default_factory=list)


@dataclass(eq=False)
class _Member:
    """One search waiting in (or leading) a batch."""

    queries: np.ndarray
    ts: int
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    lead: list[_Member] | None = None  # a batch this member's thread is to send
    parts: list[tuple[bool, Any]] | None = None
    error: Exception | None = None
    alone: bool = False  # its batch failed: it asks again alone


class Coalescer:
    """Searches of equal keys coalesced (see the module docstring); `budget`: a search's
    timeout (seconds), of which a member asking again alone has what is left."""

    def __init__(self, budget: float, in_flight: int = IN_FLIGHT) -> None:
        self.budget, self.in_flight = budget, in_flight
        self._lock = threading.Lock()
        #: key -> its searches in flight and queued (the key is absent when idle)
        self._kinds: dict[Hashable, _Kind] = {}
        self.searches = 0  # searches asked (for /metrics and benchmarks)
        self.batches = 0  # searches sent (a batch counts once)
        self.coalesced = 0  # searches that went in a batch of several

    def queued(self) -> int:
        """Returns how many searches wait behind those in flight."""
        with self._lock:
            return sum(len(kind.queue) for kind in self._kinds.values())

    def search(
        self, key: Hashable, args: dict[str, Any], queries: np.ndarray, ts: int, run: Run
    ) -> list[tuple[bool, Any]]:
        """Returns `run`'s (found, result) of each pchannel for `queries` at `ts` or later
        (the result holding these queries' rows only), sent alone or in a batch with the
        searches of equal `key` queued meanwhile. Raises what `run` raised for it."""
        me = _Member(queries, ts, time.monotonic() + self.budget)
        with self._lock:
            self.searches += 1
            kind = self._kinds.get(key)
            if kind is None:
                kind = self._kinds[key] = _Kind(args)
            sent = kind.flying < self.in_flight
            if sent:
                kind.flying += 1
                self.batches += 1
            else:
                kind.queue.append(me)
        if sent:
            self._lead(key, [me], run)
        else:
            me.done.wait()
            if me.lead is not None:
                self._lead(key, me.lead, run)
        if me.alone:
            left = me.deadline - time.monotonic()
            return run(me.queries, me.ts, max(left, 0.0))
        if me.error is not None:
            raise me.error
        assert me.parts is not None
        return me.parts

    def _lead(self, key: Hashable, batch: list[_Member], run: Run) -> None:
        """Sends `batch` as one search, hands the next batch of `key` to its first member's
        thread (or counts one fewer in flight), then gives each member its part."""
        ts = max(m.ts for m in batch)
        queries = (
            batch[0].queries if len(batch) == 1 else np.concatenate([m.queries for m in batch])
        )
        parts: list[tuple[bool, Any]] | None = None
        error: Exception | None = None
        left = min(m.deadline for m in batch) - time.monotonic()  # queued ones waited
        try:
            parts = run(queries, ts, max(left, 0.0))
        except Exception as exc:  # given to the members below, never lost
            error = exc
        finally:
            self._hand_on(key)
            _deliver(batch, parts, error)

    def _hand_on(self, key: Hashable) -> None:
        """Hands the searches queued under `key` (up to MAX_NQ queries) to the first one's
        thread to send, in the place of the batch that returned; if none is queued, one
        batch fewer is in flight (`key` idle at none)."""
        with self._lock:
            kind = self._kinds[key]
            queue = kind.queue
            if not queue:
                kind.flying -= 1
                if not kind.flying:
                    del self._kinds[key]
                return
            nq, take = 0, 0
            while take < len(queue) and (take == 0 or nq + len(queue[take].queries) <= MAX_NQ):
                nq += len(queue[take].queries)
                take += 1
            batch, queue[:] = queue[:take], queue[take:]
            self.batches += 1
            self.coalesced += take if take > 1 else 0
        batch[0].lead = batch
        batch[0].done.set()


def _deliver(
    batch: list[_Member], parts: list[tuple[bool, Any]] | None, error: Exception | None
) -> None:
    """Gives each member its rows of `parts`, or `error` (its own if alone or shared,
    else it asks again alone), and wakes it."""
    lo = 0
    for m in batch:
        hi = lo + len(m.queries)
        try:
            if error is None and parts is not None:
                m.parts = [(found, _rows(r, lo, hi)) for found, r in parts]
            elif len(batch) == 1 or isinstance(error, SHARED_ERRORS):
                m.error = error
            else:
                m.alone = True
        except Exception as exc:  # an answer not of this batch's shape: never hang a member
            m.error = exc
        finally:
            m.done.set()
        lo = hi


def _rows(result: Any, lo: int, hi: int) -> Any:
    """Returns queries lo:hi of a pchannel's result (None: merged into another's)."""
    return None if result is None else SearchResult.queries(result, lo, hi)
