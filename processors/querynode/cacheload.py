"""How recovery uses the segment cache (mmapcache.py): which Flushed segments load their vectors
from an entry, a retry from binlogs alone if one does not match, and the entries written after."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import cast

import faiss
import numpy as np

from vectorlog.core.model import CollectionHistory, DataType
from vectorlog.processors.querynode.mmapcache import (
    CachedVectors,
    CacheMismatch,
    CacheWriter,
    SegmentCache,
)
from vectorlog.processors.querynode.recovery import RecoveryPoint, SegmentFiles
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.sealed import IndexFiles
from vectorlog.processors.querynode.segment import Segment
from vectorlog.processors.querynode.vectorcolumn import VectorColumn

log = logging.getLogger(__name__)

#: by (partition, segment id, vector field id); a segment is in it with every vector field's
#: entry or not at all
Cached = dict[tuple[int, int, int], CachedVectors]
Restore = Callable[
    [CollectionHistory, list[SegmentFiles], RecoveryPoint, IndexFiles, Cached],
    tuple[Replica, int],
]


class CacheLoad:
    """The cache of one query node, in folder `root`."""

    def __init__(self, root: Path) -> None:
        self.files = SegmentCache(root)
        self.writer = CacheWriter(self.files)

    def restored(
        self,
        h: CollectionHistory,
        segs: list[SegmentFiles],
        point: RecoveryPoint,
        restore: Restore,
        files: IndexFiles,
    ) -> tuple[Replica, int]:
        """Returns `restore(h, segs, point, files, entries)` with the entries of `segs` that
        open; if one does not hold its segment's rows, they are deleted and it returns
        `restore` with none. Raises what `restore` raises otherwise."""
        cached = self._entries(h, segs, point)
        if not cached:
            return restore(h, segs, point, files, {})
        try:
            return restore(h, segs, point, files, cached)
        except CacheMismatch as exc:
            log.warning(
                "query node cache of collection %d does not match its binlogs, which are "
                "read instead: %s",
                h.collection_id,
                exc,
            )
            self.files.drop(h.collection_id, sorted({sid for _, sid, _ in cached}))
            return restore(h, segs, point, files, {})

    def _entries(
        self, h: CollectionHistory, segs: list[SegmentFiles], point: RecoveryPoint
    ) -> Cached:
        vectors = [f for f in h.schema.fields if f.dtype is DataType.FLOAT_VECTOR]
        out: Cached = {}
        for f in segs:
            rows = point.flushed.get(f.segment_id)
            if not rows:
                continue
            entries = {}
            for vec in vectors:
                metric = vec.metric_type or "L2"
                entry = self.files.open(
                    h.collection_id, f.segment_id, vec.field_id, vec.dim or 0, metric, rows
                )
                if entry is None:
                    break
                entries[f.partition_id, f.segment_id, vec.field_id] = entry
            else:
                out |= entries
        return out

    def loaded(self, point: RecoveryPoint, replicas: dict[int, Replica]) -> None:
        """After recovery: deletes the entries of segments no longer loaded (compacted away,
        of dropped collections) and queues the writes of the Flushed segments loaded from
        binlogs that hold exactly their rows."""
        keep: dict[int, set[int]] = {}
        writes = []
        for cid, replica in replicas.items():
            for col in replica.vectors.values():
                for (pid, sid), seg in list(col.segments.items()):
                    rows = point.flushed.get(sid)
                    if rows is None:
                        continue
                    keep.setdefault(cid, set()).add(sid)
                    if not seg.mapped and len(seg) == rows:
                        writes.append((replica, col, pid, sid, seg, rows))
        self.files.retain(keep)
        for replica, col, pid, sid, seg, rows in writes:
            take = partial(_take, col, pid, sid, seg, rows)
            self.writer.write(replica.collection_id, sid, col.field_id, take, replica.lock)

    def flushed(self, replica: Replica, pid: int, sid: int, rows: int) -> bool:
        """Writes the entry of a segment the live node holds once it is Flushed with `rows`
        rows (so the first restart after it maps it too); returns False while the node has
        not applied all of them yet (call again), True once written or not to be."""
        segs = [(col, col.segments.get((pid, sid))) for col in replica.vectors.values()]
        if any(seg is None or len(seg) < rows for _, seg in segs):
            gone = replica.dropped_ts is not None or pid in replica.dropped_partitions
            return all(seg is None for _, seg in segs) and gone
        for col, seg in segs:
            assert seg is not None
            take = partial(_take, col, pid, sid, seg, rows)
            lock = replica.lock
            self.writer.write_now(replica.collection_id, sid, col.field_id, take, lock, rows)
        return True

    def sealed(self, replica: Replica, pid: int, sid: int) -> None:
        """Writes the entry of a Sealed segment the live node holds every row of (its
        pchannel's tsafe passed the seal): written while the data node flushes it, so a node
        killed right after the flush maps it at its restart. If the data node's flush holds
        other rows (it should not), `flushed` writes the entry again, and a restart finds
        the mismatch and reads the binlogs."""
        with replica.lock:
            segs = [(c, c.segments.get((pid, sid))) for c in replica.vectors.values()]
        for col, seg in segs:
            if seg is None:
                continue
            rows, lock = len(seg), replica.lock
            take = partial(_take, col, pid, sid, seg, rows)
            self.writer.write_now(replica.collection_id, sid, col.field_id, take, lock, rows)


def _take(
    col: VectorColumn, pid: int, sid: int, seg: Segment, rows: int
) -> tuple[faiss.IndexFlat, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """Returns copies of a segment's (flat storage, row ids, norms, raw vectors or None) to
    write, None if it changed since (moved by a compaction, served from an index, other
    rows). Call with the replica's lock: a copy (a memcpy) is all it holds the lock for, not
    the file writes."""
    if not isinstance(seg, Segment):  # a sparse field's: never cached
        return None
    if col.segments.get((pid, sid)) is not seg or seg.index is not None:
        return None
    if seg.flat is None or seg.mapped or len(seg) != rows or seg.flat.ntotal != rows:
        return None
    flat = cast(faiss.IndexFlat, faiss.clone_index(seg.flat))
    raw = None if seg.raw is None else seg.raw.view().copy()
    return flat, seg.row_ids.view().copy(), seg.norms.view().copy(), raw
