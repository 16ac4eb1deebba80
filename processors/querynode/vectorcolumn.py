"""One vector field of a replica: its segments (exact storage while growing, a faiss index once
sealed and indexed), where each replica row sits in them, and the k-NN and range searches over
them.

A collection with several FLOAT_VECTOR fields (Milvus 2.4: up to four) has one column per
field, each with its own Segment objects: a field's index orders its segment's positions its
own way, and each is loaded, unloaded and cached on its own. The replica's rows (keys,
visibility, scalar columns) are shared; each column maps a replica row to (segment ordinal,
position) and keeps the alive bits of its own positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import FieldSchema
from vectorlog.processors.querynode.exact import LARGER_IS_NEARER, worst
from vectorlog.processors.querynode.filtercache import Selection
from vectorlog.processors.querynode.growarray import GrowArray
from vectorlog.processors.querynode.mmapcache import CachedVectors
from vectorlog.processors.querynode.ranged import RangeBounds, segment_range
from vectorlog.processors.querynode.ranged import ranked as in_order
from vectorlog.processors.querynode.sealed import SearchKnobs, SegmentIndex
from vectorlog.processors.querynode.segment import DeferredAppends, Segment, Selected
from vectorlog.processors.querynode.topk import merged

#: a plan: the segments to search, each with the mask of its selected positions (None: its
#: alive bitmap, the fast path; a Selection: a cached filter's, see filtercache.py)
Plan = list[tuple[Segment, Selected]]


class VectorColumn:
    """The segments of one vector field of a replica."""

    def __init__(self, field: FieldSchema) -> None:
        self.field, self.name, self.dim = field, field.name, field.dim or 0
        self.field_id = field.field_id
        self.metric = field.metric_type or "L2"
        self.segments: dict[tuple[int, int], Segment] = {}  # by (partition, id)
        self.segs: list[Segment] = []  # by ordinal
        self.seg = GrowArray(np.int32)  # replica row -> its segment's ordinal
        self.pos = GrowArray(np.int64)  # replica row -> its position in the segment
        #: cache entries of segments not created yet, adopted when they are
        self.cached: dict[tuple[int, int], CachedVectors] = {}

    def reserve(self, rows: int) -> None:
        self.seg.reserve(rows)
        self.pos.reserve(rows)

    # -- rows ---------------------------------------------------------------------------
    def segment(self, partition: int, seg_id: int) -> Segment:
        """Returns a segment, created empty if new (from its cache entry, if any)."""
        seg = self.segments.get((partition, seg_id))
        if seg is None:
            seg = Segment(seg_id, partition, self.dim, len(self.segs), self.metric)
            cached = self.cached.pop((partition, seg_id), None)
            if cached is not None:
                seg.adopt(cached)
            self.segments[partition, seg_id] = seg
            self.segs.append(seg)
        return seg

    def add(
        self,
        rows: np.ndarray,
        partition: int,
        seg_id: int,
        ids: np.ndarray,
        vectors: np.ndarray | None,
        flags: np.ndarray,
        later: DeferredAppends | None = None,
    ) -> None:
        """Adds replica `rows` (row ids `ids`, alive `flags`) to their segment (or queues
        that in `later`); `vectors` None: they are in the segment's cache entry."""
        seg = self.segment(partition, seg_id)
        if later is None:
            first = seg.append(rows, ids, vectors, flags)
        else:
            first = later.append(seg, rows, ids, vectors, flags)
        n = len(rows)
        self.seg.extend(np.full(n, seg.ordinal, dtype=np.int32))
        self.pos.extend(np.arange(first, first + n, dtype=np.int64))

    def kill(self, rows: np.ndarray) -> None:
        """Clears the alive bits of replica `rows` in their segments (in place)."""
        segs, pos = self.seg.view()[rows], self.pos.view()[rows]
        for ordinal in np.unique(segs).tolist():
            self.segs[ordinal].alive.clear(pos[segs == ordinal])

    def rehome(
        self, partition: int, olds: list[int], new_id: int, row_ids: np.ndarray, bare: bool = False
    ) -> int:
        """Moves the rows of segments `olds` whose row ids are in `row_ids` into segment
        `new_id`; the others stay in a smaller copy of their segment. Returns the rows
        moved (see Replica.rehome). `bare`: without their vectors (`bare_switch`): the
        caller loads the segment's index next, under the same hold of the lock."""
        moved = 0
        for sid in olds:
            seg = self.segments.get((partition, sid))
            if seg is None or not len(seg):
                continue
            held = seg.rows.view()
            going = np.isin(seg.row_ids.view(), row_ids) & (held >= 0)
            if going.any():
                left = np.flatnonzero(~going & (held >= 0))
                self._move(seg, np.flatnonzero(going), self.segment(partition, new_id), bare)
                rest = Segment(sid, partition, self.dim, seg.ordinal, self.metric)
                self._move(seg, left, rest)
                self.segments[partition, sid] = self.segs[seg.ordinal] = rest
                moved += int(np.count_nonzero(going))
        return moved

    def _move(self, seg: Segment, pos: np.ndarray, to: Segment, bare: bool = False) -> None:
        """Appends the rows at `pos` of `seg` to segment `to` (`bare`: without their
        vectors), pointing them there."""
        if not len(pos):
            return
        rows, ids, alive = seg.rows.view()[pos], seg.row_ids.view()[pos], seg.alive.alive(pos)
        if bare:
            first = to.append_bare(rows, ids, seg.norms.view()[pos], alive)
        else:
            first = to.append(rows, ids, seg.originals(pos), alive)
        self.seg.view()[rows] = to.ordinal
        self.pos.view()[rows] = np.arange(first, first + len(pos), dtype=np.int64)

    def bare_switch(self, partition: int, new_id: int, index: SegmentIndex) -> bool:
        """Returns whether a handoff's switch may move rows into segment `new_id` without
        their vectors (`rehome(..., bare=True)`), `index` loading next: it reconstructs them
        exactly (the flat copy would be freed by its load), the storage is the vectors as
        inserted (not COSINE's, which keeps them besides), and the segment is new. Memory:
        no flat copy of the merged segment beside both indexes at the switch."""
        key = (partition, new_id)
        fresh = key not in self.segments and key not in self.cached
        return fresh and index.exact and self.metric != "COSINE"

    def values(self, rows: np.ndarray) -> list[list[float]]:
        """Returns the vectors of replica `rows` as inserted."""
        if not len(rows):
            return []
        segs, pos = self.seg.view()[rows], self.pos.view()[rows]
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        for ordinal in np.unique(segs).tolist():
            at = segs == ordinal
            out[at] = self.segs[ordinal].originals(pos[at])
        return out.tolist()

    def cached_loaded(self) -> list[Segment]:
        """Ends loading from cache entries; returns the segments served from one. Raises
        CacheMismatch if one did not get exactly its entry's rows."""
        self.cached.clear()
        out = [s for s in self.segs if s.mapped]
        for seg in out:
            seg.cached_loaded()
        return out

    # -- search -------------------------------------------------------------------------
    def planned(self, partitions: list[int] | None, metric: str) -> list[Segment]:
        """Returns the segments of `partitions` (None: all). Raises InvalidArgument if a
        loaded segment index has another metric than `metric`."""
        segs = [s for s in self.segs if partitions is None or s.partition in partitions]
        for seg in segs:
            if seg.index is not None and seg.index.metric != metric:
                raise InvalidArgument(
                    f"search metric {metric!r} does not match the {seg.index.metric!r} index "
                    f"{seg.index.index_id} of segment {seg.segment_id}"
                )
        return segs

    def knn(
        self, q: np.ndarray, qn: np.ndarray, metric: str, want: int, knobs: SearchKnobs, plan: Plan
    ) -> tuple[np.ndarray, np.ndarray]:
        """Returns (distances, replica rows) of the top `want` per query over the plan's
        segments, merged; empty slots are -1."""
        knobs = knobs.at_least(want)
        parts = []
        for seg, mask in plan:
            found = seg.search(q, qn, metric, want, knobs, mask)
            if found is None:
                continue
            dist, pos = found
            if not pos.size or _filled(pos[:, -1]):  # every slot filled (empties are last)
                parts.append((dist, seg.rows.view()[pos]))
                continue
            empty = pos < 0
            rows = seg.rows.view()[np.where(empty, 0, pos)]
            parts.append((np.where(empty, worst(metric), dist), np.where(empty, -1, rows)))
        return merged(parts, len(q), want, metric in LARGER_IS_NEARER)

    def in_range(
        self, q: np.ndarray, qn: np.ndarray, metric: str, bounds: RangeBounds, plan: Plan
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Returns per query the (replica rows, distances) of every planned row in range,
        nearest first."""
        parts: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(len(q))]
        for seg, mask in plan:
            if not len(seg):
                continue
            if isinstance(mask, Selection):
                mask = mask.mask()
            for i, (pos, d) in enumerate(segment_range(seg, q, qn, metric, bounds, mask)):
                rows = seg.rows.view()[pos]
                held = rows >= 0
                parts[i].append((rows[held], d[held]))
        return [in_order(p, bounds) for p in parts]

    # -- segment indexes ----------------------------------------------------------------
    def check_dim(self, segment_id: int, index: SegmentIndex) -> None:
        """Raises InvalidArgument if `index` has another dim than this field."""
        if index.index.d != self.dim:
            raise InvalidArgument(
                f"index {index.index_id} of segment {segment_id} has dim {index.index.d}, "
                f"the vector field {self.name!r} {self.dim}"
            )

    def load_index(self, partition: int, segment_id: int, index: SegmentIndex) -> bool:
        """Serves a segment from `index` (see Replica.load_index). Call with the replica's
        lock held."""
        return load_segment_index(self, partition, segment_id, index)

    def serving(self, partition: int, segment_id: int) -> int | None:
        """Returns the id of the index a segment is served from, None if exact."""
        return serving_index(self, partition, segment_id)

    def unload_indexes(self, index_id: int) -> None:
        """Takes the segment indexes of `index_id` (-1: every one) out of service."""
        unload_segment_indexes(self, index_id)


def load_segment_index(col: Any, partition: int, segment_id: int, index: Any) -> bool:
    """Serves a segment of column `col` (dense or sparse: its `segments`, `pos`) from
    `index` once every row of the index is held; returns whether the load is done with
    (loaded, already served, or nothing left to serve: the segment holds rows the index
    lacks)."""
    seg = col.segments.get((partition, segment_id))
    if seg is not None and seg.index is not None and seg.index.index_id == index.index_id:
        return True
    if seg is None or len(seg) < len(index.row_ids):
        return False  # rows still missing: no need to look them up
    current = positions_of(seg.row_ids.view(), index.row_ids)
    found = int(np.count_nonzero(current >= 0))
    if found < len(index.row_ids):
        return False
    if found < len(seg):
        return True
    rows = seg.load(index, current)
    at = rows >= 0
    col.pos.view()[rows[at]] = np.flatnonzero(at)
    return True


def serving_index(col: Any, partition: int, segment_id: int) -> int | None:
    """Returns the id of the index a segment of `col` is served from, None if exact."""
    seg = col.segments.get((partition, segment_id))
    return None if seg is None or seg.index is None else int(seg.index.index_id)


def unload_segment_indexes(col: Any, index_id: int) -> None:
    """Takes the segment indexes of `index_id` (-1: every one) of `col` out of service."""
    for seg in col.segs:
        if seg.index is not None and index_id in (-1, seg.index.index_id):
            seg.unload()


def _filled(last: np.ndarray) -> bool:
    """Returns whether no query's last slot is empty (one query: no numpy reduction)."""
    return bool(last[0] >= 0) if len(last) == 1 else bool(last.min() >= 0)


def positions_of(held: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
    """Returns, for each of `row_ids`, its position in `held` (-1 if absent)."""
    if not len(held):
        return np.full(len(row_ids), -1, dtype=np.int64)
    order = np.argsort(held, kind="stable")
    at = np.minimum(np.searchsorted(held[order], row_ids), len(held) - 1)
    return np.where(held[order][at] == row_ids, order[at], -1)
