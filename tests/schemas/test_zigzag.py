"""schemas/zigzag.py: Avro's varints of an array's longs by protobuf's encoder, byte for byte
those of a pure-Python reference (each value's zigzag, 7 bits a byte, low first) and of the
numpy encoder rowswriter used before (its output for a 1,000-row insert's columns kept as
known bytes here)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from vectorlog.schemas.rowswriter import varints
from vectorlog.schemas.zigzag import zigzag_varints


def reference(values: list[int]) -> bytes:
    """Avro's long encoding of each value, concatenated (the specification, in Python)."""
    out = bytearray()
    for n in values:
        z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
        while z > 0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
    return bytes(out)


EXTREMES = [0, -1, 1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**62, -(2**62), 2**63 - 1]
EXTREMES += [-(2**63)]


def test_extremes_and_every_width_match_the_reference():
    values = EXTREMES + [s * (2**k) + d for k in range(63) for s in (1, -1) for d in (-1, 0)]
    values = [v for v in values if -(2**63) <= v < 2**63]
    arr = np.array(values, dtype=np.int64)
    assert zigzag_varints(arr) == reference(values)
    assert varints(arr) == reference(values)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])
def test_every_integer_dtype_and_layout_match_the_reference(dtype):
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 700, dtype=dtype, endpoint=True)
    wide = np.stack([a, a[::-1]], axis=1)
    for view in (a, a[::3], np.asfortranarray(wide)[:, 1], a.astype(a.dtype.newbyteorder())):
        assert zigzag_varints(view) == reference([int(v) for v in view])


def test_random_longs_of_random_lengths_match_the_reference():
    rng = np.random.default_rng(24)
    for _ in range(200):
        n = int(rng.integers(0, 1200))
        bits = int(rng.integers(1, 64))
        v = rng.integers(-(2**bits), 2**bits - 1, n, dtype=np.int64, endpoint=True)
        assert zigzag_varints(v) == reference(v.tolist())


def test_booleans_and_empty_arrays():
    assert zigzag_varints(np.array([True, False, True])) == b"\x02\x00\x02"
    assert zigzag_varints(np.array([], dtype=np.int64)) == b""


def test_an_inserts_columns_are_the_old_encoders_bytes():
    # the numpy encoder's output (session 23's rowswriter.varints) for the ids and tags of
    # the 124th 1,000-row batch of benchmarks/insert_handler_bench: their sizes and digests
    ids = np.arange(123_000, 124_000, dtype=np.int64)
    got = {name: zigzag_varints(v) for name, v in (("ids", ids), ("tags", ids % 10))}
    assert {k: len(v) for k, v in got.items()} == {"ids": 3000, "tags": 1000}
    assert hashlib.sha256(got["ids"]).hexdigest() == IDS_SHA256
    assert got["tags"] == bytes(2 * (i % 10) for i in range(123_000, 124_000))
    assert got["ids"][:6] == bytes([0xF0, 0x81, 0x0F, 0xF2, 0x81, 0x0F])


IDS_SHA256 = "d2a60008ed2e7430ce2cd22996a708e8319cad2a4be52fdeacf44328d7aaeb38"
