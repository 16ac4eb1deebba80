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
    """Returns the stored form of one record (one join: the value copied once)."""
    parts = [struct.pack(">IH", HAS_HEADERS, len(headers))] if headers else []
    for name, raw in headers:
        encoded = name.encode()
        parts.append(struct.pack(">H", len(encoded)) + encoded + struct.pack(">I", len(raw)) + raw)
    parts += [struct.pack(">I", NO_KEY if key is None else len(key)), key or b"", value]
    return b"".join(parts)


def unframe(data: bytes) -> tuple[bytes | None, bytes, Headers]:
    """Returns (key, value, headers) of a stored record. Raises RecordDamaged on a short frame.
    The value is the one copy made of its bytes (a record of a 1,000-row insert is ~200 KB,
    read by every consumer of its topic)."""
    try:
        (n,) = struct.unpack_from(">I", data)
        headers: Headers = ()
        pos = 0
        if n == HAS_HEADERS:
            headers, pos = _headers(data)
            (n,) = struct.unpack_from(">I", data, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordDamaged(str(exc)) from exc
    if n == NO_KEY:
        return None, data[pos + 4 :], headers
    return data[pos + 4 : pos + 4 + n], data[pos + 4 + n :], headers


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
