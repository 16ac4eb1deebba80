"""Randomized differential tests of rpc.valuebytes against fastavro: random Value trees
(every primitive at its extremes, nested lists, maps, pairs, tuples, sets, numpy scalars and
arrays of every dtype and layout, registered enums and objects, subclasses fastavro
resolves) are written to fastavro's bytes (or refused alike) and read as values.decode reads
fastavro's reading; cut or corrupted bytes read as fastavro reads them or are refused as an
invalid argument."""

from __future__ import annotations

import collections
import math
import struct
from typing import Any

import numpy as np
import pytest

from tests.vectorlog.rpc.test_valuebytes import HITS, SCHEMA, Count, fastavro_bytes, fastavro_value
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import DataType
from vectorlog.expr import nodes
from vectorlog.rpc import valuebytes, wire
from vectorlog.rpc.methods import BOOL, DOUBLE, INT, LONG, LONGS, SERVICES, STRING, VALUE

INT_EDGES = [0, 1, -1, 63, 64, -64, -65, 2**31, -(2**31) - 1, 2**53 + 1, 2**62]
INT_EDGES += [2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30)]
FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 0.1, -2.5]
TEXTS = ["", "a", "é", "✓", "😀", "\x00", "日本語", "\U0010ffff", "\ud800"]
DTYPES = ["<i1", "<u1", "<i2", ">i2", "<u2", "<i4", ">i4", "<u4", "<i8", ">i8", "<u8", ">u8"]
DTYPES += ["<f2", "<f4", ">f4", "<f8", ">f8", "|b1", "<c8", "<c16", "<U3", "|S4", "<M8[s]"]
DTYPES += ["<m8[ms]"]


class Label(str):
    """A str subclass: fastavro resolves its branch."""


def scalar(rng: np.random.Generator) -> Any:
    pick = rng.integers(0, 11)
    if pick == 0:
        return None
    if pick == 1:
        return bool(rng.integers(0, 2))
    if pick == 2:
        return INT_EDGES[rng.integers(len(INT_EDGES))]
    if pick == 3:
        return int(rng.integers(-(2**62), 2**62))
    if pick == 4:
        return FLOATS[rng.integers(len(FLOATS))] if rng.random() < 0.5 else rng.standard_normal()
    if pick == 5:
        return "".join(TEXTS[i] for i in rng.integers(0, len(TEXTS) - 1, rng.integers(0, 5)))
    if pick == 6:
        return rng.bytes(int(rng.integers(0, 9)))
    if pick == 7:
        return array(rng)[()] if rng.random() < 0.5 else array(rng)
    if pick == 8:
        return [DataType.FLOAT_VECTOR, list(nodes.Ty)[0], HITS, SCHEMA][rng.integers(4)]
    if pick == 9:  # left to fastavro (a subclass), or a value fastavro refuses
        return [Count(7), Label("x"), "\ud800", collections.OrderedDict(a=1)][rng.integers(4)]
    return float(np.float32(rng.standard_normal()))


def array(rng: np.random.Generator) -> np.ndarray:
    """Returns a numpy array of a random dtype and layout (0-d, empty, strided, Fortran)."""
    dtype = np.dtype(DTYPES[rng.integers(len(DTYPES))])
    shape = [(), (0,), (int(rng.integers(1, 6)),), (2, 3), (3, 0)][rng.integers(5)]
    raw = rng.integers(0, 256, (int(np.prod(shape)) * 2 + 1) * dtype.itemsize, dtype=np.uint8)
    a = np.frombuffer(raw.tobytes(), dtype, int(np.prod(shape)) * 2).copy()
    if dtype.kind == "b":
        a = a.view(np.uint8) % 2 == 1
    if dtype.kind in "fc":
        a = np.nan_to_num(a)
    if dtype.kind == "U":  # code points a str can hold and UTF-8 can write (no surrogates)
        a = (a.view(np.uint32) % 0xD800).view(dtype)
    a = a[::2].reshape(shape) if rng.random() < 0.5 else a[: len(a) // 2].reshape(shape)
    return np.asfortranarray(a) if rng.random() < 0.3 else a


def tree(rng: np.random.Generator, depth: int = 0) -> Any:
    """Returns a random Value: a scalar, or a container of Values."""
    pick = rng.integers(0, 3 if depth > 3 else 9)
    if pick < 3:
        return scalar(rng)
    items = [tree(rng, depth + 1) for _ in range(rng.integers(0, 5))]
    keys = [scalar(rng) for _ in items]
    if pick == 3:
        return items
    if pick == 4:
        return {str(k): v for k, v in zip(keys, items, strict=True)}
    if pick == 5:
        return tuple(items)
    if pick == 6:  # a Pairs map (keys of other types)
        return {k: v for k, v in zip(keys, items, strict=True) if hashable(k)}
    if pick == 7:
        return {k for k in keys if hashable(k)} if rng.random() < 0.5 else frozenset()
    return frozenset(k for k in keys if hashable(k))


def hashable(k: Any) -> bool:
    try:
        hash(k)
    except TypeError:
        return False
    return not isinstance(k, float) or not math.isnan(k)  # NaN: not equal to itself


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types: floats bit for bit, arrays by dtype, shape and bytes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, np.ndarray | np.generic):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return same(list(a.items()), list(b.items()))
    if isinstance(a, set | frozenset):  # NaN hashes by identity: orders may differ
        return sorted(map(repr, a)) == sorted(map(repr, b))
    if a is HITS or isinstance(a, type(HITS) | type(SCHEMA)):
        return repr(a) == repr(b)
    return bool(a == b)


def written(value: Any) -> tuple[str, bytes | None]:
    try:
        return "", wire.encode_value(value)
    except Exception as exc:  # fastavro's refusals: ValueError, TypeError, ...
        return type(exc).__name__, None


def by_fastavro(value: Any) -> tuple[str, bytes | None]:
    try:
        return "", fastavro_bytes(value)
    except Exception as exc:
        return type(exc).__name__, None


@pytest.mark.parametrize("seed", range(4))
def test_random_values_are_written_and_read_as_fastavro_does(seed):
    rng = np.random.default_rng(seed)
    for _ in range(600):
        value = tree(rng)
        got, want = written(value), by_fastavro(value)
        assert got[1] == want[1] and bool(got[0]) == bool(want[0]), value
        if got[1] is not None:
            assert same(wire.decode_value(got[1]), fastavro_value(got[1])), value


def read_or_refused(data: bytes) -> tuple[bool, Any]:
    try:
        return True, valuebytes.read(data)[0]
    except InvalidArgument:
        return False, None


def fastavro_or_failed(data: bytes) -> tuple[bool, Any]:
    try:
        return True, fastavro_value(data)
    except Exception:
        return False, None


@pytest.mark.parametrize("seed", range(3))
def test_corrupted_values_read_as_fastavro_reads_them_or_are_refused(seed):
    rng = np.random.default_rng(50 + seed)
    for _ in range(400):
        data = written(tree(rng))[1]
        if not data:
            continue
        for _ in range(10):
            b = bytearray(data)
            at = int(rng.integers(0, len(b)))
            if rng.random() < 0.4:
                del b[at:]
            else:
                b[at] = [0, 1, 2, 0x7F, 0x80, 0xFF, int(rng.integers(0, 256))][rng.integers(7)]
            ok, got = read_or_refused(bytes(b))
            fast_ok, want = fastavro_or_failed(bytes(b))
            if ok:  # what valuebytes reads is what fastavro reads
                assert fast_ok and same(got, want), bytes(b).hex()


def argument(rng: np.random.Generator, t: Any) -> Any:
    """Returns a random argument of Avro type `t` (a method's), in range or not."""
    if t == VALUE:
        return tree(rng)
    if t == LONGS:
        return [scalar_int(rng) for _ in range(rng.integers(0, 4))]
    if t in (LONG, INT):
        return scalar_int(rng) if rng.random() < 0.8 else np.int64(rng.integers(-9, 9))
    if t == DOUBLE:
        return [rng.standard_normal(), math.nan, 2**60 + 1, 3, -0.0][rng.integers(5)]
    if t == STRING:
        return "".join(TEXTS[i] for i in rng.integers(0, len(TEXTS) - 1, rng.integers(0, 5)))
    if t == BOOL:
        return bool(rng.integers(0, 2))
    if isinstance(t, list):  # ["null", T]
        return None if rng.random() < 0.3 else argument(rng, t[1])
    return [argument(rng, t["items"]) for _ in range(rng.integers(0, 3))]  # an array


def scalar_int(rng: np.random.Generator) -> int:
    if rng.random() < 0.3:
        return INT_EDGES[rng.integers(len(INT_EDGES))]
    return int(rng.integers(-(2**40), 2**40))


def old_request(service: str, m: Any, args: dict[str, Any]) -> tuple[str, bytes | None]:
    """Returns the request's bytes as fastavro wrote them for every argument, or the error."""
    try:
        datum = {name: wire._to_avro(t, args[name]) for name, t in m.args}
        return "", wire._write(wire._parsed(service, m.name, False), datum, m.name)
    except Exception as exc:
        return type(exc).__name__, None


def new_request(service: str, m: Any, args: dict[str, Any]) -> tuple[str, bytes | None]:
    try:
        return "", wire.encode_request(service, m, args)
    except Exception as exc:
        return type(exc).__name__, None


def test_random_requests_are_written_and_read_as_fastavro_does():
    rng = np.random.default_rng(11)
    methods = [(s, m) for s, service in SERVICES.items() for m in service.methods.values()]
    for _ in range(1500):
        service, m = methods[rng.integers(len(methods))]
        args = {name: argument(rng, t) for name, t in m.args}
        got, want = new_request(service, m, args), old_request(service, m, args)
        assert got[1] == want[1] and bool(got[0]) == bool(want[0]), (m.name, args)
        if got[1] is None:
            continue
        datum = wire._read(wire._parsed(service, m.name, False), got[1])
        old = {name: wire._from_avro(t, datum[name]) for name, t in m.args}
        assert same(wire.decode_request(service, m, got[1]), old), (m.name, args)
