"""Writer of Milvus's V1 binlog format, byte for byte as Milvus 2.3.5's internal/storage writes it.

A binlog (little-endian throughout; DESIGN.md section 5, the fixtures' README):

    int32 magic 0xFFFABC (bytes BC FA FF 00)
    descriptor event: 17-byte header (u64 timestamp, i8 type 0, i32 event length,
        i32 next position), then i64 collection, partition, segment and field ids, u64 start
        and end ts, i32 payload data type (a schemapb code), 8 x u8 post-header lengths
        [52,16,16,16,16,16,16,16], i32 extras length and the extras: compact JSON
        {"original_size":"N"}
    data events: 17-byte header (type 1 insert, 2 delete, 3-6 DDL; next position = the
        absolute offset after the event), u64 start ts, u64 end ts, then a whole Parquet file
        with one required column `val` (ZSTD, dictionary encoding, one row group; see
        payload.py for the Arrow types)

Insert and delta binlogs hold exactly ONE data event (Milvus's readers read only the first);
the DDL binlogs follow Milvus's DataDefinitionCodec (see `ddl_binlogs`). Every header carries
`write_ts`, the TSO at write time (logical 0 in Milvus), not a data timestamp.

`go_json` writes JSON as Go's encoding/json does (Milvus's delete rows and stats logs).
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import pyarrow as pa

from vectorlog.storage.errors import InvalidPayload
from vectorlog.storage.payload import (
    DataTypeCode,
    parquet_buffer,
    parquet_payload,
    payload_array,
    payload_size,
)
from vectorlog.storage.payload import data_type as _data_type

__all__ = [
    "DDL_EVENT_TYPES",
    "MAGIC",
    "NO_ID",
    "POST_HEADER_LENGTHS",
    "DataTypeCode",
    "EventTypeCode",
    "ddl_binlogs",
    "delete_rows",
    "delta_binlog",
    "go_json",
    "insert_binlog",
    "original_size",
    "parquet_payload",
    "payload_array",
]


class EventTypeCode(IntEnum):
    """The event type codes of Milvus's binlog event headers."""

    DESCRIPTOR = 0
    INSERT = 1
    DELETE = 2
    CREATE_COLLECTION = 3
    DROP_COLLECTION = 4
    CREATE_PARTITION = 5
    DROP_PARTITION = 6
    INDEX_FILE = 7


MAGIC = 0xFFFABC
#: Fixed-part sizes of each event type's data, indexed by EventTypeCode (descriptor: 52).
POST_HEADER_LENGTHS = bytes([52, 16, 16, 16, 16, 16, 16, 16])
#: The id Milvus writes for an id a binlog has no use for (DDL binlogs' partition/segment/field,
#: delta logs' field).
NO_ID = -1
DDL_EVENT_TYPES = frozenset(
    {
        EventTypeCode.CREATE_COLLECTION,
        EventTypeCode.DROP_COLLECTION,
        EventTypeCode.CREATE_PARTITION,
        EventTypeCode.DROP_PARTITION,
    }
)

_MAGIC = struct.Struct("<i")
_HEADER = struct.Struct("<Qbii")  # timestamp, type code, event length, next position: 17 B
_DESCRIPTOR_FIXED = struct.Struct("<qqqqQQi")  # 4 ids, start ts, end ts, payload type: 52 B
_EVENT_FIXED = struct.Struct("<QQ")  # start ts, end ts: 16 B
_I32 = struct.Struct("<i")
_I32_MAX = 2**31 - 1
_I64 = (-(2**63), 2**63)
_U64_NONZERO = (1, 2**64)


@dataclass(frozen=True)
class _Descriptor:
    collection_id: int
    partition_id: int
    segment_id: int
    field_id: int
    start_ts: int
    end_ts: int
    payload_type: DataTypeCode
    original_size: int
    nullable: bool = False


@dataclass(frozen=True)
class _Event:
    type: EventTypeCode
    start_ts: int
    end_ts: int
    payload: bytes | pa.Buffer  # a Parquet file (parquet_buffer: maybe not copied to bytes)


# ---------------------------------------------------------------------------------- public API


def insert_binlog(
    *,
    collection_id: int,
    partition_id: int,
    segment_id: int,
    field_id: int,
    data_type: DataTypeCode,
    values: Any,
    start_ts: int,
    end_ts: int,
    write_ts: int,
    dim: int | None = None,
    nullable: bool = False,
) -> bytes:
    """Returns the insert binlog of one field's column: one Insert event of `values`.
    A `nullable` field's column (None in its null rows) is an optional Parquet column and
    its descriptor's extras say `"nullable":true`, as Milvus 2.5 writes them.

    `values`: a numpy array (numbers, bools; FLOAT_VECTOR a (n, dim) float32 array, BINARY_VECTOR
    a (n, dim/8) uint8 array), a list of str (VARCHAR/STRING) or of bytes or str (JSON, raw JSON
    text). `start_ts`/`end_ts`: the min/max data timestamps of the rows. Raises InvalidPayload if
    the values do not fit `data_type`, are empty, or an id or timestamp is out of range.
    """
    data_type = _data_type(data_type)
    array = payload_array(data_type, values, dim)
    start_ts, end_ts = _ts_range(start_ts, end_ts)
    descriptor = _Descriptor(
        _int("collection_id", collection_id, _I64),
        _int("partition_id", partition_id, _I64),
        _int("segment_id", segment_id, _I64),
        _int("field_id", field_id, _I64),
        start_ts,
        end_ts,
        data_type,
        payload_size(data_type, array),
        nullable,
    )
    event = _Event(EventTypeCode.INSERT, start_ts, end_ts, parquet_buffer(array, nullable))
    return _binlog(descriptor, [event], write_ts)


def delta_binlog(
    *,
    collection_id: int,
    partition_id: int,
    segment_id: int,
    pks: Sequence[int] | Sequence[str],
    tss: Sequence[int],
    pk_type: DataTypeCode,
    write_ts: int,
) -> bytes:
    """Returns the delta binlog (delete log) of a segment: one Delete event, a String column of
    `{"pk":..,"ts":..,"pkType":..}` rows; field id -1, start/end ts = min/max of `tss`.

    Raises InvalidPayload if `pks` and `tss` differ in length or are empty, or a pk does not
    fit `pk_type` (INT64: int64 ints, VARCHAR: str).
    """
    rows = delete_rows(pks, tss, pk_type)
    start_ts, end_ts = _ts_range(min(tss), max(tss))
    descriptor = _Descriptor(
        _int("collection_id", collection_id, _I64),
        _int("partition_id", partition_id, _I64),
        _int("segment_id", segment_id, _I64),
        NO_ID,
        start_ts,
        end_ts,
        DataTypeCode.STRING,
        sum(len(row) for row in rows),
    )
    array = pa.array([row.decode() for row in rows], pa.string())
    event = _Event(EventTypeCode.DELETE, start_ts, end_ts, parquet_payload(array))
    return _binlog(descriptor, [event], write_ts)


def ddl_binlogs(
    *, collection_id: int, events: list[tuple[int, EventTypeCode, str]], write_ts: int
) -> tuple[bytes, bytes]:
    """Returns the (ts, ddl) binlogs of a collection's DDL requests, as Milvus's
    DataDefinitionCodec.Serialize writes them (paths `data_definition_log/{coll}/ts|ddl/{idx}`).

    `events`: (timestamp, type 3-6, request string) in timestamp order. The `ts` binlog has
    payload Int64 and ONE CreateCollection-type event holding every timestamp (original_size
    8 per ts); the `ddl` binlog has payload String and one event per request, of its type, with
    start = end = its timestamp (original_size = total request bytes). Both descriptors carry
    the collection id, -1 for partition/segment/field, and start/end = first/last timestamp.
    Raises InvalidPayload on no events, an unknown type, or timestamps out of order.
    """
    if not events:
        raise InvalidPayload("ddl_binlogs needs at least one DDL event")
    tss = [_int("DDL timestamp", ts, (1, 2**63)) for ts, _, _ in events]
    if tss != sorted(tss):
        raise InvalidPayload(f"DDL timestamps must not decrease: {tss}")
    kinds = [_ddl_type(kind) for _, kind, _ in events]
    requests = [_utf8("DDL request", request) for _, _, request in events]
    coll = _int("collection_id", collection_id, _I64)
    return _ddl_ts_binlog(coll, tss, write_ts), _ddl_requests_binlog(
        coll, list(zip(tss, kinds, requests, strict=True)), write_ts
    )


def _ddl_ts_binlog(coll: int, tss: list[int], write_ts: int) -> bytes:
    """Returns the `ts` binlog: Int64 payload, one CreateCollection event of every ts."""
    first, last = tss[0], tss[-1]
    descriptor = _Descriptor(
        coll, NO_ID, NO_ID, NO_ID, first, last, DataTypeCode.INT64, 8 * len(tss)
    )
    payload = parquet_payload(pa.array(np.asarray(tss, dtype=np.int64)))
    return _binlog(
        descriptor, [_Event(EventTypeCode.CREATE_COLLECTION, first, last, payload)], write_ts
    )


def _ddl_requests_binlog(
    coll: int, events: list[tuple[int, EventTypeCode, bytes]], write_ts: int
) -> bytes:
    """Returns the `ddl` binlog: String payload, one event per request, of its type."""
    size = sum(len(request) for _, _, request in events)
    first, last = events[0][0], events[-1][0]
    descriptor = _Descriptor(coll, NO_ID, NO_ID, NO_ID, first, last, DataTypeCode.STRING, size)
    data_events = [
        _Event(kind, ts, ts, parquet_payload(pa.array([request.decode()], pa.string())))
        for ts, kind, request in events
    ]
    return _binlog(descriptor, data_events, write_ts)


def original_size(data_type: DataTypeCode, values: Any, dim: int | None = None) -> int:
    """Returns the `original_size` Milvus records for a column of `values`: rows x width for
    fixed-size types, byte lengths + 16 per row for VarChar/String/JSON, rows x dim x 4 + 4 for
    FloatVector (rows x dim / 8 + 4 for BinaryVector). Raises InvalidPayload like insert_binlog.
    """
    data_type = _data_type(data_type)
    return payload_size(data_type, payload_array(data_type, values, dim))


def delete_rows(
    pks: Sequence[int] | Sequence[str], tss: Sequence[int], pk_type: Any
) -> list[bytes]:
    """Returns the delta log rows, each `{"pk":..,"ts":..,"pkType":..}` as Go's encoding/json
    writes Milvus's DeleteLog (UTF-8). Raises InvalidPayload as `delta_binlog` does."""
    pk_type = _data_type(pk_type)
    if len(pks) != len(tss) or len(pks) == 0:
        raise InvalidPayload(
            f"a delta log needs as many pks as tss, at least one: {len(pks)}/{len(tss)}"
        )
    if pk_type == DataTypeCode.INT64:
        keys = [str(_int("int64 pk", pk, _I64)) for pk in pks]
    elif pk_type == DataTypeCode.VARCHAR:
        keys = [go_json(_str("VarChar pk", pk)) for pk in pks]
    else:
        raise InvalidPayload(f"primary keys are INT64 or VARCHAR, not {pk_type.name}")
    stamps = [_int("delete ts", ts, _U64_NONZERO) for ts in tss]
    return [
        f'{{"pk":{key},"ts":{ts},"pkType":{int(pk_type)}}}'.encode()
        for key, ts in zip(keys, stamps, strict=True)
    ]


def go_json(value: Any) -> str:
    """Returns `value` as compact JSON the way Go's encoding/json writes it: dicts in their own
    key order (Go structs), strings with Go's escapes (`<`, `>`, `&`, U+2028/9 and control
    characters as \\u00xx, except \\n \\r \\t), ints as decimals, bools, None as null.

    Raises InvalidPayload for a string that is not valid Unicode, TypeError for other types
    (floats included: nothing Milvus writes here has one).
    """
    if isinstance(value, str):
        return '"' + _str("JSON string", value).translate(_GO_ESCAPES) + '"'
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    raise TypeError(f"go_json cannot write {type(value).__name__}")


_GO_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)} | {
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


# ---------------------------------------------------------------------------------- the file


def _binlog(descriptor: _Descriptor, events: list[_Event], write_ts: int) -> bytes:
    """Returns magic, the descriptor event, then `events` with real next positions."""
    write_ts = _int("write_ts", write_ts, (0, 2**64))
    body = _descriptor_data(descriptor)
    length = _HEADER.size + len(body)
    parts = [_MAGIC.pack(MAGIC), _HEADER.pack(write_ts, 0, length, 4 + length), body]
    offset = 4 + length
    for event in events:
        length = _HEADER.size + _EVENT_FIXED.size + len(event.payload)
        if offset + length > _I32_MAX:
            raise InvalidPayload(
                f"a binlog is at most 2 GiB (int32 positions); {offset + length} B"
            )
        offset += length
        parts.append(_HEADER.pack(write_ts, event.type, length, offset))
        parts.append(_EVENT_FIXED.pack(event.start_ts, event.end_ts))
        parts.append(event.payload)
    return b"".join(parts)


def _descriptor_data(d: _Descriptor) -> bytes:
    nullable = '"nullable":true,' if d.nullable else ""
    extras = f'{{{nullable}"original_size":"{d.original_size}"}}'.encode()
    fixed = _DESCRIPTOR_FIXED.pack(
        d.collection_id,
        d.partition_id,
        d.segment_id,
        d.field_id,
        d.start_ts,
        d.end_ts,
        d.payload_type,
    )
    return fixed + POST_HEADER_LENGTHS + _I32.pack(len(extras)) + extras


# ---------------------------------------------------------------------------------- checks


def _ddl_type(code: Any) -> EventTypeCode:
    try:
        kind = EventTypeCode(code)
    except ValueError:
        kind = EventTypeCode.DESCRIPTOR
    if kind not in DDL_EVENT_TYPES:
        raise InvalidPayload(f"{code!r} is not a DDL event type (3-6)")
    return kind


def _int(name: str, value: Any, bounds: tuple[int, int]) -> int:
    """Returns `value` as an int in [lo, hi); bools and non-integers are refused."""
    try:
        number = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        number = None
    if number is None or not bounds[0] <= number < bounds[1]:
        raise InvalidPayload(
            f"{name} must be an integer in [{bounds[0]}, {bounds[1]}), not {value!r}"
        )
    return number


def _ts_range(start_ts: int, end_ts: int) -> tuple[int, int]:
    start = _int("start_ts", start_ts, _U64_NONZERO)
    end = _int("end_ts", end_ts, _U64_NONZERO)
    if start > end:
        raise InvalidPayload(f"start_ts {start} is after end_ts {end}")
    return start, end


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidPayload(f"a {name} is a str, not {type(value).__name__}: {value!r}")
    _utf8(name, value)
    return value


def _utf8(name: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise InvalidPayload(f"a {name} is a str, not {type(value).__name__}")
    try:
        return value.encode()
    except UnicodeEncodeError as exc:
        raise InvalidPayload(f"a {name} is not valid Unicode: {exc}") from exc
