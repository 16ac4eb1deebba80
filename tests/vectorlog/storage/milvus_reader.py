"""An independent reader of Milvus V1 binlogs and stats logs, for the tests.

Written from the format description (DESIGN.md section 5 and the README of
shared/fixtures/milvus-2.3.5-binlogs), never from vectorlog's writer: it imports nothing of
vectorlog. The tests read the real Milvus 2.3.5 files with it, then vectorlog's output, and
compare what it found.

Binlog: int32 magic 0xFFFABC; a descriptor event (17-byte header: u64 timestamp, i8 type,
i32 event length, i32 next position; then ids, start/end ts, payload type, 8 post-header
lengths, extras JSON); then data events (same header, u64 start ts, u64 end ts, a Parquet file).
Stats log: JSON PrimaryKeyStats; its bloom filter is bits-and-blooms v3 with murmur3 x64-128.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

MAGIC_BYTES = b"\xbc\xfa\xff\x00"
HEADER_SIZE = 17
DESCRIPTOR_FIXED_SIZE = 52


def _u64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 8], "little")


def _i64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 8], "little", signed=True)


def _i32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "little", signed=True)


@dataclass
class EventHeader:
    offset: int
    timestamp: int
    type_code: int
    event_length: int
    next_position: int


@dataclass
class Event:
    header: EventHeader
    start_ts: int
    end_ts: int
    payload: bytes


@dataclass
class Binlog:
    descriptor: dict[str, Any]
    events: list[Event]


def read_header(data: bytes, offset: int) -> EventHeader:
    """Returns the 17-byte event header at `offset`."""
    assert len(data) >= offset + HEADER_SIZE, f"truncated event header at {offset}"
    type_code = int.from_bytes(data[offset + 8 : offset + 9], "little", signed=True)
    return EventHeader(
        offset=offset,
        timestamp=_u64(data, offset),
        type_code=type_code,
        event_length=_i32(data, offset + 9),
        next_position=_i32(data, offset + 13),
    )


def read_descriptor(data: bytes, header: EventHeader) -> dict[str, Any]:
    """Returns every field of the descriptor event (header fields included)."""
    at = header.offset + HEADER_SIZE
    lengths_at = at + DESCRIPTOR_FIXED_SIZE
    extra_length = _i32(data, lengths_at + 8)
    extras_raw = data[lengths_at + 12 : lengths_at + 12 + extra_length]
    return {
        "timestamp": header.timestamp,
        "type_code": header.type_code,
        "event_length": header.event_length,
        "next_position": header.next_position,
        "collection_id": _i64(data, at),
        "partition_id": _i64(data, at + 8),
        "segment_id": _i64(data, at + 16),
        "field_id": _i64(data, at + 24),
        "start_ts": _u64(data, at + 32),
        "end_ts": _u64(data, at + 40),
        "payload_data_type": _i32(data, at + 48),
        "post_header_lengths": list(data[lengths_at : lengths_at + 8]),
        "extra_length": extra_length,
        "extras_raw": extras_raw,
        "extras": json.loads(extras_raw) if extras_raw else {},
    }


def read_binlog(data: bytes) -> Binlog:
    """Returns the descriptor and every event, following next positions to the file's end."""
    assert data[:4] == MAGIC_BYTES, f"bad magic {data[:4].hex()}"
    header = read_header(data, 4)
    assert header.type_code == 0, "the first event must be the descriptor"
    descriptor = read_descriptor(data, header)
    events, position = [], header.next_position
    while position < len(data):
        event_header = read_header(data, position)
        end = position + event_header.event_length
        assert end <= len(data), f"event at {position} runs past the file's end"
        start_ts = _u64(data, position + HEADER_SIZE)
        end_ts = _u64(data, position + HEADER_SIZE + 8)
        payload = data[position + HEADER_SIZE + 16 : end]
        events.append(Event(event_header, start_ts, end_ts, payload))
        position = event_header.next_position
    assert position == len(data), f"last next position {position} != file size {len(data)}"
    return Binlog(descriptor, events)


def payload_table(payload: bytes) -> pa.Table:
    """Returns the Parquet payload read with pyarrow."""
    assert payload[:4] == b"PAR1" and payload[-4:] == b"PAR1", "payload is not a Parquet file"
    return pq.read_table(pa.BufferReader(payload))


def parquet_facts(payload: bytes) -> dict[str, Any]:
    """Returns the Parquet facts Milvus's reader depends on (and a few it does not)."""
    meta = pq.ParquetFile(pa.BufferReader(payload)).metadata
    column = meta.schema.column(0)
    chunk = meta.row_group(0).column(0)
    arrow = meta.schema.to_arrow_schema()
    return {
        "num_row_groups": meta.num_row_groups,
        "num_columns": meta.num_columns,
        "num_rows": meta.num_rows,
        "column_name": column.name,
        "arrow_type": str(arrow.field(0).type),
        "nullable": arrow.field(0).nullable,
        "max_definition_level": column.max_definition_level,
        "physical_type": column.physical_type,
        "logical_type": str(column.logical_type),
        "converted_type": column.converted_type,
        "compression": chunk.compression,
        "encodings": sorted(set(chunk.encodings)),
        "dictionary_page": chunk.has_dictionary_page,
        "statistics": chunk.is_stats_set,
        "key_value_metadata": dict(meta.metadata or {}),  # Go writes an empty list, pyarrow none
        "format_version": meta.format_version,
    }


def decode_values(payload_data_type: int, payload: bytes) -> Any:
    """Returns the payload's values: numpy arrays for numbers, lists of str (VarChar/String)
    or bytes (JSON; Array: one protobuf schemapb.ScalarField per row), a (rows, dim) float32
    array for FloatVector, each row's bytes for Binary/Float16/BFloat16 vectors, {index:
    value} per row for SparseFloatVector."""
    column = payload_table(payload).column("val")
    if payload_data_type in (20, 21):
        return column.to_pylist()
    if payload_data_type in (22, 23):
        return [bytes(v) for v in column.to_pylist()]
    if payload_data_type == 101:
        rows = column.to_pylist()
        dim = len(rows[0]) // 4
        return np.frombuffer(b"".join(rows), dtype="<f4").reshape(len(rows), dim)
    if payload_data_type in (100, 102, 103):  # Binary, Float16, BFloat16: each row's bytes
        return [bytes(v) for v in column.to_pylist()]
    if payload_data_type == 104:  # SparseFloatVector: (uint32 index, float32 value) pairs
        return [_sparse_row(bytes(v)) for v in column.to_pylist()]
    if payload_data_type == 1:
        return np.array(column.to_pylist(), dtype=bool)
    return column.to_numpy()


def _sparse_row(row: bytes) -> dict[int, float]:
    """Returns one SparseFloatVector row (little-endian uint32 index, float32 value pairs)."""
    pairs = np.frombuffer(row, dtype=np.dtype([("i", "<u4"), ("v", "<f4")]))
    return dict(zip(pairs["i"].tolist(), pairs["v"].tolist(), strict=True))


def delete_records(payload: bytes) -> list[dict[str, Any]]:
    """Returns a delta log payload's rows, each JSON `{"pk":..,"ts":..,"pkType":..}`."""
    return [json.loads(row) for row in payload_table(payload).column("val").to_pylist()]


# ------------------------------------------------------------------------------ stats logs


def read_stats_log(data: bytes) -> Any:
    """Returns a stats log (a JSON object) or compound stats file (a JSON array)."""
    return json.loads(data)


def bloom_bits(bf: dict[str, Any]) -> list[int]:
    """Returns the filter's uint64 words, checking the bit count header against `m`."""
    raw = base64.urlsafe_b64decode(bf["b"])
    assert int.from_bytes(raw[:8], "big") == bf["m"], "bit count header != m"
    assert len(raw) == 8 + 8 * ((bf["m"] + 63) // 64), "word count does not match m"
    return [int.from_bytes(raw[i : i + 8], "big") for i in range(8, len(raw), 8)]


def bloom_contains(bf: dict[str, Any], key: bytes) -> bool:
    """Returns whether every one of the key's k bits is set (bits-and-blooms v3 locations)."""
    words, m, k = bloom_bits(bf), bf["m"], bf["k"]
    h1, h2 = mmh3.hash64(key, signed=False)
    h3, h4 = mmh3.hash64(key + b"\x01", signed=False)
    h = (h1, h2, h3, h4)
    for i in range(k):
        location = ((h[i % 2] + i * h[2 + ((i + (i % 2)) % 4) // 2]) % 2**64) % m
        if not (words[location >> 6] >> (location & 63)) & 1:
            return False
    return True


def int64_key(pk: int) -> bytes:
    """Returns an Int64 pk as Milvus hashes it: 8 bytes little-endian."""
    return pk.to_bytes(8, "little", signed=True)


def varchar_key(pk: str) -> bytes:
    """Returns a VarChar pk as Milvus hashes it: its UTF-8 bytes."""
    return pk.encode("utf-8")
