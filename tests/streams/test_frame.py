"""The embedded log's record frame (streams/log/frame.py): old frames read, damage is named."""

from __future__ import annotations

import struct

import pytest

from vectorlog.streams.errors import RecordDamaged
from vectorlog.streams.log.frame import frame, unframe


def test_frames_written_before_headers_existed_still_read() -> None:
    old_keyless = struct.pack(">I", 0xFFFFFFFF) + b"value"
    old_keyed = struct.pack(">I", 3) + b"keyvalue"
    assert unframe(old_keyless) == (None, b"value", ())
    assert unframe(old_keyed) == (b"key", b"value", ())


def test_a_frame_without_headers_is_the_old_frame() -> None:
    assert frame(b"key", b"value") == struct.pack(">I", 3) + b"keyvalue"


def test_unicode_header_names_round_trip() -> None:
    headers = (("kollektion-é", b"b\x00oks"),)
    assert unframe(frame(None, b"v", headers)) == (None, b"v", headers)


def test_a_truncated_header_block_is_reported_as_damage() -> None:
    damaged = frame(b"k", b"v", (("collection", b"books"),))[:7]
    with pytest.raises(RecordDamaged, match="damaged"):
        unframe(damaged)


@pytest.mark.parametrize("key", [None, b"", b"pk-7"])
@pytest.mark.parametrize("headers", [(), (("batch", b"\x00\x01"), ("empty", b""))])
def test_every_frame_reads_back_its_key_value_and_headers(key, headers) -> None:
    value = bytes(range(256)) * 800  # a large value: one copy of it read back whole
    assert unframe(frame(key, value, headers)) == (key, value, headers)
    assert unframe(frame(key, b"", headers)) == (key, b"", headers)
