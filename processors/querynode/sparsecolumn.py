"""One SPARSE_FLOAT_VECTOR field of a replica: its segments, each holding its rows in Milvus's
row format (vectorlog/core/sparse.py), searched by inner product: exactly over a CSR matrix of
the rows while growing, over the segment's loaded inverted index (SPARSE_INVERTED_INDEX,
SPARSE_WAND: vectorlog/storage/sparse_index.py) once one is built.

`SparseColumn` answers what `VectorColumn` answers for the replica (add, kill, rehome,
values, planned, knn, load_index, serving, unload_indexes), so the replica holds either
kind per vector field. Range search, grouping and the segment cache are dense-only and
refused here with a clear error.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import FieldSchema
from vectorlog.core.sparse import SPARSE_DEFAULT_METRIC, SPARSE_METRICS, as_dict
from vectorlog.processors.indexnode.service import verify_build
from vectorlog.processors.querynode.bitmap import AliveBitmap
from vectorlog.processors.querynode.growarray import GrowArray
from vectorlog.processors.querynode.topk import merged
from vectorlog.processors.querynode.vectorcolumn import (
    load_segment_index,
    serving_index,
    unload_segment_indexes,
)
from vectorlog.storage import sparse_index as inverted

if TYPE_CHECKING:  # annotations only (core.sparse: why scipy.sparse is imported late)
    import scipy.sparse as sp

Result = tuple[np.ndarray, np.ndarray]


@dataclass
class SparseSegmentIndex:
    """A loaded sparse index: its postings' row i is the row with id `row_ids[i]`."""

    index_id: int
    metric: str
    index_type: str
    postings: inverted.Postings
    row_ids: np.ndarray
    exact: bool = True


def read_sparse_index(body: dict[str, Any], files: Any) -> SparseSegmentIndex:
    """Returns the sparse index of a SegmentIndexed `body` read from `files` (checked
    against its checksums). Raises what the store raises, or InvalidArgument if the files
    do not match each other or their checksums."""
    data, ids = files.get(body["index_file"]), files.get(body["row_id_file"])
    verify_build(files, body["index_file"], data, ids)
    post = inverted.deserialize(data)
    row_ids = np.asarray(np.load(io.BytesIO(ids), allow_pickle=False), dtype=np.int64)
    if len(row_ids) != post.rows:
        raise InvalidArgument(
            f"segment {body['segment_id']} sparse index {body['index_file']!r} holds "
            f"{post.rows} rows but its row id file {len(row_ids)} ids"
        )
    return SparseSegmentIndex(
        body["index_id"], body["metric_type"].upper(), body["index_type"], post, row_ids
    )


class SparseSegment:
    """The sparse rows and alive bits of one segment of one partition."""

    def __init__(self, segment_id: int, partition: int, ordinal: int) -> None:
        self.segment_id, self.partition, self.ordinal = segment_id, partition, ordinal
        self.rows = GrowArray(np.int64)  # position -> replica row (-1: not held)
        self.row_ids = GrowArray(np.int64)
        self.data: list[bytes] = []  # position -> its row (Milvus's format)
        self.alive = AliveBitmap()
        self.index: SparseSegmentIndex | None = None
        self.mapped = False  # never served from the dense segment cache
        self._postings: inverted.Postings | None = None  # of `data`, while growing

    def __len__(self) -> int:
        return len(self.rows)

    def append(self, rows: np.ndarray, row_ids: np.ndarray, vectors: Any, alive: np.ndarray) -> int:
        """Adds rows (replica rows, row ids, their sparse rows, alive flags); returns the
        position of the first. A loaded index is unloaded first (back to exact search)."""
        if vectors is None:
            raise InvalidArgument(f"segment {self.segment_id}: sparse rows have no cache entry")
        self.unload()
        first = len(self)
        self.data.extend(vectors)
        self._postings = None
        self.row_ids.extend(row_ids)
        self.alive.append(alive)
        self.rows.extend(rows)
        self._csr = None
        return first

    def originals(self, positions: np.ndarray) -> list[bytes]:
        """Returns the rows at `positions` as inserted."""
        return [self.data[int(p)] for p in positions]

    def load(self, index: SparseSegmentIndex, current: np.ndarray) -> np.ndarray:
        """Serves the segment from `index`; `current[i]` is the position now of the row at
        index position i (-1: not held). Returns the replica rows in index order."""
        held = current >= 0
        src = np.where(held, current, 0)
        rows = np.where(held, self.rows.view()[src], -1)
        alive = self.alive.alive(src) & held
        self.data = [self.data[int(s)] if h else b"" for s, h in zip(src, held, strict=True)]
        self.rows, self.row_ids = _grown(rows), _grown(np.asarray(index.row_ids, np.int64))
        self.alive = AliveBitmap(len(rows))
        self.alive.append(alive)
        self.index, self._postings = index, None
        return rows

    def unload(self) -> None:
        """Goes back to exact search (positions unchanged)."""
        self.index = None

    def search(
        self,
        q: sp.csr_array,
        metric: str,
        want: int,
        mask: np.ndarray | None,
        stats: inverted.BM25Stats | None = None,
    ) -> Result | None:
        """Returns the top `want` positions per query among the alive rows (`mask` None) or
        those set in `mask`, empty slots -1; None if no row is selected. Metric IP: inner
        products; BM25: BM25 scores by the collection's `stats`."""
        n = len(self)
        ok = self.alive.mask() if mask is None else mask
        if not n or not ok.any():
            return None
        if self.index is not None and self.index.metric != metric:
            raise InvalidArgument(
                f"search metric {metric!r} does not match the {self.index.metric!r} index "
                f"of segment {self.segment_id}"
            )
        post = self.postings()
        if stats is None:
            score, touched = inverted.scores(post, q)
        else:
            score, touched = inverted.bm25_scores(post, q, stats)
        return inverted.top_k(score, touched & ok[None, :], want)

    def postings(self) -> inverted.Postings:
        """Returns the inverted index of the rows by position: the loaded index's, else
        one built from the rows (kept until a row is appended)."""
        if self.index is not None:
            return self.index.postings
        if self._postings is None or self._postings.rows != len(self.data):
            self._postings = inverted.build(self.data)
        return self._postings


class SparseColumn:
    """The segments of one sparse vector field of a replica (see VectorColumn)."""

    segment_type: type[SparseSegment] = SparseSegment

    def __init__(self, field: FieldSchema) -> None:
        self.field, self.name, self.dim = field, field.name, 0
        self.field_id = field.field_id
        self.metric = field.metric_type or SPARSE_DEFAULT_METRIC
        self.segments: dict[tuple[int, int], SparseSegment] = {}
        self.segs: list[SparseSegment] = []
        self.seg = GrowArray(np.int32)
        self.pos = GrowArray(np.int64)
        self.cached: dict[tuple[int, int], Any] = {}  # no cache entries for sparse fields

    def reserve(self, rows: int) -> None:
        self.seg.reserve(rows)
        self.pos.reserve(rows)

    def segment(self, partition: int, seg_id: int) -> SparseSegment:
        """Returns a segment, created empty if new."""
        seg = self.segments.get((partition, seg_id))
        if seg is None:
            seg = self.segment_type(seg_id, partition, len(self.segs))
            self.segments[partition, seg_id] = seg
            self.segs.append(seg)
        return seg

    def add(
        self,
        rows: np.ndarray,
        partition: int,
        seg_id: int,
        ids: np.ndarray,
        vectors: Any,
        flags: np.ndarray,
        later: Any = None,
    ) -> None:
        """Adds replica `rows` to their segment (at once: sparse appends are not deferred)."""
        seg = self.segment(partition, seg_id)
        first = seg.append(rows, ids, vectors, flags)
        self.seg.extend(np.full(len(rows), seg.ordinal, dtype=np.int32))
        self.pos.extend(np.arange(first, first + len(rows), dtype=np.int64))

    def kill(self, rows: np.ndarray) -> None:
        segs, pos = self.seg.view()[rows], self.pos.view()[rows]
        for ordinal in np.unique(segs).tolist():
            self.segs[ordinal].alive.clear(pos[segs == ordinal])

    def rehome(self, partition: int, olds: list[int], new_id: int, row_ids: np.ndarray) -> int:
        """Moves the rows of segments `olds` whose row ids are in `row_ids` into segment
        `new_id`; the others stay in a smaller copy. Returns the rows moved."""
        moved = 0
        for sid in olds:
            seg = self.segments.get((partition, sid))
            if seg is None or not len(seg):
                continue
            held = seg.rows.view()
            going = np.isin(seg.row_ids.view(), row_ids) & (held >= 0)
            if going.any():
                rest = self.segment_type(sid, partition, seg.ordinal)
                self._move(seg, np.flatnonzero(going), self.segment(partition, new_id))
                self._move(seg, np.flatnonzero(~going & (held >= 0)), rest)
                self.segments[partition, sid] = self.segs[seg.ordinal] = rest
                moved += int(np.count_nonzero(going))
        return moved

    def _move(self, seg: SparseSegment, pos: np.ndarray, to: SparseSegment) -> None:
        if not len(pos):
            return
        rows = seg.rows.view()[pos]
        first = to.append(rows, seg.row_ids.view()[pos], seg.originals(pos), seg.alive.alive(pos))
        self.seg.view()[rows] = to.ordinal
        self.pos.view()[rows] = np.arange(first, first + len(pos), dtype=np.int64)

    def values(self, rows: np.ndarray) -> list[dict[int, float]]:
        """Returns the sparse vectors of replica `rows` as {index: value} (Milvus's output)."""
        segs, pos = self.seg.view()[rows], self.pos.view()[rows]
        return [
            as_dict(self.segs[s].data[p]) for s, p in zip(segs.tolist(), pos.tolist(), strict=True)
        ]

    def cached_loaded(self) -> list[Any]:
        self.cached.clear()
        return []

    def planned(self, partitions: list[int] | None, metric: str) -> list[SparseSegment]:
        """Returns the segments of `partitions` (None: all). Raises InvalidArgument for a
        metric a sparse field is not searched with (a loaded index's other metric is
        refused by the segment's search)."""
        if metric not in SPARSE_METRICS:
            raise InvalidArgument(
                f"sparse vector field {self.name!r} is searched with {list(SPARSE_METRICS)}, "
                f"not {metric} (metric type not match)"
            )
        return [s for s in self.segs if partitions is None or s.partition in partitions]

    def knn(
        self,
        q: sp.csr_array,
        metric: str,
        want: int,
        plan: list[tuple[SparseSegment, Any]],
        stats: inverted.BM25Stats | None = None,
    ) -> Result:
        """Returns (scores, replica rows) of the top `want` per query over the plan's
        segments, merged; empty slots -1 (BM25: scored with `stats`)."""
        parts = []
        for seg, mask in plan:
            found = seg.search(q, metric, want, mask, stats)
            if found is None:
                continue
            dist, pos = found
            empty = pos < 0
            rows = seg.rows.view()[np.where(empty, 0, pos)]
            parts.append((dist, np.where(empty, -1, rows)))
        return merged(parts, q.shape[0], want, True)

    def bm25_stats(
        self, plan: list[tuple[SparseSegment, Any]], terms: np.ndarray, k1: float, b: float
    ) -> inverted.BM25Stats:
        """Returns the BM25 statistics of the rows `plan` selects (every visible row: the
        collection's documents): their number, average length and each of `terms`' document
        frequency. Derived from the rows themselves, they follow inserts, deletes,
        compactions and restarts."""
        docs, total = 0, 0.0
        df = np.zeros(len(terms), dtype=np.int64)
        for seg, mask in plan:
            ok = seg.alive.mask() if mask is None else mask
            if not len(seg) or not ok.any():
                continue
            post = seg.postings()
            docs += int(np.count_nonzero(ok))
            total += float(post.lengths[ok].sum())
            sub = post.columns(terms)
            for j in range(len(terms)):
                a, z = sub.indptr[j], sub.indptr[j + 1]
                df[j] += int(np.count_nonzero(ok[sub.indices[a:z]]))
        avgdl = total / docs if docs else 1.0
        return inverted.BM25Stats(
            docs, avgdl, dict(zip(terms.tolist(), df.tolist(), strict=True)), k1, b
        )

    def check_dim(self, segment_id: int, index: Any) -> None:
        """Raises InvalidArgument if `index` is not a sparse index."""
        if not isinstance(index, SparseSegmentIndex):
            raise InvalidArgument(
                f"index {index.index_id} of segment {segment_id} is no sparse index of "
                f"field {self.name!r}"
            )

    def load_index(self, partition: int, segment_id: int, index: SparseSegmentIndex) -> bool:
        """Serves a segment from `index` (see VectorColumn.load_index)."""
        return load_segment_index(self, partition, segment_id, index)

    def serving(self, partition: int, segment_id: int) -> int | None:
        return serving_index(self, partition, segment_id)

    def unload_indexes(self, index_id: int) -> None:
        unload_segment_indexes(self, index_id)


def _grown(values: np.ndarray) -> GrowArray:
    out = GrowArray(values.dtype, max(1, len(values)))
    out.extend(values)
    return out
