"""How the query node uses the segment cache (mmapcache.py): which Flushed segments load their
vectors from an entry at recovery, a retry from binlogs alone if one does not match, and the
entries written: grown with the segments (cachewriter.py), committed once they are Sealed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from vectorlog.core.model import CollectionHistory, DataType
from vectorlog.processors.querynode.cachewriter import CacheWriter, Chunk, Key
from vectorlog.processors.querynode.mmapcache import CachedVectors, CacheMismatch, SegmentCache
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
#: a segment's entry grows with it from this many rows (a smaller one is written at its seal)
GROW_MIN_ROWS = 8192
#: rows copied out of a segment under its replica's lock at a time (16 MB at 128-d)
CHUNK_ROWS = 32768


class CacheLoad:
    """The cache of one query node, in folder `root`."""

    def __init__(self, root: Path) -> None:
        self.files = SegmentCache(root)
        self.writer = CacheWriter(self.files)

    def watch(self, replicas: Callable[[], Iterable[Replica]]) -> None:
        """Grows the entries of the growing segments of `replicas()` on the writer's thread
        (every GROW_EVERY_S) from now on."""
        self.writer.idle = lambda: self._grow(list(replicas()))
        self.writer.start()

    def _grow(self, replicas: list[Replica]) -> None:
        for replica in replicas:
            with replica.lock:
                found = [
                    (col, pid, sid, seg)
                    for col in replica.vectors.values()
                    for (pid, sid), seg in list(col.segments.items())
                    if isinstance(seg, Segment) and _plain(seg) and len(seg) >= GROW_MIN_ROWS
                ]
            for col, pid, sid, seg in found:
                key = (replica.collection_id, sid, col.field_id)
                self.writer.grow(key, _Rows(col, pid, sid, seg), replica.lock)

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
                    if isinstance(seg, Segment) and not seg.mapped and len(seg) == rows:
                        writes.append((replica, col, pid, sid, seg, rows))
        self.files.retain(keep)
        for replica, col, pid, sid, seg, rows in writes:
            key: Key = (replica.collection_id, sid, col.field_id)
            self.writer.write(key, _Rows(col, pid, sid, seg), replica.lock, rows)

    def flushed(self, replica: Replica, pid: int, sid: int, rows: int) -> bool:
        """Writes the entry of a segment the live node holds once it is Flushed with `rows`
        rows (so the first restart after it maps it too); returns False while the node has
        not applied all of them yet (call again), True once written or not to be."""
        segs = [(col, col.segments.get((pid, sid))) for col in replica.vectors.values()]
        if any(seg is None or len(seg) < rows for _, seg in segs):
            gone = replica.dropped_ts is not None or pid in replica.dropped_partitions
            return all(seg is None for _, seg in segs) and gone
        for col, seg in segs:
            if isinstance(seg, Segment):  # a sparse field's is never cached
                key: Key = (replica.collection_id, sid, col.field_id)
                self.writer.write_now(key, _Rows(col, pid, sid, seg), replica.lock, rows)
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
            if isinstance(seg, Segment):  # a sparse field's is never cached
                key: Key = (replica.collection_id, sid, col.field_id)
                self.writer.write_now(key, _Rows(col, pid, sid, seg), replica.lock, len(seg))


def _plain(seg: Segment) -> bool:
    """Returns whether a segment serves its own flat storage (no index, not a mapped entry):
    the only storage an entry is written from."""
    return seg.index is None and not seg.mapped and seg.flat is not None


class _Rows:
    """A segment's rows for its entry (cachewriter.SegmentRows): valid while the segment is
    the one its column holds for (pid, sid), in the same layout, served from its flat copy."""

    def __init__(self, col: VectorColumn, pid: int, sid: int, seg: Segment) -> None:
        self.col, self.pid, self.sid, self.seg = col, pid, sid, seg
        self.token = (seg.serial, seg.layout)
        self.dim, self.metric = seg.dim, seg.native

    def read(self, start: int, upto: int | None) -> Chunk | None:
        """Returns copies of rows [start, start + CHUNK_ROWS) (before `upto`), or None if
        the segment changed. Call with the replica's lock."""
        seg = self.seg
        if self.col.segments.get((self.pid, self.sid)) is not seg or not _plain(seg):
            return None
        if (seg.serial, seg.layout) != self.token or seg.flat is None:
            return None
        held = min(len(seg), seg.flat.ntotal)
        end = min(held, start + CHUNK_ROWS, held if upto is None else upto)
        if end < start:
            return None
        stored = seg.stored()
        assert stored is not None
        raw = None if seg.raw is None else seg.raw.view()[start:end].copy()
        ids, norms = seg.row_ids.view()[start:end].copy(), seg.norms.view()[start:end].copy()
        return ids, norms, stored[start:end].copy(), raw
