"""A sealed segment's faiss index as the query node loads it (a SegmentIndexed event's files),
and the faiss search parameters of a search on it (ef for HNSW, nprobe for IVF)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Protocol

import faiss
import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.indexnode.service import verify_build
from vectorlog.processors.querynode.hugepages import advise_index

DEFAULT_EF = 64  # HNSW efSearch when none is given (raised to the number of hits wanted)
DEFAULT_NPROBE = 8  # IVF lists probed when none is given (Milvus's default)
MAX_EF = 4096
#: index classes whose stored vectors reconstruct exactly: the segment keeps no other copy
EXACT = (faiss.IndexFlat, faiss.IndexHNSWFlat, faiss.IndexIVFFlat)


class IndexFiles(Protocol):
    """Where index files are read from: any object store (`get(path) -> bytes`)."""

    def get(self, path: str) -> bytes: ...


@dataclass
class SegmentIndex:
    """One loaded segment index: `index` position i holds the row with id `row_ids[i]`.
    `exact`: the index reconstructs its vectors exactly (FLAT, HNSW, IVF_FLAT with a direct
    map), so no flat copy of the segment is kept; else (IVF_SQ8, IVF_PQ) the segment keeps
    its exact storage for output vectors, exact fallbacks and unloading."""

    index_id: int
    metric: str
    index_type: str
    index: faiss.Index
    row_ids: np.ndarray
    exact: bool

    @property
    def hnsw(self) -> bool:
        return isinstance(self.index, faiss.IndexHNSW)

    @property
    def ivf(self) -> bool:
        return isinstance(self.index, faiss.IndexIVF)


def read_index(body: dict[str, Any], files: IndexFiles) -> SegmentIndex:
    """Returns the index of a SegmentIndexed `body` read from `files`. Raises whatever the
    store raises for a missing file, or InvalidArgument if the files do not match each other
    or their checksums (the segment is then served from its binlog vectors)."""
    data, ids = files.get(body["index_file"]), files.get(body["row_id_file"])
    verify_build(files, body["index_file"], data, ids)  # before faiss reads a byte of it
    index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))  # its own class
    row_ids = np.load(io.BytesIO(ids), allow_pickle=False)
    row_ids = np.asarray(row_ids, dtype=np.int64)
    if len(row_ids) != index.ntotal:
        raise InvalidArgument(
            f"segment {body['segment_id']} index {body['index_file']!r} holds {index.ntotal} "
            f"vectors but its row id file {len(row_ids)} ids"
        )
    if isinstance(index, faiss.IndexIVF):
        index.make_direct_map()  # reconstruct() by position
    advise_index(index)  # HNSW: its graph and vectors on huge pages (hugepages.py)
    return SegmentIndex(
        body["index_id"],
        body["metric_type"].upper(),
        body["index_type"],
        index,
        row_ids,
        isinstance(index, EXACT),
    )


def _int_param(params: dict[str, Any], name: str, default: int) -> int:
    """Returns params[name] as a positive int (pymilvus sends strings). Raises
    InvalidArgument naming it."""
    value = params.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or number < 1:
        raise InvalidArgument(f"search param {name} must be a positive integer, not {value!r}")
    return number


@dataclass(frozen=True)
class SearchKnobs:
    """The index search parameters of one search: HNSW `ef`, IVF `nprobe`."""

    ef: int = DEFAULT_EF
    nprobe: int = DEFAULT_NPROBE

    @classmethod
    def parse(cls, params: dict[str, Any] | None, want: int) -> SearchKnobs:
        """Returns the knobs of `params` (ints or strings); ef at least `want` hits.
        Raises InvalidArgument for a value that is not a positive integer."""
        p = params or {}
        ef = _int_param(p, "ef", DEFAULT_EF)
        return cls(min(max(ef, want), max(MAX_EF, want)), _int_param(p, "nprobe", DEFAULT_NPROBE))

    def at_least(self, want: int) -> SearchKnobs:
        """Returns these knobs with ef raised to `want` hits if it is below."""
        return self if self.ef >= want else SearchKnobs(want, self.nprobe)


def faiss_params(
    seg_index: SegmentIndex, knobs: SearchKnobs, selector: Any, boost: float = 1.0
) -> faiss.SearchParameters:
    """Returns the faiss search parameters of one search (`boost` multiplies ef for a
    selective filter)."""
    params: Any
    if seg_index.hnsw:
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
        params.efSearch = min(int(knobs.ef * boost), max(MAX_EF, knobs.ef))
    elif seg_index.ivf:
        params = faiss.SearchParametersIVF()
        params.nprobe = min(knobs.nprobe, seg_index.index.nlist)  # type: ignore[attr-defined]
    else:
        params = faiss.SearchParameters()
    if selector is not None:
        params.sel = selector
    return params
