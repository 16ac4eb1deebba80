"""Avro's encoding of an array's longs, written by protobuf's C encoder (upb).

A packed `repeated sint64` field's payload is exactly Avro's encoding of each long,
concatenated: zigzag, then 7 bits a byte, low first, the high bit set on every byte but a
value's last. The values reach that field without a Python int each: their little-endian
bytes are parsed as a packed `repeated sfixed64` field (a copy), copied into the sint64
field (the same 64-bit values in memory: one copy), and that field serialised.

The numpy encoder it replaces (rowswriter.varints until session 24) made ~10 operations
and temporaries per 1,000-value column, each letting go of the GIL; this one makes none and
keeps the GIL. Alone, alternated in one process (load 7, best of 5 / median): ids of a run
(3 bytes each) 7.3 / 14.8 µs against 19.7 / 34.7; tags 0..9 2.6 / 2.9 against 3.6 / 4.4;
random 64-bit values 15.4 / 27.0 against 67.8 / 85.3. Bytes identical: tests/schemas/
test_zigzag.py (a Python reference, the numpy encoder's digest).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _message_classes() -> tuple[Any, Any]:
    """Returns the message classes {repeated sint64 values = 1} and {repeated sfixed64
    values = 1}, both packed, from a descriptor pool of their own."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="vectorlog/schemas/zigzag.proto", package="vectorlog.zigzag", syntax="proto3"
    )
    for name, kind in (("Zigzag", _F.TYPE_SINT64), ("Fixed", _F.TYPE_SFIXED64)):
        field = proto.message_type.add(name=name).field.add(
            name="values", number=1, type=kind, label=_F.LABEL_REPEATED
        )
        field.options.packed = True
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return tuple(
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"vectorlog.zigzag.{n}"))
        for n in ("Zigzag", "Fixed")
    )


_ZIGZAG, _FIXED = _message_classes()
#: the key of field 1, length-delimited (a packed repeated field's)
_FIELD_1 = b"\x0a"


def _length(n: int) -> bytes:
    """Returns the varint of a non-negative length (protobuf's, not zigzag)."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag_varints(values: np.ndarray) -> bytes:
    """Returns Avro's encoding of each long of an integer array (any layout, any integer
    dtype a long holds), concatenated."""
    raw = values.astype("<i8", copy=False).tobytes()
    if not raw:
        return b""
    fixed = _FIXED.FromString(_FIELD_1 + _length(len(raw)) + raw)
    out = _ZIGZAG()
    out.values.extend(fixed.values)  # upb copies the int64 array: no Python int per value
    data: bytes = out.SerializeToString()
    head = 1  # the field's key, then its payload's length: a varint
    while data[head] & 0x80:
        head += 1
    return data[head + 1 :]
