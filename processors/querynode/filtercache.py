"""Filter results of a replica's segments, evaluated on the scalar columns once per segment and
kept by (expression, segment version) in a bounded LRU cache.

A row never changes once written (an upsert writes a new row), so whether a position of a
segment matches an expression changes only when the positions change: a growing segment's new
rows are evaluated alone and appended; an index load (positions become the index's) starts
over. Alive bits change with deletes: the selection (matching and alive) is recomputed from the
matching positions when the segment's dead count changed. A selection keeps, built when first
asked, its packed bits (a faiss IDSelectorBitmap), its vectors gathered into a flat index
(the exact search of a selective filter) and, once searched often enough, a compressed copy
(4 bits a dimension, faiss's SIMD fast scan: `compressed`); the cache counts their bytes
against its bound.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np

from vectorlog.processors.querynode.bitmap import packed_selector
from vectorlog.processors.querynode.exact import one_thread

if TYPE_CHECKING:
    from vectorlog.processors.querynode.segment import Segment

#: the cache's bound per replica (positions, bits and gathered vectors); a selection whose
#: gathered vectors would take more than a quarter of it is searched without them
CACHE_BYTES = 256 << 20
#: a selection of at least this many rows, searched one query at a time this many times,
#: gets its compressed copy (building it costs ~5 us a row: 0.2 s for 40k rows, so one-off
#: filters never pay it; scanning it costs a quarter to a ninth of the exact scan)
COMPRESS_ROWS = 16_384
COMPRESS_AFTER = 8
#: evaluates a filter on replica rows: returns their bool mask
Evaluate = Callable[[np.ndarray], np.ndarray]


class Selection:
    """The selected (matching and alive) positions of one segment at one version: sorted
    positions, their count, and lazily their selector bits and gathered vectors."""

    def __init__(self, positions: np.ndarray, n: int, cache: FilterCache) -> None:
        self.positions, self.n, self.count = positions, n, len(positions)
        self.cache = cache
        self._selector: tuple[faiss.IDSelectorBitmap, np.ndarray] | None = None
        self.vectors: np.ndarray | None = None  # gathered, in the segment's storage form
        self.compressed: faiss.Index | None = None  # 4-bit codes of the same rows
        self.searches = 0  # one-query searches before `compressed` was built
        self.params: dict[Any, Any] = {}  # faiss search parameters by knobs, built once

    @property
    def nbytes(self) -> int:
        """Returns the bytes held (positions, bits, gathered vectors)."""
        bits = 0 if self._selector is None else self._selector[1].nbytes
        vectors = 0 if self.vectors is None else self.vectors.nbytes
        codes = 0 if self.compressed is None else _code_bytes(self.compressed)
        return self.positions.nbytes + bits + vectors + codes

    def mask(self) -> np.ndarray:
        """Returns the selection as a bool mask over the segment's positions (a copy)."""
        out = np.zeros(self.n, dtype=bool)
        out[self.positions] = True
        return out

    def selector(self) -> faiss.IDSelectorBitmap:
        """Returns a faiss selector of the selected positions (built once)."""
        if self._selector is None:
            self._selector = packed_selector(self.mask())
        return self._selector[0]

    def gathered(self, seg: Segment) -> np.ndarray | None:
        """Returns the selected vectors of `seg` (see FilterCache.gathered)."""
        return self.cache.gathered(self, seg)

    def compressed_copy(self, seg: Segment, l2: bool) -> faiss.Index | None:
        """Returns the selection's compressed copy (see FilterCache.compressed)."""
        return self.cache.compressed(self, seg, l2)


class _Entry:
    """One expression on one segment: the matching positions below `evaluated`."""

    def __init__(self, layout: int) -> None:
        self.layout, self.evaluated = layout, 0
        self.matched = np.zeros(0, dtype=np.int64)
        self.selection: Selection | None = None
        self.stamp: tuple[int, int] = (-1, -1)  # (length, dead count) of the selection


class FilterCache:
    """Selections by (expression key, segment serial), least recently used evicted first
    once their bytes pass `limit`. Call with the replica's lock held."""

    def __init__(self, limit: int = CACHE_BYTES) -> None:
        self.limit = limit
        self._entries: OrderedDict[tuple[str, int], _Entry] = OrderedDict()
        self._bytes: dict[tuple[str, int], int] = {}

    def selection(self, key: str, seg: Segment, evaluate: Evaluate) -> Selection:
        """Returns the positions of `seg` matching expression `key` (evaluated by `evaluate`
        on replica rows) that are alive now; cached, updated only for what changed."""
        ck = (key, seg.serial)
        entry = self._entries.get(ck)
        if entry is None or entry.layout != seg.layout:
            entry = _Entry(seg.layout)
            self._entries[ck] = entry
        self._entries.move_to_end(ck)
        n = len(seg)
        if entry.evaluated < n:
            entry.matched = np.concatenate(
                [entry.matched, _matching(seg, entry.evaluated, evaluate)]
            )
            entry.evaluated = n
        stamp = (n, seg.alive.dead)
        if entry.selection is None or entry.stamp != stamp:
            alive = entry.matched if not seg.alive.dead else _alive(seg, entry.matched)
            entry.selection, entry.stamp = Selection(alive, n, self), stamp
        self.account(ck, entry)
        return entry.selection

    def gathered(self, sel: Selection, seg: Segment) -> np.ndarray | None:
        """Returns the selected vectors (row i: position `sel.positions[i]`) in the segment's
        storage form, gathered once; None if they would pass a quarter of the bound (the
        caller searches the segment's own index instead)."""
        if sel.vectors is None:
            if sel.count * seg.dim * 4 > self.limit // 4:
                return None
            sel.vectors = np.ascontiguousarray(seg.stored_at(sel.positions), dtype=np.float32)
            self._accounted(sel)
        return sel.vectors

    def compressed(self, sel: Selection, seg: Segment, l2: bool) -> faiss.Index | None:
        """Counts a one-query search of `sel` and returns its compressed copy: a faiss
        IndexPQFastScan with one 4-bit code a dimension (M = dim), squared L2 if `l2` else
        inner product over the storage form, position i: `sel.positions[i]`; built at the
        COMPRESS_AFTER-th search of a selection of at least COMPRESS_ROWS rows, None before
        (or if it would pass a quarter of the bound)."""
        if sel.compressed is not None:
            return sel.compressed
        sel.searches += 1
        if sel.count < COMPRESS_ROWS or sel.searches < COMPRESS_AFTER:
            return None
        if sel.count * (seg.dim + 1) // 2 > self.limit // 4:
            return None
        v = sel.vectors if sel.vectors is not None else seg.stored_at(sel.positions)
        metric = faiss.METRIC_L2 if l2 else faiss.METRIC_INNER_PRODUCT
        index = faiss.IndexPQFastScan(seg.dim, seg.dim, 4, metric)
        index.pq.cp.niter = 10  # 16 levels of one dimension: settled long before 25
        with one_thread():
            index.train(np.ascontiguousarray(v, dtype=np.float32))
            index.add(np.ascontiguousarray(v, dtype=np.float32))
        sel.compressed = index
        self._accounted(sel)
        return index

    def _accounted(self, sel: Selection) -> None:
        for ck, entry in self._entries.items():
            if entry.selection is sel:
                self.account(ck, entry)
                break

    def account(self, ck: tuple[str, int], entry: _Entry) -> None:
        """Records the bytes of entry `ck` and evicts the least recently used entries until
        the cache is within its bound (the newest entry always stays)."""
        sel = entry.selection
        self._bytes[ck] = entry.matched.nbytes + (0 if sel is None else sel.nbytes)
        total = sum(self._bytes.values())
        while total > self.limit and len(self._entries) > 1:
            old, _ = self._entries.popitem(last=False)
            total -= self._bytes.pop(old, 0)

    def clear(self) -> None:
        """Forgets every entry."""
        self._entries.clear()
        self._bytes.clear()


def _matching(seg: Segment, start: int, evaluate: Evaluate) -> np.ndarray:
    """Returns the positions from `start` on of `seg` whose rows match (held rows only)."""
    rows = seg.rows.view()[start:]
    held = np.flatnonzero(rows >= 0)
    if not len(held):
        return np.zeros(0, dtype=np.int64)
    keep = evaluate(rows[held])
    return (held[keep] + start).astype(np.int64)


def _code_bytes(index: faiss.Index) -> int:
    """Returns the bytes of a fast-scan index's codes (blocks of 32 rows, M2 / 2 a row)."""
    blocks = (index.ntotal + index.bbs - 1) // index.bbs  # type: ignore[attr-defined]
    return int(blocks * index.bbs * index.M2 // 2)  # type: ignore[attr-defined]


def _alive(seg: Segment, positions: np.ndarray) -> np.ndarray:
    """Returns the alive ones of `positions`."""
    return positions[seg.alive.alive(positions)] if len(positions) else positions
