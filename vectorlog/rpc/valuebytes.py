"""A `Value` (values.py) written to and read from its Avro bytes directly, without fastavro's
generic writer and reader of the recursive union and without the intermediate datum of
`values.encode` / `values.decode`: the same bytes as fastavro writes (one block per array
and map, as fastavro's writer), and the same Python values as `values.decode` returns.

Why: a ShardRead (the proxy's fan-out to the query nodes, runners.fanout) carries its
arguments and its answer as Values; through fastavro each answer cost about 45 µs to write
and 33 µs to read on this machine, most of it fastavro's union resolution, paid by the query
node and the proxy for every search batch; written and read here, 13 and 20 µs (the commit's
message has the measurements). A value this module does not write itself (a subclass of a
primitive type, whose union branch fastavro resolves by validation) raises `Generic`; the
caller then writes it with fastavro (wire.py), as before.
"""

from __future__ import annotations

import enum
import struct
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument, VectorlogError
from vectorlog.rpc.registry import ENUMS, OBJECTS, object_fields
from vectorlog.rpc.values import INT64
from vectorlog.schemas.rowswriter import put_long

_DOUBLE = struct.Struct("<d")
_LO, _HI = INT64
_MASK64 = (1 << 64) - 1
# the union branches of Value.v (values.VALUE_SCHEMA), as the zigzag byte that names each
_NULL, _TRUE, _FALSE = b"\x00", b"\x02\x01", b"\x02\x00"
_LONG, _DBL, _STR, _BYTES, _ARRAY, _MAP = 4, 6, 8, 10, 12, 14
_TUPLE, _SET, _PAIRS, _BIGINT, _NDARRAY, _ENUM, _OBJECT = 16, 18, 20, 22, 24, 26, 28


class Generic(VectorlogError):
    """A value this module leaves to fastavro (wire.py catches it: never raised to its
    callers)."""


def write(value: Any) -> bytes:
    """Returns the Avro bytes of `value` as a Value. Raises Generic (write it with
    fastavro), InvalidArgument for a value a Value cannot carry."""
    out = bytearray()
    try:
        _put(out, value)
    except (UnicodeEncodeError, OverflowError) as exc:
        raise Generic from exc
    return bytes(out)


def _text(out: bytearray, s: str) -> None:
    b = s.encode()
    put_long(out, len(b))
    out += b


def _put(out: bytearray, value: Any) -> None:
    """Appends `value` as values.encode and fastavro's writer would write it."""
    kind = type(value)
    if kind is int:
        if _LO <= value <= _HI:
            out.append(_LONG)
            put_long(out, value)
        else:
            out.append(_BIGINT)
            _text(out, str(value))
    elif kind is str:
        out.append(_STR)
        _text(out, value)
    elif value is None:
        out += _NULL
    elif kind is bool:
        out += _TRUE if value else _FALSE
    elif kind is float:
        out.append(_DBL)
        out += _DOUBLE.pack(value)
    elif kind is list:
        out.append(_ARRAY)
        _items(out, value)
    elif kind is dict:
        _mapping(out, value)
    elif kind is np.ndarray:
        _ndarray(out, value, False)
    else:
        _other(out, value)


def _items(out: bytearray, items: Any) -> None:
    """Appends an array of Values (one block, as fastavro writes it)."""
    if items:
        put_long(out, len(items))
        for v in items:
            _put(out, v)
    out.append(0)


def _mapping(out: bytearray, value: dict[Any, Any]) -> None:
    if all(type(k) is str for k in value):
        out.append(_MAP)
        if value:
            put_long(out, len(value))
            for k, v in value.items():
                _text(out, k)
                _put(out, v)
        out.append(0)
        return
    out.append(_PAIRS)
    _items(out, list(value))
    _items(out, list(value.values()))


def _ndarray(out: bytearray, a: np.ndarray, scalar: bool) -> None:
    if a.dtype.kind == "O":
        raise InvalidArgument("an object numpy array cannot cross an RPC; send a list")
    out.append(_NDARRAY)
    _text(out, a.dtype.str)
    _items_long(out, a.shape)
    data = np.ascontiguousarray(a).tobytes()
    put_long(out, len(data))
    out += data
    out += b"\x01" if scalar else b"\x00"


def _items_long(out: bytearray, ns: Any) -> None:
    if ns:
        put_long(out, len(ns))
        for n in ns:
            put_long(out, int(n))
    out.append(0)


def _other(out: bytearray, value: Any) -> None:
    """Appends the values `_put` does not take first, in values.encode's order of checks:
    numpy scalars, bytes, arrays' subclasses, tuples, sets, registered enums and objects;
    raises Generic for the subclasses of the other types (fastavro resolves their branch)."""
    kind = type(value)
    if isinstance(value, np.generic):
        _ndarray(out, np.asarray(value), True)
    elif kind is bytes:
        out.append(_BYTES)
        put_long(out, len(value))
        out += value
    elif isinstance(value, bool | int | float | str | bytes):
        raise Generic(kind.__name__)  # a subclass: fastavro resolves its branch
    elif isinstance(value, np.ndarray):
        _ndarray(out, value, False)
    elif kind is tuple:
        out.append(_TUPLE)
        _items(out, value)
    elif kind is set or kind is frozenset:
        out.append(_SET)
        _items(out, list(value))
        out += b"\x01" if kind is frozenset else b"\x00"
    elif isinstance(value, list | tuple | set | frozenset | dict):
        raise Generic(kind.__name__)
    elif isinstance(value, enum.Enum) and ENUMS.get(kind.__name__) is kind:
        out.append(_ENUM)
        _text(out, kind.__name__)
        _put(out, value.value)
    elif OBJECTS.get(kind.__name__) is kind:
        out.append(_OBJECT)
        _text(out, kind.__name__)
        _mapping_fields(out, object_fields(value))
    else:
        raise InvalidArgument(f"a {kind.__name__} cannot cross an RPC (not a registered type)")


def _mapping_fields(out: bytearray, fields: dict[str, Any]) -> None:
    if fields:
        put_long(out, len(fields))
        for k, v in fields.items():
            _text(out, k)
            _put(out, v)
    out.append(0)


# -- reading ------------------------------------------------------------------------------
class Reader:
    """Reads Values from `data` from `pos` on."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def long(self) -> int:
        data, pos = self.data, self.pos
        b = data[pos]
        pos += 1
        if b < 0x80:  # most: a union branch, a count, a small number
            self.pos = pos
            return (b >> 1) ^ -(b & 1)
        n, shift = b & 0x7F, 7
        while b & 0x80:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
        if shift > 63:  # ten bytes: fastavro keeps the low 64 bits; more: not a long
            if shift > 70:
                raise ValueError("a long of more than 10 bytes")
            n &= _MASK64
        self.pos = pos
        return (n >> 1) ^ -(n & 1)

    def raw(self) -> bytes:
        n = self.long()
        start = self.pos
        end = start + n
        if n < 0 or end > len(self.data):
            raise ValueError("a length past the end")
        self.pos = end
        return self.data[start:end]

    def text(self) -> str:
        return self.raw().decode()

    def flag(self) -> bool:
        b = self.data[self.pos]
        self.pos += 1
        return b != 0

    def count(self) -> int:
        """Returns the item count of the next array or map block (0: the end)."""
        n = self.long()
        if n < 0:  # a block with its size in bytes (fastavro never writes one)
            self.long()
            n = -n
        return n

    def values(self) -> list[Any]:
        out: list[Any] = []
        while n := self.count():
            out += [self.value() for _ in range(n)]
        return out

    def longs(self) -> list[int]:
        out: list[int] = []
        while n := self.count():
            out += [self.long() for _ in range(n)]
        return out

    def mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while n := self.count():
            for _ in range(n):
                k = self.text()
                out[k] = self.value()
        return out

    def value(self) -> Any:
        branch = self.long()
        if branch == 2:
            return self.long()
        if branch == 4:
            return self.text()
        if branch == 0:
            return None
        if branch == 1:
            return self.flag()
        if branch == 6:
            return self.values()
        if branch == 7:
            return self.mapping()
        return _READERS[branch](self)

    def double(self) -> float:
        start = self.pos
        self.pos = start + 8
        (x,) = _DOUBLE.unpack_from(self.data, start)
        return float(x)


def _ndarray_of(r: Reader) -> Any:
    dtype, shape = np.dtype(r.text()), r.longs()
    a = np.frombuffer(r.raw(), dtype=dtype).reshape(shape).copy()
    return a[()] if r.flag() else a


def _enum_of(r: Reader) -> Any:
    name = r.text()
    kind = ENUMS.get(name)
    if kind is None:
        raise InvalidArgument(f"unknown enum type {name!r} in an RPC payload")
    return kind(r.value())


def _object_of(r: Reader) -> Any:
    name = r.text()
    kind = OBJECTS.get(name)
    if kind is None:
        raise InvalidArgument(f"unknown object type {name!r} in an RPC payload")
    return kind(**r.mapping())


def _set_of(r: Reader) -> Any:
    items = r.values()
    return frozenset(items) if r.flag() else set(items)


def _pairs_of(r: Reader) -> Any:
    keys, vals = r.values(), r.values()
    if len(keys) != len(vals):
        raise ValueError("a Pairs of unequal lengths")
    return dict(zip(keys, vals, strict=True))


_READERS: dict[int, Any] = {
    3: Reader.double,
    5: Reader.raw,
    8: lambda r: tuple(r.values()),
    9: _set_of,
    10: _pairs_of,
    11: lambda r: int(r.text()),
    12: _ndarray_of,
    13: _enum_of,
    14: _object_of,
}


def read(data: bytes, pos: int = 0) -> tuple[Any, int]:
    """Returns (the Value at `pos` of `data`, the position after it), as values.decode
    returns it. Raises InvalidArgument for bytes that are not a Value, or an unknown enum
    or object type."""
    r = Reader(data, pos)
    try:
        return r.value(), r.pos
    except (IndexError, KeyError, ValueError, TypeError, struct.error) as exc:
        if isinstance(exc, InvalidArgument):
            raise
        raise InvalidArgument(f"an RPC payload is not a Value: {exc}") from None
