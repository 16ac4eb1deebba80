"""Filter results of a replica's segments, evaluated on the scalar columns once per segment and
kept by (expression, segment version) in a bounded LRU cache.

A row never changes once written (an upsert writes a new row), so whether a position of a
segment matches an expression changes only when the positions change: a growing segment's new
rows are evaluated alone and appended; an index load (positions become the index's) starts
over. Alive bits change with deletes: the selection (matching and alive) is recomputed from the
matching positions when the segment's dead count changed. A selection keeps, built when first
asked, its packed bits (a faiss IDSelectorBitmap) and its vectors gathered into a flat index
(the exact search of a selective filter); the cache counts their bytes against its bound.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np

from vectorlog.processors.querynode.bitmap import packed_selector

if TYPE_CHECKING:
    from vectorlog.processors.querynode.segment import Segment

#: the cache's bound per replica (positions, bits and gathered vectors); a selection whose
#: gathered vectors would take more than a quarter of it is searched without them
CACHE_BYTES = 256 << 20
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
        self.params: dict[Any, Any] = {}  # faiss search parameters by knobs, built once

    @property
    def nbytes(self) -> int:
        """Returns the bytes held (positions, bits, gathered vectors)."""
        bits = 0 if self._selector is None else self._selector[1].nbytes
        vectors = 0 if self.vectors is None else self.vectors.nbytes
        return self.positions.nbytes + bits + vectors

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
            for ck, entry in self._entries.items():
                if entry.selection is sel:
                    self.account(ck, entry)
                    break
        return sel.vectors

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


def _alive(seg: Segment, positions: np.ndarray) -> np.ndarray:
    """Returns the alive ones of `positions`."""
    return positions[seg.alive.alive(positions)] if len(positions) else positions
