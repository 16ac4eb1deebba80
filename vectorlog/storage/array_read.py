"""ARRAY rows back from binlogs: the inverse of arrays.py `scalar_field_rows`, for the query
node's recovery. Each row is one protobuf `schemapb.ScalarField` whose oneof holds the
elements: bool_data (1), int_data (2: INT8/16/32), long_data (3), float_data (4), double_data
(5) or string_data (6), each a message whose field 1 repeats the elements.

The varints are parsed by hand, as arrays.py writes them, without a protobuf dependency.
Numbers may come packed (proto3's default, what Milvus and arrays.py write) or one by one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from vectorlog.core.errors import VectorlogError
from vectorlog.core.model import DataType

#: element type -> the ScalarField oneof field holding it
ONEOF_FIELD = {
    DataType.BOOL: 1,
    DataType.INT8: 2,
    DataType.INT16: 2,
    DataType.INT32: 2,
    DataType.INT64: 3,
    DataType.FLOAT: 4,
    DataType.DOUBLE: 5,
    DataType.VARCHAR: 6,
}
_BITS = {DataType.INT8: 8, DataType.INT16: 16, DataType.INT32: 32}
_FIXED = {4: (5, "<f4"), 5: (1, "<f8")}  # oneof field -> (unpacked wire type, numpy dtype)
_U64 = 1 << 64


class InvalidScalarField(VectorlogError):
    """Bytes are not a ScalarField of the expected element type; says what is wrong."""


def array_rows(rows: Iterable[bytes], element: DataType | None) -> list[list[Any]]:
    """Returns each ARRAY row (ScalarField bytes) as a Python list (see
    `scalar_field_values`). Raises InvalidScalarField naming the row's index."""
    out = []
    for index, row in enumerate(rows):
        try:
            out.append(scalar_field_values(row, element))
        except InvalidScalarField as exc:
            raise InvalidScalarField(f"ARRAY row {index}: {exc}") from exc
    return out


def scalar_field_values(data: bytes, element: DataType | None) -> list[Any]:
    """Returns the elements of one ScalarField message as a Python list: bool, int, float
    (a FLOAT element as its float32 value, as the query node holds it live) or str.
    `element` None takes whichever oneof field is set. Raises InvalidScalarField if `data`
    is not a ScalarField (of `element`, if given) or an int is out of the element's range."""
    try:
        return _decode(bytes(data), element)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise InvalidScalarField(f"{len(data)} B are not a ScalarField: {exc}") from exc


def _decode(data: bytes, element: DataType | None) -> list[Any]:
    """Returns the elements of the ScalarField `data`. Raises ValueError, IndexError."""
    if not data:
        return []  # no oneof field set
    tag, at = _varint(data, 0)
    length, at = _varint(data, at)
    field = tag >> 3
    if tag & 7 != 2 or at + length != len(data):
        raise ValueError(f"the oneof has tag {tag} and {length} B of {len(data) - at}")
    if element is not None and ONEOF_FIELD.get(element) != field:
        raise ValueError(f"oneof field {field} does not hold {element.value} elements")
    entries = _entries(data[at:], field)
    if field == 6:
        if any(wire != 2 for wire, _ in entries):
            raise ValueError("a string element that is not length-delimited")
        return [raw.decode() for _, raw in entries]
    if field in _FIXED:
        return _fixed(entries, field)
    if field in (1, 2, 3):
        return _integers(entries, field, element)
    raise ValueError(f"unknown ScalarField oneof field {field}")


def _entries(body: bytes, field: int) -> list[tuple[int, bytes]]:
    """Returns the (wire type, bytes) of each field-1 entry of the array message `body`."""
    out, at = [], 0
    while at < len(body):
        tag, at = _varint(body, at)
        wire = tag & 7
        if tag >> 3 != 1:
            raise ValueError(f"an entry with tag {tag} in oneof field {field}")
        if wire == 2:
            length, at = _varint(body, at)
        elif wire == 0:
            length = _varint(body, at)[1] - at
        elif wire in (1, 5):
            length = 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire} in oneof field {field}")
        if at + length > len(body):
            raise ValueError(f"an entry of {length} B at {at} runs past {len(body)} B")
        out.append((wire, body[at : at + length]))
        at += length
    return out


def _fixed(entries: list[tuple[int, bytes]], field: int) -> list[float]:
    """Returns FLOAT (4) or DOUBLE (5) elements, packed or one by one."""
    unpacked, dtype = _FIXED[field]
    if any(wire not in (2, unpacked) for wire, _ in entries):
        raise ValueError(f"a varint entry in float oneof field {field}")
    raw = b"".join(chunk for _, chunk in entries)
    values = np.frombuffer(raw, dtype=dtype)  # ValueError if not a multiple of the width
    return values.tolist()  # a FLOAT as its float32 value, as the live replica holds it


def _integers(entries: list[tuple[int, bytes]], field: int, element: DataType | None) -> list[Any]:
    """Returns BOOL (1), int32 (2) or int64 (3) elements, packed or one by one; a negative
    number is a varint of its 64-bit two's complement."""
    values: list[int] = []
    for wire, chunk in entries:
        if wire not in (0, 2):
            raise ValueError(f"a fixed-width entry in integer oneof field {field}")
        values.extend(chunk if max(chunk, default=0) < 0x80 else _varints(chunk))  # 1-B fast
    if field == 1:
        return [v != 0 for v in values]
    negative = values and max(values) >> 63
    signed = [v - _U64 if v >> 63 else v for v in values] if negative else values
    bits = 64 if field == 3 else _BITS.get(element or DataType.INT32, 32)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if signed and not low <= min(signed) <= max(signed) <= high:
        raise ValueError(f"an element outside int{bits}: {min(signed)}..{max(signed)}")
    return signed


def _varints(raw: bytes) -> list[int]:
    """Returns the consecutive varints filling `raw`. Raises ValueError for a truncated one,
    one longer than 10 bytes or one above 64 bits."""
    out, value, shift = [], 0, 0
    for byte in raw:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            out.append(value)
            value = shift = 0
        elif (shift := shift + 7) > 63:
            raise ValueError("a varint longer than 10 bytes")
    if shift:
        raise ValueError(f"a varint cut at the end of {len(raw)} B")
    if out and max(out) >= _U64:
        raise ValueError(f"a varint of {max(out).bit_length()} bits")
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """Returns the varint at `at` and the position after it. Raises IndexError past the end,
    ValueError for one longer than 10 bytes or above 64 bits."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value >= _U64:
                raise ValueError(f"a varint of {value.bit_length()} bits")
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")
