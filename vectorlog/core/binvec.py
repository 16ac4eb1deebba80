"""BINARY_VECTOR values: dim / 8 bytes per row, the bits packed most significant first (numpy's
packbits order, as pymilvus users pack them), as Milvus stores and sends them.

A row is given as its bytes, a uint8 numpy array of dim / 8 bytes, or dim bits (0/1 or bools,
packed here). Reads return each row's bytes, as pymilvus returns binary vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectorlog.core.errors import SchemaMismatch


def binary_rows(name: str, dim: int, values: Any) -> np.ndarray:
    """Returns the rows of a binary field as (n, dim / 8) uint8. Raises SchemaMismatch naming
    the field and the first bad row."""
    out = np.empty((len(values), dim // 8), dtype=np.uint8)
    for i, v in enumerate(values):
        out[i] = _row(name, dim, v, i)
    return out


def _row(name: str, dim: int, v: Any, i: int) -> np.ndarray:
    if isinstance(v, (bytes, bytearray, memoryview)):
        raw = np.frombuffer(bytes(v), dtype=np.uint8)
    elif isinstance(v, np.ndarray) and v.dtype == np.uint8 and v.size == dim // 8:
        raw = v.ravel()
    else:
        bits = _bits(name, v, i)
        if len(bits) != dim:
            raise SchemaMismatch(
                f"row {i}: binary vector field {name!r} has {len(bits)} bits, expected {dim}"
            )
        raw = np.packbits(bits)
    if len(raw) != dim // 8:
        raise SchemaMismatch(
            f"row {i}: binary vector field {name!r} has {len(raw)} bytes, expected {dim // 8} "
            f"(dim {dim} / 8)"
        )
    return raw


def _bits(name: str, v: Any, i: int) -> np.ndarray:
    """Returns a row given as bits (0/1 or bools) as a uint8 array."""
    try:
        bits = np.asarray(v)
    except (TypeError, ValueError):
        bits = np.zeros(0)
    if bits.ndim != 1 or bits.dtype.kind not in "biu" or not np.isin(bits, (0, 1)).all():
        raise SchemaMismatch(
            f"row {i}: binary vector field {name!r} must be bytes or a list of 0/1 bits, "
            f"got {v!r:.60}"
        )
    return bits.astype(np.uint8)
