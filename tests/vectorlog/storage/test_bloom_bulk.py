"""The vectorized bloom filter (numpy murmur3 over whole columns) sets exactly the bits the
per-key bits-and-blooms v3 algorithm sets, for INT64 and VARCHAR keys of every length."""

from __future__ import annotations

import random

import mmh3
import numpy as np
import pytest

from tests.vectorlog.storage.milvus_reader import bloom_bits, int64_key, varchar_key
from vectorlog.storage.binlog import DataTypeCode
from vectorlog.storage.murmur import by_length, hash128
from vectorlog.storage.stats import BloomFilter, pk_stats


def reference_words(keys: list[bytes], m: int, k: int) -> list[int]:
    """Returns the filter words of `keys` set one key and one hash at a time (as Go does)."""
    words = [0] * ((m + 63) // 64)
    for key in keys:
        h = (*mmh3.hash64(key, signed=False), *mmh3.hash64(key + b"\x01", signed=False))
        for i in range(k):
            location = ((h[i % 2] + i * h[2 + ((i + (i % 2)) % 4) // 2]) % 2**64) % m
            words[location >> 6] |= 1 << (location & 63)
    return words


def test_numpy_murmur3_matches_mmh3_for_keys_of_every_length() -> None:
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(0, 80)) for _ in range(3000)] + [b"", b"\x00" * 33]
    got = np.empty((len(keys), 2), np.uint64)
    for where, block in by_length(keys):
        got[where, 0], got[where, 1] = hash128(block)
    assert got.tolist() == [list(mmh3.hash64(key, signed=False)) for key in keys]


@pytest.mark.parametrize("n", [1, 3, 64, 2000])
def test_int64_pk_stats_set_the_per_key_bits(n: int) -> None:
    pks = np.random.default_rng(n).integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    pks[0] = -1
    bf = pk_stats(100, pks, DataTypeCode.INT64)["bf"]
    keys = [int64_key(int(pk)) for pk in pks]
    assert bloom_bits(bf) == reference_words(keys, bf["m"], bf["k"])
    assert pk_stats(100, pks.tolist(), DataTypeCode.INT64)["bf"] == bf


@pytest.mark.parametrize("n", [1, 5, 700])
def test_varchar_pk_stats_set_the_per_key_bits(n: int) -> None:
    rng = random.Random(n)
    pks = ["".join(rng.choice("ab€😀") for _ in range(rng.randrange(0, 30))) for _ in range(n)]
    bf = pk_stats(100, pks, DataTypeCode.VARCHAR)["bf"]
    assert bloom_bits(bf) == reference_words([varchar_key(pk) for pk in pks], bf["m"], bf["k"])


def test_adding_to_a_filter_keeps_its_bits_and_finds_every_key() -> None:
    bloom = BloomFilter.with_estimates(100)
    bloom.add_all(np.arange(50, dtype=np.int64))
    bloom.add_all(["x", "long key " * 5])
    bloom.add_all(np.array([], dtype=np.int64))
    keys = [int64_key(i) for i in range(50)] + [varchar_key("x"), varchar_key("long key " * 5)]
    assert bloom.words.tolist() == reference_words(keys, bloom.m, bloom.k)
    assert all(i in bloom for i in range(50)) and "x" in bloom
