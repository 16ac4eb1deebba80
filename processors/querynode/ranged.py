"""Range search on a query node: every selected row whose distance to the query lies in
Milvus's range, computed exactly from the segment's stored (or exactly reconstructed)
vectors, so the answer is the brute-force one whatever index serves the segment.

Milvus's bounds (knowhere's distance_in_range): for L2, range_filter <= d < radius; for IP
and COSINE (larger is nearer), radius < d <= range_filter. range_filter is optional (no
bound on the near side). Distances are compared as float32, as knowhere does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.types import LARGER_IS_NEARER, RADIUS, RANGE_FILTER
from vectorlog.processors.querynode.exact import scores

if TYPE_CHECKING:
    from vectorlog.processors.querynode.segment import Segment

#: segment positions scored at once (x queries x 4 bytes of distances)
CHUNK = 1 << 16

Found = tuple[np.ndarray, np.ndarray]  # (positions or rows, distances) of one query


@dataclass(frozen=True)
class RangeBounds:
    """The range of one range search: `radius` (far side, exclusive) and `range_filter`
    (near side, inclusive; None: unbounded) of a metric where `larger_is_nearer` or not."""

    radius: float
    range_filter: float | None
    larger_is_nearer: bool

    @classmethod
    def of(cls, params: dict[str, Any] | None, metric: str) -> RangeBounds | None:
        """Returns the bounds of search `params` (None without a radius); the proxy has
        checked the values (vectorlog.processors.proxy.reads.range_params)."""
        if not params or params.get(RADIUS) is None:
            return None
        near = params.get(RANGE_FILTER)
        return cls(
            float(params[RADIUS]),
            None if near is None else float(near),
            metric in LARGER_IS_NEARER,
        )

    def inside(self, d: np.ndarray) -> np.ndarray:
        """Returns the mask of the distances `d` inside the range (compared as float32)."""
        d = d.astype(np.float32, copy=False)
        radius = np.float32(self.radius)
        if self.larger_is_nearer:
            mask = d > radius
            if self.range_filter is not None:
                mask &= d <= np.float32(self.range_filter)
        else:
            mask = d < radius
            if self.range_filter is not None:
                mask &= d >= np.float32(self.range_filter)
        return mask

    def order(self, d: np.ndarray) -> np.ndarray:
        """Returns the stable order of distances `d`, nearest first."""
        return np.argsort(-d if self.larger_is_nearer else d, kind="stable")


def segment_range(
    seg: Segment,
    q: np.ndarray,
    qn: np.ndarray,
    metric: str,
    bounds: RangeBounds,
    mask: np.ndarray | None,
) -> list[Found]:
    """Returns, per query, the (positions, distances) in range among the segment's alive
    rows (`mask` None) or the positions set in `mask`, in position order."""
    positions = np.flatnonzero(seg.alive.mask() if mask is None else mask)
    found: list[list[Found]] = [[] for _ in range(len(q))]
    for lo in range(0, len(positions), CHUNK):
        pos = positions[lo : lo + CHUNK]
        v, norms = seg.stored_at(pos), seg.norms.view()[pos]
        d = scores(q, qn, np.ascontiguousarray(v, np.float32), norms, metric, seg.unit)
        for i, row in enumerate(d):
            keep = bounds.inside(row)
            found[i].append((pos[keep], row[keep].astype(np.float32)))
    return [_joined(parts) for parts in found]


def _joined(parts: list[Found]) -> Found:
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    return np.concatenate([p for p, _ in parts]), np.concatenate([d for _, d in parts])


def ranked(parts: list[Found], bounds: RangeBounds) -> Found:
    """Returns one query's (rows, distances) of several segments merged, nearest first."""
    rows, dist = _joined(parts)
    order = bounds.order(dist)
    return rows[order], dist[order]
