"""One segment's vectors on a query node: exact storage while growing (a faiss flat index:
the one copy), then its loaded faiss index, with the alive bitmap of its positions.

Storage follows the collection's metric (the vector field's metric_type, else L2): COSINE
searches L2-normalized vectors with a float32 norm per row and also keeps the vectors as
inserted (`raw`, the output vectors: normalized x norm differs from the input in the last
bit of some values, Milvus returns the inserted ones bit for bit); L2 and IP keep the
vectors as inserted (output exact, the one copy) plus their norms. The flat index answers
its own metric with faiss directly; any other metric (an index created with another metric
than the field's) is answered exactly with numpy from the same copy (`exact.scores`).

A position is a row's place in the segment: append order while growing, the index's order
once an index is loaded (`rows[p]` is the replica row there, -1 for an index position the
replica does not hold). With an index that reconstructs exactly (FLAT, HNSW, IVF_FLAT) the
flat copy is freed (COSINE's `raw` is kept, in index order: still the map of the segment's
cache entry, mmapcache.py, if that is the order it has); with IVF_SQ8 / IVF_PQ it is kept,
for output vectors, for the exact search of selective filters, and to fall back to exact
search losslessly when unloaded.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import faiss
import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.querynode.bitmap import AliveBitmap, packed_selector
from vectorlog.processors.querynode.exact import (
    FEW_QUERIES,
    exact_search,
    few_queries,
    normalized,
    one_query,
    one_thread,
    row_norms,
)
from vectorlog.processors.querynode.filtercache import Selection
from vectorlog.processors.querynode.filterplan import (
    COMPRESSED_ROW_COST,
    boost,
    exact_cheaper,
    gather_cheaper,
    rerank_depth,
)
from vectorlog.processors.querynode.growarray import GrowArray, GrowRows
from vectorlog.processors.querynode.mmapcache import CachedVectors, CacheMismatch
from vectorlog.processors.querynode.querygroups import GROUPED_FROM, grouped, pivots
from vectorlog.processors.querynode.sealed import SearchKnobs, SegmentIndex, faiss_params

#: the positions a selection of a segment covers: a mask, a cached selection, None (alive)
Selected = np.ndarray | Selection | None
_serials = itertools.count()

Result = tuple[np.ndarray, np.ndarray]  # (distances, positions), queries x want


class Segment:
    """The vectors and alive bits of one segment of one partition."""

    def __init__(
        self, segment_id: int, partition: int, dim: int, ordinal: int = 0, metric: str = "L2"
    ) -> None:
        self.segment_id, self.partition, self.dim = segment_id, partition, dim
        self.ordinal = ordinal  # its place in the replica's list of segments
        self.serial = next(_serials)  # unique per Segment object (filter cache keys)
        self.layout = 0  # bumped whenever positions are renumbered (an index load)
        self.native, self.unit = metric, metric == "COSINE"  # flat storage: see module doc
        self.rows = GrowArray(np.int64)  # position -> replica row (-1: not held)
        self.row_ids = GrowArray(np.int64)  # position -> row id
        self.norms = GrowArray(np.float32)
        self.raw = GrowRows(dim) if self.unit else None  # COSINE's vectors as inserted
        self.flat: faiss.IndexFlat | None = self.new_flat()
        self.alive = AliveBitmap()
        self.index: SegmentIndex | None = None
        self._params: dict[tuple[Any, ...], tuple[faiss.SearchParameters, Any]] = {}
        self._pivots: np.ndarray | None = None  # of the loaded index (querygroups.py)
        self.mapped = False  # `flat` maps a cache file (mmapcache.py): copied before an add
        self._cached_ids: np.ndarray | None = None  # row ids of a cache entry still loading

    def __len__(self) -> int:
        return len(self.rows)

    # -- storage -------------------------------------------------------------------------
    def new_flat(self) -> faiss.IndexFlat:
        return faiss.IndexFlatL2(self.dim) if self.native == "L2" else faiss.IndexFlatIP(self.dim)

    def adopt(self, cached: CachedVectors) -> None:
        """Takes an empty segment's storage from its cache entry: rows then come with no
        vectors (`append(..., None, ...)`), each checked to be the entry's next row id, until
        `cached_loaded`."""
        assert not len(self) and self.flat is not None and not self.flat.ntotal
        self.flat, self.norms, self.mapped = cached.flat, _grown(cached.norms), True
        if self.unit:
            self.raw = GrowRows(self.dim, start=cached.raw)  # mapped, copied at an append
        self._cached_ids = cached.row_ids

    def cached_loaded(self) -> None:
        """Ends loading from a cache entry. Raises CacheMismatch unless every row of the
        entry was appended."""
        ids, self._cached_ids = self._cached_ids, None
        if ids is not None and len(ids) != len(self):
            raise CacheMismatch(
                f"segment {self.segment_id}: {len(self)} rows loaded, its cache has {len(ids)}"
            )

    def append(
        self,
        rows: np.ndarray,
        row_ids: np.ndarray,
        vectors: np.ndarray | None,
        alive: np.ndarray,
    ) -> int:
        """Adds rows (replica rows, their row ids, raw vectors, alive flags); returns the
        position of the first. A loaded segment (rows after its index: unexpected) is
        unloaded first, back to exact search. `vectors` None: the rows' vectors are the next
        ones of the adopted cache entry. Raises CacheMismatch if they are not (or if rows
        with vectors come while an entry is loading)."""
        if vectors is None or self._cached_ids is not None:
            return self._append_cached(rows, row_ids, vectors, alive)
        if self.index is not None:
            self.unload()
        if self.mapped:
            self._own()
        if self.raw is not None:
            stored, norms = normalized(vectors)
            self.raw.extend(vectors)
        else:
            stored = np.ascontiguousarray(vectors, dtype=np.float32)
            norms = row_norms(stored)
        first = len(self)
        assert self.flat is not None
        self.flat.add(stored)
        self.norms.extend(norms)
        self.row_ids.extend(row_ids)
        self.alive.append(alive)
        self.rows.extend(rows)  # last: len(self) counts it
        return first

    def append_bare(
        self, rows: np.ndarray, row_ids: np.ndarray, norms: np.ndarray, alive: np.ndarray
    ) -> int:
        """Adds rows without their vectors (a handoff's switch, handoff.py); returns the
        position of the first. The segment then has no storage until `load` serves it from an
        index that reconstructs exactly, under the same hold of the replica's lock (nothing
        reads it in between). Only for a segment that had no row, storing the vectors as
        inserted (not COSINE's normalized copy), not mapping a cache entry."""
        assert self.raw is None and self.index is None and not self.mapped
        assert self.flat is None or not len(self)
        self.flat, first = None, len(self)
        self.norms.extend(norms)
        self.row_ids.extend(row_ids)
        self.alive.append(alive)
        self.rows.extend(rows)  # last: len(self) counts it
        return first

    def _append_cached(
        self, rows: np.ndarray, row_ids: np.ndarray, vectors: np.ndarray | None, alive: np.ndarray
    ) -> int:
        ids, first = self._cached_ids, len(self)
        if vectors is not None or ids is None:
            raise CacheMismatch(f"segment {self.segment_id}: rows with and without cached vectors")
        end = first + len(rows)
        if end > len(ids) or not np.array_equal(ids[first:end], row_ids):
            raise CacheMismatch(f"segment {self.segment_id}: row ids differ from its cache's")
        self.row_ids.extend(row_ids)
        self.alive.append(alive)
        self.rows.extend(rows)
        return first

    def _own(self) -> None:
        """Replaces a mapped flat copy by one of its own (faiss cannot add to a mapped one)."""
        flat = self.new_flat()
        stored = self.stored()
        if stored is not None and len(stored):
            flat.add(np.ascontiguousarray(stored))
        self.flat, self.mapped = flat, False

    def stored(self) -> np.ndarray | None:
        """Returns the flat copy's vectors (a view, not a copy), or None."""
        if self.flat is None:
            return None
        n = self.flat.ntotal
        return faiss.rev_swig_ptr(self.flat.get_xb(), n * self.dim).reshape(n, self.dim)

    def stored_at(self, positions: np.ndarray) -> np.ndarray:
        """Returns the vectors at `positions` in the storage's form (normalized if `unit`)."""
        stored = self.stored()
        if stored is not None:
            return stored[positions]
        vectors = self._reconstructed(positions)
        assert self.index is not None
        index_unit = self.index.metric == "COSINE"
        if index_unit == self.unit:
            return vectors
        norms = self.norms.view()[positions][:, None]
        return vectors / np.where(norms > 0, norms, np.float32(1)) if self.unit else vectors * norms

    def originals(self, positions: np.ndarray) -> np.ndarray:
        """Returns the float32 vectors as inserted at `positions` (a copy)."""
        if self.raw is not None:
            return self.raw.view()[positions]
        stored = self.stored()
        if stored is not None:
            unit, vectors = self.unit, stored[positions]
        else:
            assert self.index is not None
            unit, vectors = self.index.metric == "COSINE", self._reconstructed(positions)
        return vectors * self.norms.view()[positions][:, None] if unit else vectors

    def _reconstructed(self, positions: np.ndarray) -> np.ndarray:
        assert self.index is not None
        pos = np.asarray(positions, dtype=np.int64)
        if not len(pos):
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.index.index.reconstruct_batch(pos), dtype=np.float32)

    # -- loading -------------------------------------------------------------------------
    def load(self, index: SegmentIndex, current: np.ndarray) -> np.ndarray:
        """Serves the segment from `index` from now on; `current[i]` is the position now of
        the row at index position i (-1: not held). Returns the replica rows in index order
        (-1 where not held). Positions become the index's; the flat copy is freed if the
        index reconstructs exactly."""
        held = current >= 0
        src = np.where(held, current, 0)
        rows = np.where(held, self.rows.view()[src], -1)
        flat = None
        if not index.exact:
            kept = self.stored_at(src)
            kept[~held] = 0
            flat = self.new_flat()
            flat.add(np.ascontiguousarray(kept))
        alive = self.alive.alive(src) & held
        norms = np.where(held, self.norms.view()[src], np.float32(1))
        self.rows, self.row_ids, self.norms = _grown(rows), _grown(index.row_ids), _grown(norms)
        if self.raw is not None:
            self.raw = _in_order(self.raw, src, held)
        self.alive = AliveBitmap(len(rows))
        self.alive.append(alive)
        self.flat, self.index, self._params, self.mapped = flat, index, {}, False
        self._pivots = None
        self.layout += 1
        return rows

    def unload(self) -> None:
        """Goes back to exact search (positions unchanged): the flat copy is rebuilt from
        the index's reconstruction unless it was kept."""
        if self.index is None:
            return
        if self.flat is None:
            flat = self.new_flat()
            flat.add(np.ascontiguousarray(self.stored_at(np.arange(len(self)))))
            self.flat = flat
        self.index, self._params, self._pivots = None, {}, None

    # -- search --------------------------------------------------------------------------
    def search(
        self,
        q: np.ndarray,
        qn: np.ndarray,
        metric: str,
        want: int,
        knobs: SearchKnobs,
        mask: Selected,
    ) -> Result | None:
        """Returns the top `want` positions per query among the alive rows (`mask` None:
        the fast path), the rows set in `mask`, or a cached filter selection's, empty slots
        -1 (their distances are whatever faiss put there); None if no row is selected.
        Raises InvalidArgument if the loaded index has another metric."""
        n = len(self)
        if mask is None:
            selected = n - self.alive.dead
        elif isinstance(mask, Selection):
            selected = mask.count
        else:
            selected = int(np.count_nonzero(mask))
        if not selected:
            return None
        if self.index is not None and self.index.metric != metric:
            raise InvalidArgument(
                f"search metric {metric!r} does not match the {self.index.metric!r} index "
                f"of segment {self.segment_id}"
            )
        if isinstance(mask, Selection):
            found = self._selection_search(q, qn, metric, want, knobs, mask)
            if found is not None:
                return found
            mask = mask.mask()
        if self.index is None:
            return self._flat_search(q, qn, metric, want, selected < n, mask)
        if selected < n and gather_cheaper(selected, n):
            return self._exact_selected(q, qn, metric, want, mask)
        return self._ann(q, qn, want, knobs, mask, selected / n)

    def _selection_search(
        self,
        q: np.ndarray,
        qn: np.ndarray,
        metric: str,
        want: int,
        knobs: SearchKnobs,
        sel: Selection,
    ) -> Result | None:
        """Searches a cached filter selection: a growing segment's flat copy with its bitmap
        (one query: None, the caller scans the copy with its mask); an indexed segment by
        its compressed copy with an exact rerank (one query, once built) or exactly over the
        gathered vectors when filterplan.exact_cheaper says so, else the
        index with the bitmap at an ef raised by filterplan.boost; None if none applies
        (too large to gather)."""
        if self.index is None and metric == self.native:
            if len(q) == 1:
                return None  # its mask over the flat copy (_flat_search)
            params = sel.params.get("flat")
            if params is None:
                params = sel.params["flat"] = faiss.SearchParameters()
                params.sel = sel.selector()
            return _search(self.flat, qn if self.unit else q, want, params)
        n = len(self)
        if self.index is not None and len(q) == 1 and metric == self.native:
            comp = sel.compressed_copy(self, metric == "L2")
            cost = COMPRESSED_ROW_COST
            if comp is not None and exact_cheaper(
                sel.count, n, want, self.index, knobs, self.dim, cost
            ):
                return self._compressed_search(comp, qn if self.unit else q, metric, want, sel)
        if self.index is None or exact_cheaper(sel.count, n, want, self.index, knobs, self.dim):
            v = sel.gathered(self)
            if v is not None:
                return self._gathered_search(v, q, qn, metric, want, sel)
        if self.index is None:
            return None
        raise_by = boost(sel.count / max(n, 1))
        key = (knobs, raise_by)
        params = sel.params.get(key)
        if params is None:
            params = sel.params[key] = faiss_params(self.index, knobs, sel.selector(), raise_by)
        x = qn if self.index.metric == "COSINE" else q
        return _search(self.index.index, x, want, params)

    def _gathered_search(
        self, v: np.ndarray, q: np.ndarray, qn: np.ndarray, metric: str, want: int, sel: Selection
    ) -> Result:
        """Returns the exact top `want` of the selection's gathered vectors `v` (as positions):
        one query of the storage's own metric with faiss's single-threaded kernels (its
        multi-threaded flat search costs 20x more for one query on a busy machine), else
        with numpy."""
        if len(q) == 1 and metric == self.native:
            dist, cols = one_query(qn if self.unit else q, v, metric == "L2", want, metric)
        else:
            norms = self.norms.view()[sel.positions]
            dist, cols = exact_search(q, qn, v, norms, metric, want, unit=self.unit)
        return dist, np.where(cols >= 0, sel.positions[np.maximum(cols, 0)], -1)

    def _compressed_search(
        self, comp: faiss.Index, x: np.ndarray, metric: str, want: int, sel: Selection
    ) -> Result:
        """Returns the exact top `want` (as positions) among the candidates the selection's
        compressed copy finds for the one query `x` (storage form), reranked exactly on the
        stored vectors (filterplan.rerank_depth of them)."""
        with one_thread():
            _, cand = comp.search(x, rerank_depth(sel.count, want))
        cand = cand[0][cand[0] >= 0]
        v = sel.vectors[cand] if sel.vectors is not None else self.stored_at(sel.positions[cand])
        dist, cols = one_query(x, np.ascontiguousarray(v), metric == "L2", want, metric)
        return dist, np.where(cols >= 0, sel.positions[cand[np.maximum(cols, 0)]], -1)

    def _selection(self, mask: np.ndarray | None) -> np.ndarray:
        return self.alive.mask() if mask is None else mask

    def _flat_search(
        self,
        q: np.ndarray,
        qn: np.ndarray,
        metric: str,
        want: int,
        some: bool,
        mask: np.ndarray | None,
    ) -> Result:
        stored = self.stored()
        assert self.flat is not None and stored is not None
        if metric != self.native:
            sel = self._selection(mask) if some else None
            return exact_search(q, qn, stored, self.norms.view(), metric, want, sel, self.unit)
        x = qn if self.unit else q
        if len(q) <= FEW_QUERIES:  # faiss's flat search makes one pass a query
            sel = self._selection(mask) if some else None
            search = one_query if len(q) == 1 else few_queries
            return search(x, stored, metric == "L2", want, metric, sel)
        if not some:
            return _search(self.flat, x, want, None)
        if mask is None:
            params = faiss.SearchParameters()
            params.sel = self.alive.selector()
            return _search(self.flat, x, want, params)
        selector, bits = packed_selector(mask)
        params = faiss.SearchParameters()
        params.sel = selector
        out = _search(self.flat, x, want, params)
        del bits
        return out

    def _exact_selected(
        self, q: np.ndarray, qn: np.ndarray, metric: str, want: int, mask: np.ndarray | None
    ) -> Result:
        positions = np.flatnonzero(self._selection(mask))
        v, norms = self.stored_at(positions), self.norms.view()[positions]
        dist, cols = exact_search(q, qn, v, norms, metric, want, unit=self.unit)
        return dist, np.where(cols >= 0, positions[np.maximum(cols, 0)], -1)

    def _ann(
        self,
        q: np.ndarray,
        qn: np.ndarray,
        want: int,
        knobs: SearchKnobs,
        mask: np.ndarray | None,
        frac: float,
    ) -> Result:
        assert self.index is not None
        x = qn if self.index.metric == "COSINE" else q
        if mask is None:  # the fast path: cached parameters over the bitmap itself
            sel = self.alive.selector() if self.alive.dead else None
            raise_by = boost(frac)
            key = (knobs.ef, knobs.nprobe, id(sel), raise_by)  # ints: no dataclass hash
            cached = self._params.get(key)
            if cached is None:
                cached = self._params[key] = (faiss_params(self.index, knobs, sel, raise_by), sel)
            return self._index_search(x, want, cached[0])
        sel, bits = packed_selector(mask)
        params = faiss_params(self.index, knobs, sel, boost(frac))
        out = self._index_search(x, want, params)
        del bits
        return out

    def _index_search(self, x: np.ndarray, want: int, params: Any) -> Result:
        """Returns `_search` of the loaded index; a large batch on an HNSW index searched
        with similar queries together (querygroups.py: the same answers)."""
        index = self.index
        assert index is not None
        if len(x) < GROUPED_FROM or not index.hnsw:
            return _search(index.index, x, want, params)
        if self._pivots is None:
            self._pivots = pivots(index.index, index.index.ntotal)
        return grouped(lambda y: _search(index.index, y, want, params), x, self._pivots)


#: faiss.swig_ptr's C function itself (its Python wrapper costs a call per array)
_ptr: Any = faiss.swigfaiss._swigfaiss.swig_ptr  # type: ignore[attr-defined]
_F32 = np.dtype(np.float32)  # native float32 (another byte order goes through the wrapper)


def _search(index: Any, x: np.ndarray, want: int, params: Any) -> Result:
    """Returns faiss's (distances, labels) of `index` (with search `params`, if any):
    float32 C-contiguous rows of the index's dimension go straight to its C++ search
    (`search_c`, as faiss's Python wrapper calls it, without the wrapper's checks and
    conversions: a few µs of each one-query search), anything else through the wrapper."""
    search_c = getattr(index, "search_c", None)
    if (
        search_c is None
        or want <= 0
        or x.dtype is not _F32
        or x.ndim != 2
        or not x.flags.c_contiguous
        or x.shape[1] != index.d
    ):
        dist, labels = index.search(x, want, params=params)
        return dist, labels
    n = len(x)
    dist, labels = np.empty((n, want), np.float32), np.empty((n, want), np.int64)
    search_c(n, _ptr(x), want, _ptr(dist), _ptr(labels), params)
    return dist, labels


def _in_order(raw: GrowRows, src: np.ndarray, held: np.ndarray) -> GrowRows:
    """Returns the raw vectors at positions `src` (zero where not `held`): `raw` itself if
    that is all of them in order (a cache entry's map then stays a map, not a copy)."""
    if len(src) == len(raw) and held.all() and np.array_equal(src, np.arange(len(src))):
        return raw
    out = raw.view()[src]
    out[~held] = 0
    return GrowRows(raw.view().shape[1], start=out)


def _grown(values: np.ndarray) -> GrowArray:
    out = GrowArray(values.dtype, max(1, len(values)))
    out.extend(values)
    return out


class DeferredAppends:
    """Segment appends held back while a replica is restored, then run on one thread per
    segment (faiss copies vectors with the GIL released, so segments fill in parallel while
    nothing reads them yet). Positions are handed out at once, as the appends would."""

    def __init__(self) -> None:
        self._work: dict[Segment, list[tuple[Any, ...]]] = {}
        self._held: dict[Segment, int] = {}

    def append(
        self,
        seg: Segment,
        rows: np.ndarray,
        row_ids: np.ndarray,
        vectors: np.ndarray | None,
        alive: np.ndarray,
    ) -> int:
        """Queues `Segment.append(rows, row_ids, vectors, alive)`; returns the position its
        first row will have."""
        first = len(seg) + self._held.get(seg, 0)
        self._work.setdefault(seg, []).append((rows, row_ids, vectors, alive))
        self._held[seg] = self._held.get(seg, 0) + len(rows)
        return first

    def run(self, threads: int) -> None:
        """Runs every queued append, in order per segment. Raises what an append raises."""
        with ThreadPoolExecutor(max(1, threads), thread_name_prefix="segment-fill") as pool:
            for done in [pool.submit(self._fill, seg, work) for seg, work in self._work.items()]:
                done.result()
        self._work.clear()
        self._held.clear()

    @staticmethod
    def _fill(seg: Segment, work: list[tuple[Any, ...]]) -> None:
        for rows, row_ids, vectors, alive in work:
            seg.append(rows, row_ids, vectors, alive)
