"""Merging the answers of several query nodes, each over its own dml pchannels (seed 001
s.8.2, Milvus's reduce at the proxy): the top-k of the hits, the rows in primary-key order,
the counts summed. Each node answered the same read with the offset folded into its limit
(it cannot know which of its hits the others outrank), so the merge skips the offset once.

The merged answer equals one node's over every pchannel: a row lives on exactly one
pchannel, so the k nearest overall are among the k nearest of each share, the rows ranked
offset..offset+limit by key among each share's first offset+limit, and a count is a sum.
Ties in distance are broken by primary key, so the order does not depend on which node
answered first. Grouped searches merge each group's hits across shares; a group's best
`group_size` hits are exact when each share returned the group (a share returns its top
offset+limit groups), which holds for every group ranked in the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vectorlog.core.results import SearchResult
from vectorlog.core.types import LARGER_IS_NEARER, Hit


def widened(limit: int | None, offset: int) -> tuple[int | None, int]:
    """Returns the (limit, offset) each share is asked for: the offset folded into the limit."""
    return (None if limit is None else limit + offset), 0


def _order(metric: str | None) -> Any:
    larger = (metric or "L2").upper() in LARGER_IS_NEARER

    def key(h: Hit) -> tuple[float, tuple[int, Any]]:
        return (-h["distance"] if larger else h["distance"], _pk_key(h["id"]))

    return key


def _pk_key(pk: Any) -> tuple[int, Any]:
    return (0, pk) if isinstance(pk, int) else (1, str(pk))


def merge_results(
    shares: Sequence[SearchResult],
    limit: int,
    offset: int,
    metric: str | None,
    group_by: str | None = None,
    group_size: int = 1,
) -> SearchResult:
    """Returns the merge of the nodes' results (as merge_hits): with integer primary keys,
    columns and no grouping, on the arrays (one sort by query, distance and key); else
    through their hits."""
    if not shares:
        return SearchResult.empty(0)
    names = list(shares[0].fields)
    plain = all(
        s.entities is None and isinstance(s.ids, np.ndarray) and list(s.fields) == names
        for s in shares
    )
    if group_by is not None or not plain:
        hits = merge_hits([s.hits() for s in shares], limit, offset, metric, group_by, group_size)
        return SearchResult.of_hits(hits)
    return _merged_arrays(shares, names, limit, offset, metric)


def _merged_arrays(
    shares: Sequence[SearchResult], names: list[str], limit: int, offset: int, metric: str | None
) -> SearchResult:
    """Returns per query the hits ranked offset..offset+limit-1 of all `shares` by distance
    (`metric`'s order), ties by primary key."""
    nq = shares[0].nq
    ids = np.concatenate([s.ids for s in shares]).astype(np.int64, copy=False)
    dist = np.concatenate([s.distances for s in shares])
    larger = (metric or "L2").upper() in LARGER_IS_NEARER
    if nq == 1:  # one query (most searches): no per-query ranks (half the numpy calls)
        keep = np.lexsort((ids, -dist if larger else dist))[offset : offset + limit]
        offsets = np.array([0, len(keep)], dtype=np.int64)
    else:
        keep, offsets = _kept(ids, dist, larger, shares, limit, offset)
    columns = {}
    for n in names:
        every = [v for s in shares for v in s.fields[n]]
        columns[n] = [every[j] for j in keep.tolist()]
    return SearchResult.of_arrays(ids[keep], dist[keep], offsets, columns)


def _kept(
    ids: np.ndarray,
    dist: np.ndarray,
    larger: bool,
    shares: Sequence[SearchResult],
    limit: int,
    offset: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Returns (the positions in the concatenated shares of the hits kept, query by query:
    each one's ranked offset..offset+limit-1, the new per-query offsets)."""
    nq = shares[0].nq
    query = np.concatenate([np.repeat(np.arange(nq), np.diff(s.offsets)) for s in shares])
    order = np.lexsort((ids, -dist if larger else dist, query))
    counts = np.bincount(query, minlength=nq)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    rank = np.arange(len(order)) - starts
    keep = order[(rank >= offset) & (rank < offset + limit)]
    kept = np.bincount(query[keep], minlength=nq)
    return keep, np.cumsum([0, *kept.tolist()], dtype=np.int64)


def merge_hits(
    shares: Sequence[list[list[Hit]]],
    limit: int,
    offset: int,
    metric: str | None,
    group_by: str | None = None,
    group_size: int = 1,
) -> list[list[Hit]]:
    """Returns per query the merged hits of `shares` (each a node's answer: per query,
    nearest first), ranked by `metric`'s order, the first `offset` (hits, or groups with
    `group_by`) skipped, at most `limit` (hits or groups of up to `group_size`)."""
    if not shares:
        return []
    key = _order(metric)
    out = []
    for i in range(len(shares[0])):
        hits = sorted((h for share in shares for h in share[i]), key=key)
        if group_by is None:
            out.append(hits[offset : offset + limit])
        else:
            out.append(_grouped(hits, group_by, offset, limit, group_size))
    return out


def _grouped(hits: list[Hit], field: str, offset: int, limit: int, size: int) -> list[Hit]:
    """Returns the hits of the groups ranked offset..offset+limit-1 by their best hit, each
    group's best `size` hits together (`hits` nearest first)."""
    groups: dict[Any, list[Hit]] = {}
    for h in hits:
        value = h["entity"].get(field)
        bucket = groups.setdefault(_hashable(value), [])
        if len(bucket) < size:
            bucket.append(h)
    ranked = list(groups.values())[offset : offset + limit]
    return [h for group in ranked for h in group]


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def merge_rows(
    shares: Sequence[list[dict[str, Any]]], pk: str, limit: int | None, offset: int
) -> list[dict[str, Any]]:
    """Returns the rows of `shares` (each in primary-key order) in primary-key order, from
    the `offset`-th, at most `limit` (None: all)."""
    rows = sorted((r for share in shares for r in share), key=lambda r: _pk_key(r[pk]))
    return rows[offset:] if limit is None else rows[offset : offset + limit]


def rows_in_key_order(
    shares: Sequence[list[dict[str, Any]]], pk: str, keys: Sequence[Any]
) -> list[dict[str, Any]]:
    """Returns the rows of `shares` (a get: each key on one share at most) in `keys`' order."""
    at = {k: i for i, k in enumerate(keys)}
    rows = [r for share in shares for r in share]
    return sorted(rows, key=lambda r: at.get(r[pk], len(at)))
