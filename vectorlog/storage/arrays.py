"""ARRAY rows as Milvus writes them in binlogs: each row one protobuf `schemapb.ScalarField`
(proto.Marshal bytes), its oneof holding the elements: bool_data (1), int_data (2: INT8/16/32),
long_data (3), float_data (4), double_data (5) or string_data (6), each a message whose field
1 is the repeated elements (numbers packed, as proto3 writes them; strings one by one)."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from typing import Any

from vectorlog.core.model import DataType
from vectorlog.storage.errors import InvalidPayload

_VARINT_TYPES = {
    DataType.BOOL: 1,
    DataType.INT8: 2,
    DataType.INT16: 2,
    DataType.INT32: 2,
    DataType.INT64: 3,
}
_FIXED_TYPES = {DataType.FLOAT: (4, "<f"), DataType.DOUBLE: (5, "<d")}
_STRING_FIELD = 6


def varint(n: int) -> bytes:
    """Returns `n` as a protobuf varint (a negative one as its 64-bit two's complement)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _delimited(field: int, body: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(body)) + body


def _packed(values: Iterable[bytes]) -> bytes:
    body = b"".join(values)
    return _delimited(1, body) if body else b""


def _encoder(element: DataType) -> Callable[[list[Any]], bytes]:
    """Returns the function giving one row's ScalarField bytes for `element` elements."""
    if element in _VARINT_TYPES:
        field = _VARINT_TYPES[element]
        return lambda row: _delimited(field, _packed(varint(int(v)) for v in row))
    if element in _FIXED_TYPES:
        field, fmt = _FIXED_TYPES[element]
        return lambda row: _delimited(field, _packed(struct.pack(fmt, v) for v in row))
    if element is DataType.VARCHAR:
        return lambda row: _delimited(
            _STRING_FIELD, b"".join(_delimited(1, v.encode()) for v in row)
        )
    raise InvalidPayload(f"ARRAY of {element!r} has no binlog form")


def scalar_field_rows(element: DataType | None, texts: Iterable[Any]) -> list[bytes]:
    """Returns each ARRAY row (a JSON array text, as the log carries it, or a list) as
    Milvus's ScalarField bytes. Raises InvalidPayload for an unknown element type or a row
    that is not a list of them."""
    if element is None:
        raise InvalidPayload("an ARRAY field without an element_type has no binlog form")
    encode = _encoder(element)
    out = []
    for text in texts:
        row = json.loads(text) if isinstance(text, (str, bytes)) else text
        if not isinstance(row, list):
            raise InvalidPayload(f"an ARRAY row is a JSON array, not {text!r:.60}")
        try:
            out.append(encode(row))
        except (TypeError, ValueError, AttributeError, struct.error) as exc:
            raise InvalidPayload(f"an ARRAY row of {element.value} cannot be {row!r:.60}") from exc
    return out
