"""Building a faiss index from one segment's vectors, for each Milvus vector index type.

Index types (faiss factory strings; params may arrive as ints or as the strings pymilvus sends,
and are converted and range-checked as Milvus's indexparamcheck does):

    FLAT                         "Flat"                      exact
    IVF_FLAT   nlist             "IVF{nlist},Flat"           search param nprobe
    IVF_SQ8    nlist             "IVF{nlist},SQ8"            search param nprobe
    IVF_PQ     nlist, m, nbits   "IVF{nlist},PQ{m}x{nbits}"  search param nprobe; dim % m == 0
    HNSW       M, efConstruction "HNSW{M},Flat"              search param ef
    AUTOINDEX  -                 built as HNSW M=16, efConstruction=200 (AUTOINDEX_BUILD);
                                 the query node searches it with ef = max(k, AUTOINDEX_EF)

Metrics: L2 is faiss's METRIC_L2 (squared distances, as Milvus returns); IP is
METRIC_INNER_PRODUCT; COSINE is METRIC_INNER_PRODUCT over L2-normalized vectors (the builder
normalizes a copy; the query node normalizes queries).

Small segments: below `MIN_ROWS_TO_INDEX` rows (1,024, Milvus's
dataCoord.segment.minSegmentNumRowsToEnableIndex, under which Milvus marks the segment index
Finished without building one and searches it by brute force) every index type is built as an
exact FLAT index with the index's metric, reported with `built_as` FLAT. From 1,024 rows IVF's
nlist is capped to rows // 39 (faiss wants 39 training points per centroid), reported as the
effective `nlist`.

Reconstruction: no IVF index gets a direct map (nothing reconstructs from it: the query node
takes vectors for output fields from the binlogs or the growing rows). FLAT and HNSW
(IndexHNSWFlat) reconstruct exactly (COSINE: the normalized vector); IVF_FLAT would only with a
direct map; IVF_SQ8 and IVF_PQ are lossy.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np

from vectorlog.processors.indexnode.errors import InvalidIndexParams

METRICS = {
    "L2": faiss.METRIC_L2,
    "IP": faiss.METRIC_INNER_PRODUCT,
    "COSINE": faiss.METRIC_INNER_PRODUCT,
}
#: what AUTOINDEX builds (recall@10 ~0.95+ on GloVe-50d with ef 64; see the module docstring)
AUTOINDEX_BUILD = ("HNSW", {"M": 16, "efConstruction": 200})
#: the ef an AUTOINDEX (and an HNSW search without `ef`) is searched with at least
AUTOINDEX_EF = 64
#: the nprobe an IVF index is searched with when a search names none (Milvus's default: 8)
DEFAULT_NPROBE = 8
#: below this many rows a segment's index is an exact FLAT one (Milvus: 1,024)
MIN_ROWS_TO_INDEX = 1024
#: IVF nlist is capped to rows // this (faiss's minimum training points per centroid)
POINTS_PER_CENTROID = 39

#: per index type: parameter -> (default, lowest, highest); Milvus's ranges
PARAMS: dict[str, dict[str, tuple[int, int, int]]] = {
    "FLAT": {},
    "IVF_FLAT": {"nlist": (128, 1, 65536)},
    "IVF_SQ8": {"nlist": (128, 1, 65536)},
    "IVF_PQ": {"nlist": (128, 1, 65536), "m": (8, 1, 65536), "nbits": (8, 1, 16)},
    "HNSW": {"M": (16, 2, 2048), "efConstruction": (200, 1, 1 << 31 - 1)},
    "AUTOINDEX": {},
}
#: keys a params map may carry that are not build parameters (pymilvus and search params)
IGNORED_KEYS = frozenset({"metric_type", "index_type", "params", "ef", "nprobe", "mmap.enabled"})


@dataclass(frozen=True)
class BuildSpec:
    """A validated index to build: its type as created, metric and integer parameters."""

    index_type: str
    metric: str
    params: dict[str, int]


@dataclass(frozen=True)
class Built:
    """A built index: the faiss index, the type actually built and its effective parameters
    (as strings, for the SegmentIndexed event), and how long the build took."""

    index: faiss.Index
    built_as: str
    params: dict[str, str]
    build_ms: int


def parse_spec(index_type: str, metric: str, params: Mapping[str, Any]) -> BuildSpec:
    """Returns the validated spec; params may be ints or decimal strings. Raises
    InvalidIndexParams naming the unknown type or metric, or the bad parameter."""
    kind = str(index_type).upper()
    if kind not in PARAMS:
        raise InvalidIndexParams(f"index_type {index_type!r} is not one of {sorted(PARAMS)}")
    metric = str(metric or "").upper()
    if metric not in METRICS:
        raise InvalidIndexParams(f"metric_type {metric!r} is not one of {sorted(METRICS)}")
    allowed = PARAMS[kind]
    unknown = set(params) - set(allowed) - IGNORED_KEYS
    if unknown:
        raise InvalidIndexParams(
            f"{kind} has no parameter {sorted(unknown)} (has {sorted(allowed)})"
        )
    values = {
        k: _int_param(kind, k, params.get(k, d), lo, hi) for k, (d, lo, hi) in allowed.items()
    }
    return BuildSpec(kind, metric, values)


def _int_param(kind: str, key: str, value: Any, lo: int, hi: int) -> int:
    """Returns an int parameter from an int or a decimal string; raises InvalidIndexParams."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("+").isdigit():
        number = int(value)
    if number is None or not lo <= number <= hi:
        raise InvalidIndexParams(
            f"{kind} parameter {key!r} must be an int in [{lo}, {hi}], not {value!r}"
        )
    return number


def build_index(vectors: np.ndarray, spec: BuildSpec, min_rows: int = MIN_ROWS_TO_INDEX) -> Built:
    """Returns the index of `vectors` ((n, dim) float32, row i at position i; they are not
    changed). Raises InvalidIndexParams if the vectors do not fit the parameters."""
    return build_from_parts([vectors], len(vectors), spec, min_rows)


def build_from_parts(
    parts: Iterable[np.ndarray], rows: int, spec: BuildSpec, min_rows: int = MIN_ROWS_TO_INDEX
) -> Built:
    """Returns the index of the rows of `parts` ((n_i, dim) float32 arrays, e.g. a segment's
    insert logs, read one at a time), about `rows` in all. The parts are copied into one array
    (COSINE normalizes that copy; the parts are never changed) and added in one faiss call, as
    Milvus's index node builds from the whole field: an HNSW graph added part by part inserts
    each part's upper levels before the next part's and loses recall (recall@10 at ef 128 on
    100,000 GloVe-50d rows: 0.952 in one add, 0.928 in 20,000-row parts; see
    benchmarks/results/hnsw_build.md). Raises InvalidIndexParams if the rows do not fit the
    parameters."""
    started = time.monotonic()
    x = _gathered(parts, rows, spec.metric)
    kind, params = _effective(spec, len(x), x.shape[1], min_rows)
    index = faiss.index_factory(x.shape[1], _factory(kind, params), METRICS[spec.metric])
    _configure(index, kind, params)
    if not index.is_trained:
        _check_trainable(kind, params, len(x))
        index.train(x)
    index.add(x)
    build_ms = int((time.monotonic() - started) * 1000)
    return Built(index, kind, {k: str(v) for k, v in params.items()}, build_ms)


def _gathered(parts: Iterable[np.ndarray], rows: int, metric: str) -> np.ndarray:
    """Returns the rows of `parts` in one new C-contiguous float32 array (L2-normalized for
    COSINE), allocated for `rows` rows and grown if there are more. Raises
    InvalidIndexParams for no rows or a part whose shape is not (n, dim) of the first's dim."""
    out: np.ndarray | None = None
    n = 0
    for part in parts:
        if (
            part.ndim != 2
            or part.shape[1] < 1
            or (out is not None and part.shape[1] != out.shape[1])
        ):
            want = "(n, dim)" if out is None else f"(n, {out.shape[1]})"
            raise InvalidIndexParams(f"vectors must be an {want} array, not shape {part.shape}")
        if out is None:
            out = np.empty((max(rows, len(part)), part.shape[1]), dtype=np.float32)
        if n + len(part) > len(out):
            grown = np.empty((max(2 * len(out), n + len(part)), out.shape[1]), dtype=np.float32)
            grown[:n] = out[:n]
            out = grown
        out[n : n + len(part)] = part
        n += len(part)
    if out is None or n == 0:
        raise InvalidIndexParams("an index needs at least one vector; the segment has none")
    x = out[:n]
    if metric == "COSINE":
        faiss.normalize_L2(x)
    return x


def _check_trainable(kind: str, params: dict[str, int], rows: int) -> None:
    """Raises InvalidIndexParams if `rows` cannot train the index (PQ needs 2**nbits)."""
    if kind == "IVF_PQ" and rows < 1 << params["nbits"]:
        raise InvalidIndexParams(
            f"IVF_PQ nbits={params['nbits']} needs at least {1 << params['nbits']} rows "
            f"to train, the segment has {rows}"
        )


def _effective(spec: BuildSpec, rows: int, dim: int, min_rows: int) -> tuple[str, dict[str, int]]:
    """Returns the type to build and its parameters for a segment of `rows` rows."""
    kind, params = spec.index_type, dict(spec.params)
    if kind == "AUTOINDEX":
        kind, params = AUTOINDEX_BUILD[0], dict(AUTOINDEX_BUILD[1])
    if rows < min_rows:
        return "FLAT", {}
    if "nlist" in params:
        params["nlist"] = max(1, min(params["nlist"], rows // POINTS_PER_CENTROID))
    if kind == "IVF_PQ" and dim % params["m"]:
        raise InvalidIndexParams(f"IVF_PQ parameter m={params['m']} must divide dim {dim}")
    return kind, params


def _factory(kind: str, p: dict[str, int]) -> str:
    """Returns the faiss index_factory string of an index type and its parameters."""
    if kind == "FLAT":
        return "Flat"
    if kind == "IVF_FLAT":
        return f"IVF{p['nlist']},Flat"
    if kind == "IVF_SQ8":
        return f"IVF{p['nlist']},SQ8"
    if kind == "IVF_PQ":
        return f"IVF{p['nlist']},PQ{p['m']}x{p['nbits']}"
    return f"HNSW{p['M']},Flat"


def _configure(index: faiss.Index, kind: str, p: dict[str, int]) -> None:
    """Sets build-time parameters and the default search parameters of a fresh index."""
    if kind == "HNSW":
        hnsw = _downcast(index).hnsw
        hnsw.efConstruction = p["efConstruction"]
        hnsw.efSearch = AUTOINDEX_EF
    elif kind.startswith("IVF"):
        ivf = _downcast(faiss.extract_index_ivf(index))
        ivf.nprobe = DEFAULT_NPROBE
        if kind == "IVF_PQ":  # the factory turns it on; it only serves Hamming filtering
            ivf.do_polysemous_training = False


def _downcast(index: faiss.Index) -> Any:
    """Returns the index as its concrete faiss class (whose attributes mypy cannot know)."""
    return faiss.downcast_index(index)
