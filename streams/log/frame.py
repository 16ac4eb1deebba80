"""How the embedded log stores one record's key, headers and value in a RocksDB value.

    u32 key length (0xFFFFFFFF: no key) + key + value                  (every record)
    u32 0xFFFFFFFE + u16 header count + headers + the frame above      (a record with headers)
    a header: u16 name length + UTF-8 name + u32 value length + value

Records written before headers existed keep the first form, so old data dirs read unchanged.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from vectorlog.streams.errors import RecordDamaged
from vectorlog.streams.log.base import Headers

NO_KEY = 0xFFFFFFFF
HAS_HEADERS = 0xFFFFFFFE


def frame(key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]] = ()) -> bytes:
    """Returns the stored form of one record."""
    body = struct.pack(">I", NO_KEY if key is None else len(key)) + (key or b"") + value
    if not headers:
        return body
    parts = [struct.pack(">IH", HAS_HEADERS, len(headers))]
    for name, raw in headers:
        encoded = name.encode()
        parts.append(struct.pack(">H", len(encoded)) + encoded + struct.pack(">I", len(raw)) + raw)
    return b"".join(parts) + body


def unframe(data: bytes) -> tuple[bytes | None, bytes, Headers]:
    """Returns (key, value, headers) of a stored record. Raises RecordDamaged on a short frame."""
    try:
        (n,) = struct.unpack_from(">I", data)
        headers: Headers = ()
        if n == HAS_HEADERS:
            headers, pos = _headers(data)
            data = data[pos:]
            (n,) = struct.unpack_from(">I", data)
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordDamaged(str(exc)) from exc
    if n == NO_KEY:
        return None, data[4:], headers
    return data[4 : 4 + n], data[4 + n :], headers


def _headers(data: bytes) -> tuple[Headers, int]:
    (count,) = struct.unpack_from(">H", data, 4)
    pos, out = 6, []
    for _ in range(count):
        (ln,) = struct.unpack_from(">H", data, pos)
        name = data[pos + 2 : pos + 2 + ln].decode()
        (lv,) = struct.unpack_from(">I", data, pos + 2 + ln)
        start = pos + 6 + ln
        out.append((name, data[start : start + lv]))
        pos = start + lv
    return tuple(out), pos
