"""Handoff after a compaction (Milvus 2.3's): the compacted-from segments keep serving a vector
field, with their loaded indexes, until the merged segment's index for that field is loaded.

A SegmentsCompacted moves the rows it merged into the new segment, whose index the index node
builds only afterwards. Moving them at once would search them exactly until then (a 1M-row
segment: ~20 ms a search instead of under 1 ms). So, per vector field (each column has its own
segments and indexes), if any compacted-from segment serves a loaded index, the move waits: a
`Handoff` records which segments hold the merged segment's rows and their row ids; when that
field's index of the merged segment arrives, the rows move and the index loads under the
replica's lock (`switch`), so a search sees the rows once, before or after. A field none of
whose compacted-from segments is indexed (no index, or not loaded yet) moves at once, as does a
waiting one once none of them is indexed any more (its index dropped: `unblocked`).

Visibility is the replica's, never the segments': the rows a compaction dropped end at its
horizon when it is applied, whether their field waits or not; deletes in between reach the rows
where they are. A second compaction of a merged segment still waiting takes over its rows where
they are. The segments merged away (`compacted`) take no index load any more once no field
waits on them (`gone`), and are handed to the replica's `on_retired` (the query node drops
their cache entries) once no field serves from them. A drop of the partition or collection
gives the handoffs up (`forget`): nothing is attached to it any more, and the compacted-from
segments keep their rows and indexes for reads as of before the drop (as every segment of a
dropped partition does: time travel).

Nothing of it is durable: a restart loads the segments of its binlog checkpoint, the
compacted-from ones if it is before the compaction (replayed from dml then, waiting again if
their indexes loaded first), else the merged one, searched exactly until its index loads
(Milvus would load the compacted-from ones: their files may be deleted here by then); the
compacted-from segments' indexes on coord then have nothing to serve (indexes.py forgets
them, so a load does not wait for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: (vector field id, partition, merged segment id)
Key = tuple[int, int, int]


@dataclass
class Handoff:
    """A merged segment a vector field does not serve yet: its rows are those of segments
    `olds` whose row ids are in `row_ids` (sorted)."""

    partition: int
    olds: list[int]
    row_ids: np.ndarray


class Handoffs:
    """The handoffs of one replica's vector fields. Call every method with its lock held."""

    def __init__(self) -> None:
        self.pending: dict[Key, Handoff] = {}
        #: (partition, segment) of every segment merged away
        self.compacted: set[tuple[int, int]] = set()
        self._unretired: set[tuple[int, int]] = set()  # of those, the ones not retired yet

    def members(self, col: Any, partition: int, olds: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Returns the (replica rows, row ids) segments `olds` of column `col` hold (a merged
        segment still waiting: the rows of it its compacted-from segments hold)."""
        rows, ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for sid in olds:
            h = self.pending.get((col.field_id, partition, sid))
            if h is not None:
                r, i = self.members(col, partition, h.olds)
                keep = np.isin(i, h.row_ids)
                rows.append(r[keep])
                ids.append(i[keep])
                continue
            seg = col.segments.get((partition, sid))
            if seg is not None and len(seg):
                held = seg.rows.view() >= 0
                rows.append(seg.rows.view()[held])
                ids.append(seg.row_ids.view()[held])
        return np.concatenate(rows), np.concatenate(ids)

    def compact(
        self, col: Any, partition: int, olds: list[int], new_id: int, row_ids: np.ndarray
    ) -> bool:
        """Applies a compaction of `olds` into `new_id` (holding `row_ids`) to column `col`:
        its rows move now, unless one of the segments holding them serves an index; then
        the move waits for the merged segment's index. Returns whether it waits."""
        self.compacted.update((partition, s) for s in olds)
        self._unretired.update((partition, s) for s in olds)
        holding: list[int] = []
        for sid in olds:  # a merged segment still waiting: its rows are in its olds
            h = self.pending.pop((col.field_id, partition, sid), None)
            holding.extend([sid] if h is None else h.olds)
        if any(_indexed(col, partition, s) for s in holding):
            ids = np.unique(np.asarray(row_ids, dtype=np.int64))
            self.pending[col.field_id, partition, new_id] = Handoff(partition, holding, ids)
            return True
        col.rehome(partition, holding, new_id, row_ids)
        return False

    def switch(self, col: Any, partition: int, segment_id: int, index: Any = None) -> bool:
        """Moves the rows of merged segment `segment_id` into it in column `col` if they
        wait for its index (`index`, which the caller loads next, under the same lock);
        returns whether they did. Without their vectors if `index` holds exactly those rows
        and reconstructs them exactly (its load would free the flat copy they make)."""
        h = self.pending.pop((col.field_id, partition, segment_id), None)
        if h is None:
            return False
        if index is not None and self._bare(col, partition, segment_id, h, index):
            col.rehome(partition, h.olds, segment_id, h.row_ids, bare=True)
        else:
            col.rehome(partition, h.olds, segment_id, h.row_ids)
        return True

    def _bare(self, col: Any, partition: int, segment_id: int, h: Handoff, index: Any) -> bool:
        """Returns whether the rows of `h` may move without their vectors: column `col` can
        (dense: `bare_switch`) and `index` will load over exactly the rows that move."""
        can = getattr(col, "bare_switch", None)
        if can is None or not can(partition, segment_id, index):
            return False
        _, ids = self.members(col, partition, h.olds)
        moving = np.unique(ids[np.isin(ids, h.row_ids)])
        return len(index.row_ids) == len(moving) and np.array_equal(
            moving, np.unique(index.row_ids)
        )

    def unblocked(self, col: Any) -> None:
        """Moves the rows of every merged segment of column `col` none of whose holding
        segments serves an index any more (nothing is gained by waiting)."""
        for key, h in list(self.pending.items()):
            if key[0] == col.field_id and not any(_indexed(col, h.partition, s) for s in h.olds):
                self.switch(col, h.partition, key[2])

    def sources(self, partition: int, segment_id: int) -> list[int]:
        """Returns the segments that hold merged segment `segment_id`'s rows while one of its
        vector fields waits for its index ([] if none does)."""
        for key, h in self.pending.items():
            if key[1:] == (partition, segment_id):
                return list(h.olds)
        return []

    def forget(self, partition: int | None) -> None:
        """Forgets the merged segments of `partition` (None: every one) still waiting for an
        index: it was dropped, so none will be attached. Their rows stay where they are (in
        the compacted-from segments, with their indexes) for reads as of before the drop."""
        for key, h in list(self.pending.items()):
            if partition is None or h.partition == partition:
                del self.pending[key]

    def gone(self, col: Any, partition: int, segment_id: int) -> bool:
        """Returns whether a segment was merged away and column `col` no longer serves its
        rows from it (an index of it has nothing left to serve)."""
        if (partition, segment_id) not in self.compacted:
            return False
        return not any(
            key[0] == col.field_id and h.partition == partition and segment_id in h.olds
            for key, h in self.pending.items()
        )

    def retired(self) -> list[int]:
        """Returns the segments merged away that no vector field serves from any more and
        were not returned before."""
        busy = {(h.partition, s) for h in self.pending.values() for s in h.olds}
        done = sorted(self._unretired - busy)
        self._unretired -= set(done)
        return [sid for _, sid in done]


def _indexed(col: Any, partition: int, segment_id: int) -> bool:
    """Returns whether a segment of column `col` serves a loaded index."""
    seg = col.segments.get((partition, segment_id))
    return seg is not None and seg.index is not None
