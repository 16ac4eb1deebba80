"""MurmurHash3 x64-128 (seed 0) of many equal-length keys at once, in numpy: the hash the bloom
filter of stats.py applies per key, computed for a whole column without a Python loop per key.
Bit-identical to `mmh3.hash64(key, signed=False)` (and Go's murmur3.Sum128).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)


def hash128(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (h1, h2) uint64 arrays: the murmur3 x64-128 halves of each row of `keys`, an
    (n, length) uint8 array of n keys of one length."""
    n, length = keys.shape
    h1, h2 = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    with np.errstate(over="ignore"):
        for lo in range(0, length - length % 16, 16):
            k1, k2 = _words(keys[:, lo : lo + 16], 16)
            h1 ^= _mix1(k1)
            h1 = (_rotl(h1, 27) + h2) * np.uint64(5) + np.uint64(0x52DCE729)
            h2 ^= _mix2(k2)
            h2 = (_rotl(h2, 31) + h1) * np.uint64(5) + np.uint64(0x38495AB5)
        if length % 16:
            k1, k2 = _words(keys[:, length - length % 16 :], length % 16)
            h2 ^= _mix2(k2) if length % 16 > 8 else np.uint64(0)
            h1 ^= _mix1(k1)
        h1 ^= np.uint64(length)
        h2 ^= np.uint64(length)
        h1 += h2
        h2 += h1
        h1, h2 = _fmix(h1), _fmix(h2)
        h1 += h2
        h2 += h1
    return h1, h2


def by_length(keys: Sequence[bytes]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Returns the keys grouped by length: (their indices, an (n, length) uint8 array)."""
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    groups = []
    for length in np.unique(lengths):
        where = np.flatnonzero(lengths == length)
        picked = keys if len(where) == len(keys) else [keys[int(i)] for i in where]
        joined = b"".join(picked)
        groups.append((where, np.frombuffer(joined, np.uint8).reshape(len(where), int(length))))
    return groups


def _words(tail: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns the little-endian (k1, k2) words of up to 16 bytes per row, zero-padded."""
    padded = np.zeros((tail.shape[0], 16), np.uint8)
    padded[:, :size] = tail
    words = padded.view("<u8").astype(np.uint64)
    return words[:, 0], words[:, 1]


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _mix1(k1: np.ndarray) -> np.ndarray:
    return _rotl(k1 * _C1, 31) * _C2


def _mix2(k2: np.ndarray) -> np.ndarray:
    return _rotl(k2 * _C2, 33) * _C1


def _fmix(k: np.ndarray) -> np.ndarray:
    k ^= k >> np.uint64(33)
    k *= _M1
    k ^= k >> np.uint64(33)
    k *= _M2
    k ^= k >> np.uint64(33)
    return k
