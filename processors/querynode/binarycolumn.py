"""One BINARY_VECTOR field of a replica (issue 27): each row dim / 8 packed bytes, searched
with HAMMING (differing bits) or JACCARD (1 - |a and b| / |a or b|), smaller nearer, as Milvus.

Segments are kept like a sparse field's (`SparseColumn`'s bookkeeping: rows, alive bits,
compaction moves, index loads), each row its bytes. A search is exact (a popcount table over
the XOR / AND / OR of the packed bytes) unless the segment serves a BIN_IVF_FLAT index with
HAMMING, searched by faiss's IndexBinaryIVF (nprobe) and kept to the selected rows.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import FieldSchema
from vectorlog.processors.indexnode.service import verify_build
from vectorlog.processors.querynode.sparsecolumn import SparseColumn, SparseSegment
from vectorlog.processors.querynode.topk import merged

BINARY_METRICS = ("HAMMING", "JACCARD")
POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1)
Result = tuple[np.ndarray, np.ndarray]


@dataclass
class BinarySegmentIndex:
    """A loaded binary index (faiss IndexBinaryFlat / IndexBinaryIVF): position i holds
    the row with id `row_ids[i]`."""

    index_id: int
    metric: str
    index_type: str
    index: Any
    row_ids: np.ndarray
    exact: bool = True


def read_binary_index(body: dict[str, Any], files: Any) -> BinarySegmentIndex:
    """Returns the binary index of a SegmentIndexed `body` (checked against its checksums).
    Raises what the store raises, or InvalidArgument for files that do not match."""
    data, ids = files.get(body["index_file"]), files.get(body["row_id_file"])
    verify_build(files, body["index_file"], data, ids)
    index = faiss.deserialize_index_binary(np.frombuffer(data, dtype=np.uint8))
    row_ids = np.asarray(np.load(io.BytesIO(ids), allow_pickle=False), dtype=np.int64)
    if len(row_ids) != index.ntotal:
        raise InvalidArgument(
            f"segment {body['segment_id']} binary index holds {index.ntotal} vectors but its "
            f"row id file {len(row_ids)} ids"
        )
    return BinarySegmentIndex(
        body["index_id"], body["metric_type"].upper(), body["index_type"], index, row_ids
    )


def distances(q: np.ndarray, x: np.ndarray, metric: str) -> np.ndarray:
    """Returns (nq, n) HAMMING or JACCARD distances of packed queries `q` to rows `x`."""
    if metric == "HAMMING":
        return POPCOUNT[q[:, None, :] ^ x[None, :, :]].sum(axis=2).astype(np.float32)
    both = POPCOUNT[q[:, None, :] & x[None, :, :]].sum(axis=2).astype(np.float32)
    either = POPCOUNT[q[:, None, :] | x[None, :, :]].sum(axis=2).astype(np.float32)
    return np.where(either > 0, 1.0 - both / np.maximum(either, 1), 0.0).astype(np.float32)


def smallest(dist: np.ndarray, ok: np.ndarray, want: int) -> Result:
    """Returns (distances, positions), (nq, want), the smallest among `ok` (ties: lower
    position first), empty slots -1 with distance +inf."""
    nq = dist.shape[0]
    out_d = np.full((nq, want), np.inf, dtype=np.float32)
    out_p = np.full((nq, want), -1, dtype=np.int64)
    cand = np.flatnonzero(ok)
    for i in range(nq):
        order = cand[np.lexsort((cand, dist[i, cand]))][:want]
        out_d[i, : len(order)], out_p[i, : len(order)] = dist[i, order], order
    return out_d, out_p


class BinarySegment(SparseSegment):
    """The packed rows and alive bits of one segment of a binary field."""

    def rows_matrix(self) -> np.ndarray:
        """Returns the rows by position as (n, dim / 8) uint8."""
        if not self.data:
            return np.zeros((0, 0), dtype=np.uint8)
        return np.frombuffer(b"".join(self.data), dtype=np.uint8).reshape(len(self.data), -1)

    def search_binary(
        self, q: np.ndarray, metric: str, want: int, mask: np.ndarray | None, nprobe: int
    ) -> Result | None:
        """Returns the `want` nearest positions per query among the selected rows, empty
        slots -1; None if no row is selected."""
        ok = self.alive.mask() if mask is None else mask
        if not len(self) or not ok.any():
            return None
        ix = self.index
        if isinstance(ix, BinarySegmentIndex) and ix.metric != metric:
            raise InvalidArgument(
                f"search metric {metric!r} does not match the {ix.metric!r} index "
                f"of segment {self.segment_id}"
            )
        if isinstance(ix, BinarySegmentIndex) and isinstance(ix.index, faiss.IndexBinaryIVF):
            found = _ivf(ix.index, q, ok, want, nprobe)
            if found is not None:
                return found
        return smallest(distances(q, self.rows_matrix(), metric), ok, want)


def _ivf(index: Any, q: np.ndarray, ok: np.ndarray, want: int, nprobe: int) -> Result | None:
    """Returns faiss's IVF answer kept to the `ok` rows, None if it found fewer than
    `want` of them while more are selected (the caller then searches exactly)."""
    index.nprobe = min(nprobe, index.nlist)
    deep = min(index.ntotal, want + int(np.count_nonzero(~ok)))
    dist, pos = index.search(np.ascontiguousarray(q), deep)
    out_d = np.full((len(q), want), np.inf, dtype=np.float32)
    out_p = np.full((len(q), want), -1, dtype=np.int64)
    for i in range(len(q)):
        keep = (pos[i] >= 0) & ok[np.maximum(pos[i], 0)]
        d, p = dist[i][keep][:want], pos[i][keep][:want]
        if len(p) < min(want, int(np.count_nonzero(ok))):
            return None
        out_d[i, : len(p)], out_p[i, : len(p)] = d, p
    return out_d, out_p


class BinaryColumn(SparseColumn):
    """The segments of one binary vector field of a replica."""

    segment_type = BinarySegment

    def __init__(self, field: FieldSchema) -> None:
        super().__init__(field)
        self.dim = field.dim or 0
        self.metric = field.metric_type or "HAMMING"

    def values(self, rows: np.ndarray) -> list[bytes]:  # type: ignore[override]
        """Returns the vectors of replica `rows` as their bytes (as Milvus returns them)."""
        segs, pos = self.seg.view()[rows], self.pos.view()[rows]
        return [self.segs[s].data[p] for s, p in zip(segs.tolist(), pos.tolist(), strict=True)]

    def planned(self, partitions: list[int] | None, metric: str) -> list[Any]:
        """Returns the segments of `partitions` (None: all). Raises InvalidArgument for a
        metric a binary field is not searched with."""
        if metric not in BINARY_METRICS:
            raise InvalidArgument(
                f"binary vector field {self.name!r} is searched with {list(BINARY_METRICS)}, "
                f"not {metric} (metric type not match)"
            )
        return [s for s in self.segs if partitions is None or s.partition in partitions]

    def knn_binary(
        self, q: np.ndarray, metric: str, want: int, plan: list[tuple[Any, Any]], nprobe: int
    ) -> Result:
        """Returns (distances, replica rows) of the `want` nearest per query, merged."""
        parts = []
        for seg, mask in plan:
            found = seg.search_binary(q, metric, want, mask, nprobe)
            if found is None:
                continue
            dist, pos = found
            empty = pos < 0
            rows = seg.rows.view()[np.where(empty, 0, pos)]
            parts.append((dist, np.where(empty, -1, rows)))
        return merged(parts, len(q), want, False)

    def check_dim(self, segment_id: int, index: Any) -> None:
        """Raises InvalidArgument if `index` is not a binary index of this field's dim."""
        if not isinstance(index, BinarySegmentIndex) or index.index.d != self.dim:
            raise InvalidArgument(
                f"index of segment {segment_id} is no binary index of dim {self.dim} "
                f"(field {self.name!r})"
            )
