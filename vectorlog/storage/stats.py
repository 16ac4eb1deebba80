"""Milvus's primary-key stats logs (PrimaryKeyStats JSON) and their bloom filter.

Stats logs are not binlogs: `stats_log/.../{pk field}/{logID}` is one JSON object and
`.../{pk field}/1` (the compound stats) a JSON array of them, as Milvus 2.3.5 writes them:

    {"fieldID":100,"max":0,"min":0,"bf":{"m":6236,"k":5,"b":"<base64url>"},"pkType":5,
     "maxPk":999,"minPk":0}

`max`/`min` are legacy zeros; `maxPk`/`minPk` the segment's pk range. `bf` is a
bits-and-blooms/bloom v3 filter sized by NewWithEstimates(rows, 0.05): m = ceil(-n ln p / ln2^2),
k = ceil(ln2 m / n); a key's k bit positions come from murmur3 x64-128 double hashing of the key
bytes and of the key bytes + 0x01; `b` is URL-safe base64 (padded) of the bitset's binary form:
an 8-byte big-endian bit count, then big-endian uint64 words. An INT64 pk is hashed as its 8-byte
little-endian int64, a VARCHAR pk as its UTF-8 bytes (Milvus's BF.AddString).

The filter lets a later delete find the segments that may hold its key (`pk in bloom`).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from vectorlog.storage.binlog import DataTypeCode, go_json
from vectorlog.storage.errors import InvalidPayload
from vectorlog.storage.murmur import by_length, hash128

#: Milvus 2.3.5's bloom filter false-positive rate (common.maxBloomFalsePositive).
FALSE_POSITIVE_RATE = 0.05
_LN2 = math.log(2)
_PK_TYPES = (DataTypeCode.INT64, DataTypeCode.VARCHAR)
_I64 = (-(2**63), 2**63)


def estimate_parameters(n: int, p: float = FALSE_POSITIVE_RATE) -> tuple[int, int]:
    """Returns (m bits, k hashes) as bits-and-blooms v3 EstimateParameters(n, p) does; n >= 1."""
    m = math.ceil(-1 * n * math.log(p) / (_LN2 * _LN2))
    return max(1, m), max(1, math.ceil(_LN2 * m / n))


#: A primary key as the filter takes it: an INT64 pk, a VARCHAR pk, or the raw bytes hashed.
Key = int | np.integer[Any] | str | bytes


def pk_bytes(pk: Key) -> bytes:
    """Returns the bytes Milvus hashes for a pk: an int as 8-byte LE int64, a str as UTF-8.
    Raises InvalidPayload for an int outside int64 or another type."""
    if isinstance(pk, bytes):
        return pk
    if isinstance(pk, str):
        return pk.encode()
    return struct.pack("<q", _int64("int64 pk", pk))


class BloomFilter:
    """A bits-and-blooms/bloom v3 filter, bit-compatible with Milvus's stats logs.

    `add(pk)` and `pk in bf` take an int (an INT64 pk), a str (a VARCHAR pk) or raw bytes.
    """

    def __init__(self, m: int, k: int, words: np.ndarray | None = None) -> None:
        if m < 1 or k < 1:
            raise InvalidPayload(f"a bloom filter needs m >= 1 and k >= 1, got m={m} k={k}")
        self.m, self.k = int(m), int(k)
        nwords = (self.m + 63) // 64
        self.words = np.zeros(nwords, np.uint64) if words is None else words.astype(np.uint64)
        if len(self.words) != nwords:
            raise InvalidPayload(f"a bloom filter of {m} bits has {nwords} words")

    @classmethod
    def with_estimates(cls, n: int, p: float = FALSE_POSITIVE_RATE) -> BloomFilter:
        """Returns an empty filter sized for `n` keys at false-positive rate `p`."""
        return cls(*estimate_parameters(n, p))

    def add(self, pk: Key) -> None:
        """Adds one key."""
        self.add_all([pk])

    def add_all(self, pks: Iterable[Key] | np.ndarray) -> None:
        """Adds every key (vectorized: the fast way to fill a segment's filter); an int64
        array is taken as INT64 pks without a Python object per key."""
        if isinstance(pks, np.ndarray) and pks.dtype.kind in "iu":
            if not len(pks):
                return
            hashes = _hashes(_int64_array(pks).astype("<i8").view(np.uint8).reshape(-1, 8))
        else:
            keys = [pk_bytes(pk) for pk in pks]
            hashes = np.empty((len(keys), 4), np.uint64)
            for where, block in by_length(keys):
                hashes[where] = _hashes(block)
        self._set(self._locations(hashes).ravel())

    def _set(self, locations: np.ndarray) -> None:
        """Sets the bits at `locations` (one pass: a bool array packed into the words)."""
        if not len(locations):
            return
        bits = np.zeros(len(self.words) * 64, np.bool_)
        bits[locations] = True
        self.words |= np.packbits(bits, bitorder="little").view("<u8").astype(np.uint64)

    def __contains__(self, pk: object) -> bool:
        """Returns True if the key may have been added (false positives at about rate p)."""
        if isinstance(pk, bool) or not isinstance(pk, int | np.integer | str | bytes):
            return False
        key = pk_bytes(pk)
        locations = self._locations(_hashes(np.frombuffer(key, np.uint8).reshape(1, -1)))[0]
        bits = (self.words[locations >> 6] >> (locations & 63)) & np.uint64(1)
        return bool(bits.all())

    def _locations(self, hashes: np.ndarray) -> np.ndarray:
        """Returns a (n, k) uint64 array of bit positions of keys with these (n, 4) hashes."""
        i = np.arange(self.k, dtype=np.uint64)
        first = hashes[:, (i % 2).astype(np.intp)]
        second = hashes[:, (2 + ((i + i % 2) % 4) // 2).astype(np.intp)]
        with np.errstate(over="ignore"):
            return (first + i * second) % np.uint64(self.m)

    def to_json(self) -> dict[str, Any]:
        """Returns the filter as Milvus stores it: {"m": bits, "k": hashes, "b": base64url}."""
        header = struct.pack(">Q", self.m)
        body = self.words.astype(">u8").tobytes()
        return {"m": self.m, "k": self.k, "b": base64.urlsafe_b64encode(header + body).decode()}

    @classmethod
    def from_json(cls, value: dict[str, Any] | str | bytes) -> BloomFilter:
        """Returns the filter of a `to_json` dict (or its JSON text). Raises InvalidPayload."""
        try:
            data = json.loads(value) if isinstance(value, str | bytes) else value
            raw = base64.urlsafe_b64decode(data["b"])
            m, k = int(data["m"]), int(data["k"])
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise InvalidPayload(f"not a bloom filter: {exc!r}") from exc
        if len(raw) < 8 or struct.unpack(">Q", raw[:8])[0] != m or len(raw) % 8:
            raise InvalidPayload(f"bloom filter bits do not match m={m}")
        return cls(m, k, np.frombuffer(raw[8:], dtype=">u8"))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return (self.m, self.k) == (other.m, other.k) and bool(
            np.array_equal(self.words, other.words)
        )

    __hash__ = None  # type: ignore[assignment]


def pk_stats(
    field_id: int, pks: Sequence[int] | Sequence[str] | np.ndarray, pk_type: DataTypeCode
) -> dict[str, Any]:
    """Returns the PrimaryKeyStats of a segment's primary keys (every row's, deleted included),
    keys in Milvus's order: fieldID, max, min, bf, pkType, maxPk, minPk.

    Raises InvalidPayload if there is no pk, the type is not INT64/VARCHAR or a pk does not fit.
    """
    kind = _pk_type(pk_type)
    keys, lowest, highest = _pk_keys(kind, pks)
    bloom = BloomFilter.with_estimates(len(keys))
    bloom.add_all(keys)
    return {
        "fieldID": _int64("field_id", field_id),
        "max": 0,
        "min": 0,
        "bf": bloom.to_json(),
        "pkType": int(kind),
        "maxPk": highest,
        "minPk": lowest,
    }


def stats_log(stats: dict[str, Any]) -> bytes:
    """Returns one stats log file: `stats` as compact JSON the way Go's encoding/json writes it."""
    return go_json(stats).encode()


def compound_stats_log(stats: list[dict[str, Any]]) -> bytes:
    """Returns the compound stats file (`.../{pk field}/1`): a JSON array of PrimaryKeyStats."""
    return go_json(stats).encode()


def read_stats(data: bytes) -> list[dict[str, Any]]:
    """Returns the PrimaryKeyStats of a stats log or compound stats file (always a list)."""
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidPayload(f"not a stats log: {exc}") from exc
    return value if isinstance(value, list) else [value]


def _hashes(keys: np.ndarray) -> np.ndarray:
    """Returns the (n, 4) uint64 base hashes bits-and-blooms takes per key of an (n, length)
    uint8 array: murmur3 x64-128 (h1, h2) of the key, then of the key followed by 0x01."""
    marked = np.concatenate([keys, np.ones((len(keys), 1), np.uint8)], axis=1)
    return np.stack([*hash128(keys), *hash128(marked)], axis=1)


def _int64(name: str, value: Any) -> int:
    """Returns `value` as an int64; bools and non-integers are refused with InvalidPayload."""
    integer = isinstance(value, int | np.integer) and not isinstance(value, bool)
    if integer and _I64[0] <= int(value) < _I64[1]:
        return int(value)
    raise InvalidPayload(f"{name} must be an int64, not {value!r}")


def _pk_type(pk_type: Any) -> DataTypeCode:
    if pk_type not in _PK_TYPES:
        raise InvalidPayload(f"primary keys are INT64 (5) or VARCHAR (21), not {pk_type!r}")
    return DataTypeCode(pk_type)


def _pk_keys(kind: DataTypeCode, pks: Any) -> tuple[list[bytes] | np.ndarray, Any, Any]:
    """Returns (the bytes hashed for each pk, or INT64 pks as an int64 array; the lowest pk,
    the highest pk)."""
    if len(pks) == 0:
        raise InvalidPayload("stats need at least one primary key")
    if kind == DataTypeCode.VARCHAR:
        strings = list(pks)
        if not all(isinstance(pk, str) for pk in strings):
            raise InvalidPayload("VARCHAR primary keys are str")
        return [pk_bytes(pk) for pk in strings], min(strings), max(strings)
    values = _int64_array(pks)
    return values, int(values.min()), int(values.max())


def _int64_array(pks: Any) -> np.ndarray:
    """Returns INT64 pks as an int64 array; raises InvalidPayload for anything else."""
    given = np.asarray(pks)
    if given.dtype.kind == "i" or (given.dtype.kind == "u" and int(given.max()) < 2**63):
        return given.astype(np.int64, copy=False)
    return np.array([_int64("int64 pk", pk) for pk in pks], dtype=np.int64)
