"""FLOAT16_VECTOR and BFLOAT16_VECTOR values: 2 bytes per dimension, little-endian, as Milvus
stores and sends them (FieldData.vectors.float16_vector / bfloat16_vector, binlog
fixed_size_binary(2 x dim)); searched as float32 (every half value is exactly a float32).

A row is given as the bytes of its values, a numpy array of float16 (or of `bfloat16`, e.g.
ml_dtypes'), or numbers (rounded to the nearest half value; bfloat16 by round-to-nearest-even
of the float32 bits). A value that is NaN, infinite or beyond the type's range is refused.
Reads return each row's bytes, as pymilvus returns these vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectorlog.core.errors import SchemaMismatch

FLOAT16, BFLOAT16 = "FLOAT16_VECTOR", "BFLOAT16_VECTOR"
#: the largest finite value of each type
LIMITS = {FLOAT16: 65504.0, BFLOAT16: 3.3895313892515355e38}


def to_float32(raw: np.ndarray, kind: str) -> np.ndarray:
    """Returns (n, 2 x dim) uint8 rows of `kind` values as an (n, dim) float32 array."""
    flat = np.ascontiguousarray(raw, dtype=np.uint8)
    n = flat.shape[0]
    if kind == FLOAT16:
        return flat.view("<f2").astype(np.float32).reshape(n, -1)
    bits = flat.view("<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(n, -1)


def from_float32(x: np.ndarray, kind: str) -> np.ndarray:
    """Returns (n, dim) float32 values as (n, 2 x dim) uint8 rows of `kind` (nearest)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n = x.shape[0]
    if kind == FLOAT16:
        return x.astype("<f2").view(np.uint8).reshape(n, -1)
    bits = x.view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").view(np.uint8).reshape(n, -1)


def half_rows(name: str, kind: str, dim: int, values: Any) -> np.ndarray:
    """Returns the rows of a FLOAT16/BFLOAT16 field as (n, 2 x dim) uint8. Raises
    SchemaMismatch naming the field and the first bad row."""
    out = np.empty((len(values), 2 * dim), dtype=np.uint8)
    for i, v in enumerate(values):
        out[i] = _row(name, kind, dim, v, i)
    return out


def _row(name: str, kind: str, dim: int, v: Any, i: int) -> np.ndarray:
    if isinstance(v, (bytes, bytearray, memoryview)):
        raw = np.frombuffer(bytes(v), dtype=np.uint8)
        if len(raw) != 2 * dim:
            raise SchemaMismatch(
                f"row {i}: vector field {name!r} has {len(raw)} bytes, expected {2 * dim} "
                f"(dim {dim} x 2)"
            )
        floats = to_float32(raw[None, :], kind)
    elif isinstance(v, np.ndarray) and v.dtype.itemsize == 2 and v.dtype.kind in "fV":
        floats = to_float32(v.reshape(1, -1).view(np.uint8), _kind_of(v.dtype, kind))
    else:
        try:
            floats = np.asarray(v, dtype=np.float64).reshape(1, -1)
        except (TypeError, ValueError):
            raise SchemaMismatch(
                f"row {i}: vector field {name!r} must be {dim} numbers or their bytes, "
                f"got {v!r:.60}"
            ) from None
    return _checked(name, kind, dim, floats, i)


def _kind_of(dtype: np.dtype, kind: str) -> str:
    """Returns the half type of a numpy array's 2-byte dtype (float16 or bfloat16)."""
    return BFLOAT16 if dtype.name == "bfloat16" else FLOAT16 if dtype.kind == "f" else kind


def _checked(name: str, kind: str, dim: int, floats: np.ndarray, i: int) -> np.ndarray:
    if floats.shape != (1, dim):
        raise SchemaMismatch(
            f"row {i}: vector field {name!r} has dim {floats.shape[-1]}, expected {dim}"
        )
    milvus = f"{kind[:-7].lower()} vector contain nan or infinity value."  # VerifyFloats16
    if not np.isfinite(floats).all():
        raise SchemaMismatch(
            f"row {i}: vector field {name!r} has a NaN or infinite value: {milvus}"
        )
    if (np.abs(floats) > LIMITS[kind]).any():
        raise SchemaMismatch(
            f"row {i}: vector field {name!r} has a value out of the {kind[:-7]} range "
            f"(|x| <= {LIMITS[kind]:g}), infinite as {kind[:-7]}: {milvus}"
        )
    return from_float32(floats.astype(np.float32), kind)[0]
