"""The proxy's QueryNodeService in the scale-out: each read goes to the query nodes that own
the dml pchannels (the query coordinator's latest `QueryChannelsAssigned`, followed on
coord), all at the read's ts; each node waits for its tsafe and answers from its own
pchannels; the answers are merged here (processors.proxy.merge).

A read is complete or it waits, never partial:
- a pchannel with no owner (its node died, the new one is still loading) is waited for,
  until the read's timeout (NoQueryNode naming the pchannels); with replicas, a read goes
  to one copy of each pchannel (in turn), and at once to another copy if that one fails;
- an answer is taken only from the node and epoch the assignment names for that pchannel:
  an answer of a node declared dead (an older epoch), or a node that says it does not serve
  a pchannel any more, or one that cannot be reached, is dropped, and those pchannels are
  asked again of their owner once the assignment moves on;
- a pchannel whose segments no live node could load fails the read, naming them
  (SegmentsNotLoadable), instead of an answer without their rows.

Each answer carries its owner's tsafe of every pchannel it read: the tsafe a read needs
first (its consistency check) is taken from answers received within TSAFE_FRESH_S, so a busy
proxy asks the owners once per read, not twice (a tsafe only grows: an older one is a lower
bound, and reading at it is safe).

Searches of one kind asked while two are in flight go to the owners as one search
(runners.coalesce: fewer RPCs per search for the proxy and the nodes); a time-travel read,
a grouping or range search goes alone.

The collection may be on a few of the pchannels only (its shards): every pchannel is asked,
and those without it answer "not found"; CollectionNotFound is raised if none has it. The
primary key is the first output field of a query or get (as the proxy asks).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import CollectionNotFound, ServiceUnavailable
from vectorlog.core.results import SearchResult
from vectorlog.processors.proxy.merge import (
    merge_results,
    merge_rows,
    rows_in_key_order,
    widened,
)
from vectorlog.processors.querycoord.assignment import Owner
from vectorlog.processors.querycoord.errors import NoQueryNode, NotServing, SegmentsNotLoadable
from vectorlog.processors.querycoord.routing import CoordFollower
from vectorlog.rpc.queryshard_client import QueryShardClient
from vectorlog.rpc.wire import Shared
from vectorlog.runners.coalesce import Coalescer, search_key

if TYPE_CHECKING:
    from vectorlog.expr import Expr

log = logging.getLogger(__name__)
#: a read waits for a new assignment in slices of this many seconds
RETRY_S = 0.2
#: the tsafe of a pchannel its owner sent with an answer this recently is taken as is, without
#: asking the owners again (seconds; a lower bound of the tsafe now, so reading at it is safe)
TSAFE_FRESH_S = 0.05


class FanOutQueryNodes:
    """QueryNodeService over the query nodes of the assignment `follower` follows; every
    read waits at most `timeout` seconds for owners (and tsafe on them)."""

    one_call = False  # no search_common: the owners' answers are merged by `search`
    coalesces = True  # `search` takes read_later (runners.coalesce)

    def __init__(
        self,
        follower: CoordFollower,
        pchannels: int,
        timeout: float,
        connect: Callable[[str], Any] = QueryShardClient,
    ) -> None:
        self.follower, self.pchannels, self.timeout = follower, pchannels, timeout
        self._connect = connect
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._turns = itertools.count()
        #: pchannel -> (the tsafe its owner last sent, time.monotonic() then)
        self._tsafes: dict[int, tuple[int, float]] = {}
        self.dropped = 0  # answers dropped: a dead epoch, or a node not serving any more
        self.coalescer = Coalescer(timeout)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()

    # -- routing ------------------------------------------------------------------------------
    def _client(self, address: str) -> Any:
        with self._lock:
            c = self._clients.get(address)
            if c is None:
                c = self._clients[address] = self._connect(address)
            return c

    def _owners(
        self, pchannels: Sequence[int], deadline: float, avoid: set[tuple[str, int]]
    ) -> dict[Owner, list[int]]:
        """Returns each chosen owner's pchannels among `pchannels`: one copy of each (in
        turn over the copies, none whose node and epoch is in `avoid`), waiting for the
        assignment to change while a pchannel has none (`avoid` is cleared when it does).
        Raises SegmentsNotLoadable, NoQueryNode."""
        turn = next(self._turns)
        while True:
            a = self.follower.assignment
            picks: dict[int, Owner] = {}
            for p in pchannels:
                copies = [o for o in a.copies(p) if o.key not in avoid]
                if copies:
                    picks[p] = copies[(turn + p) % len(copies)]
            missing = [p for p in pchannels if p not in picks]
            if not missing:
                groups: dict[Owner, list[int]] = {}
                for p, owner in picks.items():
                    groups.setdefault(owner, []).append(p)
                return groups
            failed = {p: a.failed[p] for p in missing if p in a.failed and not a.copies(p)}
            if failed:
                raise SegmentsNotLoadable(failed)
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoQueryNode(missing, self.timeout)
            if self.follower.wait_change(a.version, min(left, RETRY_S)).version != a.version:
                avoid.clear()  # new owners, or the same ones again: ask them anew

    def fan(
        self,
        op: str,
        ts: int,
        args: dict[str, Any],
        timeout: float | None = None,
        pchannels: Sequence[int] | None = None,
    ) -> list[tuple[bool, Any]]:
        """Returns (found, result) of `op` on each of `pchannels` (None: every one), each
        from an owner of one of its copies at `ts`; a pchannel whose owner failed to answer
        is asked of another copy at once, or of its new owner once the assignment moves.
        Raises SegmentsNotLoadable, NoQueryNode, ConsistencyTimeout, what a read raised."""
        budget = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        results: dict[int, tuple[bool, Any]] = {}
        asked = list(range(self.pchannels)) if pchannels is None else sorted(set(pchannels))
        left, avoid = list(asked), set()  # type: list[int], set[tuple[str, int]]
        while left:
            groups = self._owners(left, deadline, avoid)
            for owner, answer in self._answers(list(groups.items()), op, ts, deadline, args):
                if answer is not None and self._current(owner, answer):
                    for p, found, result in answer["results"]:
                        results[p] = (found, result)
                    self._saw(answer.get("tsafes", ()))
                else:
                    avoid.add(owner.key)
            left = [p for p in left if p not in results]
        return [results[p] for p in asked]

    def _answers(
        self,
        groups: list[tuple[Owner, list[int]]],
        op: str,
        ts: int,
        deadline: float,
        args: dict[str, Any],
    ) -> list[tuple[Owner, dict[str, Any] | None]]:
        """Returns each owner's answer to `op` on its pchannels (see `_ask`), asked at once:
        the last owner on this thread, the others sent first on their channel's Callers
        threads (rpc.callers: no executor's Future, no grpcio spin thread per call).
        Raises what a read raised."""
        *others, (last, ps) = groups
        started = [
            (owner, self._start(owner, op, ps_, ts, deadline, args)) for owner, ps_ in others
        ]
        mine = self._ask(last, op, ps, ts, deadline, args)
        return [(owner, wait()) for owner, wait in started] + [(last, mine)]

    def _start(
        self, owner: Owner, op: str, ps: list[int], ts: int, deadline: float, args: dict[str, Any]
    ) -> Callable[[], dict[str, Any] | None]:
        """Sends the owner its read; returns a function that waits for its answer (None as
        `_ask`)."""
        left = max(deadline - time.monotonic(), 0.0)
        wait = self._client(owner.address).start_read(op, ps, ts, left, args)

        def answer() -> dict[str, Any] | None:
            try:
                return dict(wait())
            except (NotServing, ServiceUnavailable) as exc:
                log.info("proxy: %s dropped from a read: %s", owner.node, exc)
                return None

        return answer

    def _ask(
        self, owner: Owner, op: str, ps: list[int], ts: int, deadline: float, args: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Returns the owner's answer, None if it cannot give one (unreachable, not
        serving: its pchannels are asked again once the assignment moves)."""
        wait = max(deadline - time.monotonic(), 0.0)
        try:
            return dict(self._client(owner.address).read(op, ps, ts, wait, args))
        except (NotServing, ServiceUnavailable) as exc:
            log.info("proxy: %s dropped from a read: %s", owner.node, exc)
            return None

    def _current(self, owner: Owner, answer: dict[str, Any]) -> bool:
        """Whether an answer comes from the node and epoch the assignment names (a dead
        epoch's answers are dropped)."""
        key = (str(answer["node"]), int(answer["epoch"]))
        if key == owner.key and key not in self.follower.assignment.dead:
            return True
        self.dropped += 1
        log.warning(
            "proxy: dropped an answer of %s epoch %d (owner: %s epoch %d)", *key, *owner.key
        )
        return False

    @staticmethod
    def _found(parts: list[tuple[bool, Any]], collection_id: int) -> list[Any]:
        found = [r for ok, r in parts if ok]
        if not found:
            raise CollectionNotFound(collection_id)
        return found

    def _saw(self, tsafes: Sequence[Sequence[int]]) -> None:
        """Keeps the tsafes an owner sent with its answer ([pchannel, tsafe] pairs)."""
        now = time.monotonic()
        with self._lock:
            for p, ts in tsafes:
                old = self._tsafes.get(p)
                self._tsafes[p] = (max(int(ts), old[0] if old else 0), now)

    def _fresh_tsafe(self, pchannels: Sequence[int]) -> int | None:
        """Returns the least tsafe of `pchannels` their owners sent within TSAFE_FRESH_S
        (None if one has none so fresh)."""
        oldest = time.monotonic() - TSAFE_FRESH_S
        with self._lock:
            seen = [self._tsafes.get(p) for p in pchannels]
        if not seen or any(s is None or s[1] < oldest for s in seen):
            return None
        return min(s[0] for s in seen if s is not None)

    # -- QueryNodeService ---------------------------------------------------------------------
    def tsafe(self, pchannels: Sequence[int]) -> int:
        """Returns the least tsafe of `pchannels` over their owners: those sent with the
        answers of the last TSAFE_FRESH_S (each read's owners send theirs, so a busy proxy
        asks no more), else asked of the owners."""
        fresh = self._fresh_tsafe(pchannels)
        if fresh is not None:
            return fresh
        return min(int(r) for ok, r in self.fan("tsafe", 0, {}, None, pchannels) if ok)

    def wait_tsafe(self, pchannels: Sequence[int], ts: int, timeout: float) -> None:
        """Returns once every pchannel's owner applied it up to `ts`. Raises
        ConsistencyTimeout, NoQueryNode, SegmentsNotLoadable."""
        self.fan("wait_tsafe", ts, {}, timeout, pchannels)

    def search(
        self,
        collection_id: int,
        queries: np.ndarray,
        limit: int,
        ts: int,
        partitions: list[int] | None,
        output_fields: list[str],
        *,
        expr: Expr | None = None,
        offset: int = 0,
        group_by: str | None = None,
        params: dict[str, Any] | None = None,
        metric: str | None = None,
        group_size: int = 1,
        expire_ts: int = 0,
        anns_field: str | None = None,
        read_later: bool = False,
    ) -> SearchResult:
        """Returns the merged top-`limit` hits of every owner (see QueryNodeService);
        `read_later`: whether it may read at a ts later than `ts` (not a time-travel read),
        and so be sent with others of the same kind in one search (runners.coalesce)."""
        wide, _ = widened(limit, offset)
        fields = list(output_fields)
        if group_by is not None and group_by not in fields:
            fields.append(group_by)  # each hit says its group, for the merge
        args = {
            "collection_id": collection_id,
            "limit": wide,
            "partitions": partitions,
            "output_fields": fields,
            "expr": expr,
            "offset": 0,
            "group_by": group_by,
            "params": params,
            "metric": metric,
            "group_size": group_size,
            "expire_ts": expire_ts,
            "anns_field": anns_field,
        }
        queries = queries if isinstance(queries, list) else np.asarray(queries)
        key = search_key(args, queries, read_later)
        if key is None:
            parts = self._search(args, queries, ts, None)
        else:
            parts = self.coalescer.search(
                key, args, queries, ts, lambda q, t, left: self._search(args, q, t, left)
            )
        found = self._found(parts, collection_id)
        shares = [r for r in found if r is not None]  # None: merged by its node (shards.py)
        result = merge_results(shares, limit, offset, metric, group_by, group_size)
        if group_by is not None and group_by not in output_fields:
            for entity in result.entity_list():  # a grouped merge's result holds entities
                entity.pop(group_by, None)
        return result

    def _search(
        self, args: dict[str, Any], queries: Any, ts: int, timeout: float | None
    ) -> list[tuple[bool, Any]]:
        """Returns (found, result) of each pchannel for a search of `queries` at `ts` (`fan`
        with `args`, the queries and ts added)."""
        return self.fan("search", ts, Shared({**args, "queries": queries, "ts": ts}), timeout)

    def search_common(
        self,
        collection_id: int,
        queries: np.ndarray,
        limit: int,
        ts: int,
        params: dict[str, Any] | None,
        metric: str,
        anns_field: str,
    ) -> SearchResult | None:
        """Returns None: a search over several nodes takes `search`
        (QueryNodeService.search_common)."""
        return None

    def query(
        self,
        collection_id: int,
        ts: int,
        output_fields: list[str],
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the merged rows in primary-key order (see QueryNodeService)."""
        wide, _ = widened(limit, offset)
        args = Shared(
            {
                "collection_id": collection_id,
                "ts": ts,
                "output_fields": list(output_fields),
                "partitions": partitions,
                "expr": expr,
                "keys": keys,
                "limit": wide,
                "offset": 0,
                "expire_ts": expire_ts,
            }
        )
        shares = self._found(self.fan("query", ts, args), collection_id)
        return merge_rows(shares, output_fields[0], limit, offset if limit is not None else 0)

    def get(
        self,
        collection_id: int,
        keys: list[Any],
        ts: int,
        output_fields: list[str],
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the rows with `keys`, in their order (see QueryNodeService)."""
        args = Shared(
            {
                "collection_id": collection_id,
                "keys": keys,
                "ts": ts,
                "output_fields": list(output_fields),
                "expire_ts": expire_ts,
            }
        )
        shares = self._found(self.fan("get", ts, args), collection_id)
        return rows_in_key_order(shares, output_fields[0], keys)

    def count(
        self,
        collection_id: int,
        ts: int,
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        *,
        expire_ts: int = 0,
    ) -> int:
        """Returns the sum of the owners' counts (see QueryNodeService)."""
        args = Shared(
            {
                "collection_id": collection_id,
                "ts": ts,
                "partitions": partitions,
                "expr": expr,
                "keys": keys,
                "expire_ts": expire_ts,
            }
        )
        return sum(int(n) for n in self._found(self.fan("count", ts, args), collection_id))
