"""Sparse float vectors (Milvus's SPARSE_FLOAT_VECTOR) in Milvus's own row format.

A row is the bytes Milvus stores and sends (schemapb.SparseFloatArray.contents, one binlog
row): (uint32 index, float32 value) pairs, little-endian, interleaved, indices strictly
increasing, every index below 2**32-1. Rows travel in that form everywhere in vectorlog (the
log's SparseFloatVectorColumn, binlogs, gRPC); a read returns each as {index: value}.

Users give a row as {index: value} (pymilvus: keys and values may be numeric strings), as
an iterable of (index, value) pairs, as a 1 x N scipy sparse row, or a whole scipy sparse
matrix for many rows. Their indices are sorted (as pymilvus sorts them); a repeated index, a
negative or too large index, or a NaN / infinite value is refused with Milvus's message.

scipy.sparse is imported where a CSR matrix is made, not with this module: every process
imports it at its start (through core.model), and scipy.sparse took half of `import
vectorlog.cli`'s seconds (1.8 of 3.9 s at a load average of 20). A value given as a scipy
sparse matrix means its caller imported scipy.sparse already (`_is_sparse`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import InvalidArgument, SchemaMismatch

if TYPE_CHECKING:
    import scipy.sparse as sp

#: one (index, value) pair of a row, as Milvus lays it out
PAIR = np.dtype([("index", "<u4"), ("value", "<f4")])
MAX_INDEX = 2**32 - 1  # exclusive: Milvus refuses 2**32-1 itself
#: the metrics a sparse field is searched with (BM25: a BM25 function's output)
SPARSE_METRICS = ("IP", "BM25")
SPARSE_DEFAULT_METRIC = "IP"
#: the index types of a sparse field (Milvus 2.4+): both answer IP exactly but for the
#: drop ratios (`drop_ratio_build`, and `drop_ratio_search` at search)
SPARSE_INDEXES = ("SPARSE_INVERTED_INDEX", "SPARSE_WAND")
#: knowhere's traversal algorithms of a sparse index (accepted, all answer the same)
INVERTED_ALGOS = ("TAAT_NAIVE", "DAAT_WAND", "DAAT_MAXSCORE")


def pairs(row: bytes) -> np.ndarray:
    """Returns a row's pairs as a structured array (fields `index`, `value`). Raises
    SchemaMismatch if its length is not a multiple of 8."""
    if len(row) % PAIR.itemsize:
        raise SchemaMismatch(f"invalid data length in sparse float vector: {len(row)}")
    return np.frombuffer(row, dtype=PAIR)


def check_row(row: bytes) -> bytes:
    """Returns `row` if Milvus takes it (ValidateSparseFloatRows). Raises SchemaMismatch
    with Milvus's message otherwise."""
    p = pairs(row)
    idx = p["index"].astype(np.int64)
    if len(idx) and idx.max() >= MAX_INDEX:
        raise SchemaMismatch("invalid index in sparse float vector: must be less than 2^32-1")
    if len(idx) > 1 and (np.diff(idx) <= 0).any():
        raise SchemaMismatch("unsorted or same indices in sparse float vector")
    values = p["value"]
    if not np.isfinite(values).all():
        bad = float(values[~np.isfinite(values)][0])
        raise SchemaMismatch(f"sparse float vector value {bad} is not a number or infinity")
    return row


def encode(indices: Sequence[Any], values: Sequence[Any]) -> bytes:
    """Returns the row of `indices` and `values` (any order). Raises SchemaMismatch for a
    negative or too large index, a repeated one, or a value that is no finite number."""
    if len(indices) != len(values):
        raise SchemaMismatch(
            f"length of indices and values must be the same, got {len(indices)} and {len(values)}"
        )
    try:
        idx = np.asarray([int(i) for i in indices], dtype=np.int64)
        val = np.asarray([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SchemaMismatch(f"a sparse vector holds a non-number: {exc}") from None
    bad = (idx < 0) | (idx >= MAX_INDEX)
    if bad.any():
        raise SchemaMismatch(
            f"sparse vector index must be positive and less than 2^32-1: {int(idx[bad][0])}"
        )
    order = np.argsort(idx, kind="stable")
    out = np.empty(len(idx), dtype=PAIR)
    out["index"], out["value"] = idx[order], val[order]
    return check_row(out.tobytes())


def _is_sparse(value: Any) -> bool:
    """Returns whether `value` is a scipy sparse array or matrix (none can exist before
    scipy.sparse was imported: then it is not)."""
    module = sys.modules.get("scipy.sparse")
    return module is not None and bool(module.issparse(value))


def row_of(value: Any) -> bytes:
    """Returns one row given as bytes (Milvus's format), {index: value}, (index, value)
    pairs or a 1 x N scipy sparse row. Raises SchemaMismatch naming what is wrong."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return check_row(bytes(value))
    if _is_sparse(value):
        if value.shape[0] != 1:
            raise SchemaMismatch("invalid input for sparse float vector: expect 1 row")
        coo = value.tocoo()
        return encode(coo.col.tolist(), coo.data.tolist())
    if isinstance(value, dict):
        return encode(list(value.keys()), list(value.values()))
    if isinstance(value, Iterable) and not isinstance(value, str):
        items = list(value)
        if all(isinstance(p, (tuple, list)) and len(p) == 2 for p in items):
            return encode([p[0] for p in items], [p[1] for p in items])
    raise SchemaMismatch(
        f"a sparse float vector must be a dict of index: value, (index, value) pairs or a "
        f"scipy sparse row, not {type(value).__name__}"
    )


def rows_of(values: Any) -> list[bytes]:
    """Returns the rows of `values`: a scipy sparse matrix (one row each) or an iterable of
    rows as `row_of` takes them. Raises SchemaMismatch naming the bad row."""
    if _is_sparse(values):
        import scipy.sparse as sp

        csr = sp.csr_array(values)
        return [
            encode(csr.indices[a:b].tolist(), csr.data[a:b].tolist())
            for a, b in zip(csr.indptr[:-1], csr.indptr[1:], strict=True)
        ]
    out = []
    for i, v in enumerate(values):
        try:
            out.append(row_of(v))
        except SchemaMismatch as exc:
            raise SchemaMismatch(f"row {i}: {exc}") from None
    return out


def as_dict(row: bytes) -> dict[int, float]:
    """Returns a row as {index: value}, as Milvus's clients return it."""
    p = pairs(row)
    return dict(zip(p["index"].tolist(), p["value"].tolist(), strict=True))


def dim_of(rows: Iterable[bytes]) -> int:
    """Returns the dim Milvus reports for rows: one past their largest index (0: none)."""
    top = -1
    for row in rows:
        p = pairs(row)
        if len(p):
            top = max(top, int(p["index"][-1]))
    return top + 1


def to_csr(rows: Sequence[bytes], dim: int | None = None) -> sp.csr_array:
    """Returns the rows as one (len(rows), dim) float32 CSR matrix (dim: one past the
    largest index if not given)."""
    import scipy.sparse as sp

    lengths = np.fromiter((len(r) // PAIR.itemsize for r in rows), np.int64, len(rows))
    p = np.frombuffer(b"".join(rows), dtype=PAIR)
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    idx = p["index"].astype(np.int64)
    width = max(dim or 0, int(idx.max()) + 1 if len(idx) else 1)
    return sp.csr_array((p["value"].astype(np.float32), idx, indptr), shape=(len(rows), width))


def sparse_index_checks(
    f: Any, kind: str, metric: str | None, params: dict[str, Any]
) -> tuple[str, str, dict[str, str]]:
    """Returns (index type, metric, params as strings) of an index on sparse field `f`:
    AUTOINDEX builds SPARSE_INVERTED_INDEX; the metric is IP (or BM25; default IP);
    params `drop_ratio_build` (a number in [0, 1)) and `inverted_index_algo`. Raises
    InvalidArgument naming what is wrong."""
    kind = "SPARSE_INVERTED_INDEX" if kind == "AUTOINDEX" else kind
    if kind not in SPARSE_INDEXES:
        raise InvalidArgument(
            f"index_type {kind} cannot index sparse vector field {f.name!r}: use one of "
            f"{list(SPARSE_INDEXES)}"
        )
    given = (metric or f.metric_type or SPARSE_DEFAULT_METRIC).upper()
    if given not in SPARSE_METRICS:
        raise InvalidArgument(
            f"metric type {given} not found or not supported, supported: {list(SPARSE_METRICS)}"
        )
    out: dict[str, str] = {}
    for key, value in params.items():
        if key == "drop_ratio_build":
            out[key] = str(_ratio(key, value))
        elif key == "inverted_index_algo" and value in INVERTED_ALGOS:
            out[key] = str(value)
        elif key in BM25_RANGES:
            out[key] = str(_bm25_param(key, value))
        elif key != "metric_type":
            raise InvalidArgument(f"{kind} has no parameter {key!r} = {value!r}")
    return kind, given, out


#: BM25 index parameters: name -> (lowest, highest) (Milvus's ranges)
BM25_RANGES = {"bm25_k1": (1.2, 3.0), "bm25_b": (0.0, 1.0)}


def _bm25_param(key: str, value: Any) -> float:
    """Returns bm25_k1 or bm25_b given as a number or a decimal string. Raises
    InvalidArgument unless it is in Milvus's range."""
    lo, hi = BM25_RANGES[key]
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = lo - 1
    if isinstance(value, bool) or not lo <= number <= hi:
        raise InvalidArgument(f"{key} must be a number in [{lo}, {hi}], not {value!r}")
    return number


def _ratio(key: str, value: Any) -> float:
    """Returns a drop ratio given as a number or a decimal string. Raises InvalidArgument
    unless it is in [0, 1)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or not 0 <= number < 1:
        raise InvalidArgument(f"{key} must be a number in [0, 1), not {value!r}")
    return number
