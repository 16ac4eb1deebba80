"""The server side of pymilvus's search iterator v2 (search params `search_iter_v2`,
`search_iter_batch_size`, `search_iter_id`, `search_iter_last_bound`): each page is an exact
range search at one pinned timestamp beyond the previous page's last distance, so pages
are distinct, sorted, and together the brute-force ordering.

The first call (no `search_iter_id`) gets a token and the snapshot ts (`session_ts`);
pymilvus sends both back with every later call (as `guarantee_timestamp`), with the last
distance it received as `search_iter_last_bound`. The near bound is inclusive (Milvus's
range_filter), so hits tied with it are fetched again and dropped if this token already
returned them: the few keys returned at the last bound are kept per token (bounded LRU;
a token evicted from it skips the rest of a tie, as Milvus's own iterator may).
"""

from __future__ import annotations

import math
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from vectorlog.core.types import Hit
from vectorlog.processors.proxy.search_shape import MAX_NQ
from vectorlog.processors.querynode.exact import LARGER_IS_NEARER

V2, BATCH, TOKEN, LAST_BOUND = (
    "search_iter_v2",
    "search_iter_batch_size",
    "search_iter_id",
    "search_iter_last_bound",
)
KEEP_TOKENS = 4096  # iterators whose tied keys are remembered


def wants_v2(params: dict[str, Any]) -> bool:
    """Returns whether a search asks for an iterator v2 page."""
    return str(params.get(V2, "")).lower() == "true"


@dataclass
class Page:
    """One iterator page: its hits (one query), the token and the bound to send back."""

    hits: list[Hit]
    token: str
    last_bound: float


@dataclass
class _Tie:
    bound: float
    keys: set[Any] = field(default_factory=set)


class SearchCursors:
    """Per-token memory of the keys returned at an iterator's last bound."""

    def __init__(self, keep: int = KEEP_TOKENS) -> None:
        self._ties: OrderedDict[str, _Tie] = OrderedDict()
        self._keep, self._lock = keep, threading.Lock()

    def range_params(
        self, params: dict[str, Any], metric: str, token: str
    ) -> tuple[dict[str, Any], int, float | None]:
        """Returns the index params of the next page of `token` (a range search from the
        last bound on, inclusive), how many more hits to fetch (the tied keys already
        returned), and the last bound (None on the first page)."""
        inner = dict(params.get("params") or {})
        bound = params.get(LAST_BOUND)
        nearer = metric in LARGER_IS_NEARER
        inner.setdefault("radius", -math.inf if nearer else math.inf)
        if bound is None:
            return inner, 0, None
        inner["range_filter"] = float(bound)
        return inner, len(self._tied(token, float(bound))), float(bound)

    def page(self, hits: list[Hit], token: str, bound: float | None, batch: int) -> Page:
        """Returns the page of `hits` (nearest first, from `bound` on) without the keys
        `token` returned at `bound` already, at most `batch`; remembers the new tie."""
        seen = self._tied(token, bound) if bound is not None else set()
        fresh = [h for h in hits if not (h["distance"] == bound and h["id"] in seen)][:batch]
        if not fresh:
            return Page([], token, bound if bound is not None else 0.0)
        last = float(fresh[-1]["distance"])
        tied = {h["id"] for h in fresh if h["distance"] == last}
        if last == bound:
            tied |= seen
        with self._lock:
            self._ties[token] = _Tie(last, tied)
            self._ties.move_to_end(token)
            while len(self._ties) > self._keep:
                self._ties.popitem(last=False)
        return Page(fresh, token, last)

    def _tied(self, token: str, bound: float | None) -> set[Any]:
        with self._lock:
            tie = self._ties.get(token)
        return set(tie.keys) if tie is not None and tie.bound == bound else set()


def new_token() -> str:
    """Returns a fresh iterator token."""
    return uuid.uuid4().hex


def batch_size(params: dict[str, Any], topk: int) -> int:
    """Returns the page size asked for (search_iter_batch_size, else the topk), 1..16384."""
    value = params.get(BATCH, topk)
    try:
        size = int(value)
    except (TypeError, ValueError):
        size = topk
    return max(1, min(size, MAX_NQ))
