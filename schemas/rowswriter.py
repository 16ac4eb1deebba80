"""A hand-written Avro writer for RowsInserted events: the same bytes fastavro's
schemaless_writer writes for the envelope, in a fraction of its time.

A RowsInserted event is mostly raw vector bytes and a few numeric columns. fastavro spends
~0.25 ms on a 1,000-row 50-d batch of {id, tag, vector}: its union look-ups, a Python int
per value (the columns' `tolist()`), and its buffer's growth around the vector bytes. This
writer joins the parts once: the envelope and record framing written here, numeric columns
given as numpy arrays encoded without a Python object per value (zigzag varints for longs by
protobuf's packed sint64 encoder, schemas/zigzag.py; raw little-endian doubles, one byte per
boolean), vector bytes copied once. Every other column (strings,
JSON, sparse rows, a column with `valid` flags, values given as a list, an array that is not
1-D or whose values a long does not hold as they are: uint64, floats) is written by fastavro
with its own record schema, so its bytes are fastavro's by construction.

The writer reads the layout it relies on from the envelope schema it is given (the union
indexes of RowsInserted and of each column kind, the field order of each record): a schema
whose layout differs gets no writer (`RowsInsertedWriter.of` returns None: fastavro writes)
or, for one column kind, fastavro writes that kind. Avro's binary encoding, as fastavro
writes it: a long or int is a zigzag varint; a string or bytes its length then its bytes;
a union the branch index then the value; an array one block (its count, the items) then 0,
an empty array only 0; a record its fields in order.

The longs' varints were numpy's until session 24 (~10 operations and temporaries a column);
protobuf's encoder writes them in a third to a half of the time (schemas/zigzag.py).
"""

from __future__ import annotations

import io
import operator
from collections.abc import Sequence
from typing import Any

import fastavro
import numpy as np

from vectorlog.schemas.registry import NAMESPACE
from vectorlog.schemas.zigzag import zigzag_varints

#: the fields (name, Avro type) of the records whose layout the writer writes itself
Layout = tuple[tuple[str, str], ...]
ENVELOPE: Layout = (("event_type", "string"), ("ts", "long"), ("collection_id", "long"))
ENVELOPE += (("vchannel", "string"), ("payload", "union"))
ROWS_INSERTED: Layout = (("collection_id", "long"), ("partition_id", "long"))
ROWS_INSERTED += (("segment_id", "long"), ("num_rows", "int"), ("first_row_id", "long"))
ROWS_INSERTED += (("columns", "array"),)
FIELD_COLUMN = (("field_id", "long"), ("field_name", "string"), ("column", "union"))
#: the column kinds written from numpy arrays: their layout and their values' item type
_VALUES = (("values", "array"), ("valid", "union"))
NUMERIC = {"Int64Column": "long", "DoubleColumn": "double", "BoolColumn": "boolean"}
PACKED = ("FloatVectorColumn", "PackedVectorColumn")
_PACKED_LAYOUT = (("dim", "int"), ("data", "bytes"))
#: 7-bit digit shifts of a varint (a 64-bit value has at most 10 digits; rowsreader's)
DIGIT_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def varint(n: int) -> bytes:
    """Returns Avro's encoding of the long `n` (zigzag, then 7 bits a byte, low first).
    Raises OverflowError past a long's range, as fastavro does; TypeError for a non-integer."""
    if type(n) is not int:
        n = operator.index(n)  # a numpy integer: its shifts would overflow
    if not LONG_MIN <= n <= LONG_MAX:
        raise OverflowError(f"{n} is not a long (64-bit)")
    out = bytearray()
    put_long(out, n)
    return bytes(out)


def put_long(out: bytearray, n: int) -> None:
    """Appends Avro's zigzag varint of the 64-bit integer `n` (unchecked: see `varint`)."""
    z = (n << 1) ^ (n >> 63)
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def varints(values: np.ndarray) -> bytes:
    """Returns Avro's encoding of each long of an integer array, concatenated: each value's
    zigzag, 7 bits a byte, low first, the high bit set on every byte but its last."""
    return zigzag_varints(values)


def string(text: str) -> bytes:
    """Returns Avro's encoding of a string."""
    raw = text.encode()
    return varint(len(raw)) + raw


def _kind(t: Any) -> str:
    """Returns the Avro type name of a field's type: a primitive's name, or its complex kind
    (union, array, record, ...)."""
    if isinstance(t, list):
        return "union"
    if isinstance(t, dict):
        return str(t["type"])
    return str(t)


def _layout(record: dict[str, Any]) -> Layout:
    return tuple((f["name"], _kind(f["type"])) for f in record["fields"])


def _branch_names(union: list[Any]) -> list[str]:
    return [str(b["name"]) if isinstance(b, dict) else str(b) for b in union]


class RowsInsertedWriter:
    """Writes RowsInserted events as fastavro writes them with one envelope schema."""

    def __init__(self, envelope: dict[str, Any], records: dict[str, dict[str, Any]]) -> None:
        """`envelope`: the parsed envelope schema; `records`: its named types by full name
        (fastavro's parse keeps them, each referring to the others by name)."""
        payload = envelope["fields"][4]["type"]
        self.payload_index = varint(_branch_names(payload).index(f"{NAMESPACE}.RowsInserted"))
        column = records[f"{NAMESPACE}.FieldColumn"]["fields"][2]["type"]
        #: per column kind (full name): its union index's encoding, how this writer writes
        #: it ("long", "double", "boolean": values from an array; "packed": dim and bytes;
        #: "": fastavro writes it), and its record's schema as fastavro parsed it
        self.columns: dict[str, tuple[bytes, str, Any]] = {}
        for i, name in enumerate(_branch_names(column)):
            kind, rec = name.rsplit(".", 1)[-1], records[name]
            own = ""
            if kind in NUMERIC and _layout(rec) == _VALUES and _numeric(rec, NUMERIC[kind]):
                own = NUMERIC[kind]
            elif kind in PACKED and _layout(rec) == _PACKED_LAYOUT:
                own = "packed"
            schema = fastavro.parse_schema(rec, named_schemas=dict(records))
            self.columns[name] = (varint(i), own, schema)

    @staticmethod
    def of(parsed: dict[str, Any]) -> RowsInsertedWriter | None:
        """Returns the writer for the envelope schema `parsed` (as fastavro parsed it), or
        None if its RowsInserted layout is not the one this writer writes."""
        envelope, records = parsed, parsed.get("__named_schemas", {})
        rows = records.get(f"{NAMESPACE}.RowsInserted")
        fc = records.get(f"{NAMESPACE}.FieldColumn")
        if _layout(envelope) != ENVELOPE or rows is None or fc is None:
            return None
        if _layout(rows) != ROWS_INSERTED or _layout(fc) != FIELD_COLUMN:
            return None
        if _kind(envelope["fields"][4]["type"]) != "union":
            return None
        return RowsInsertedWriter(envelope, records)

    def write(
        self, header: bytes, ts: int, collection_id: int, vchannel: str, body: dict[str, Any]
    ) -> bytes:
        """Returns `header` + the envelope of a RowsInserted event with `body` (Avro's native
        form; a numeric column's values may be a numpy array). Raises KeyError, TypeError,
        ValueError for a body fastavro would refuse too."""
        parts: list[Any] = [
            header,
            b"\x18RowsInserted",  # event_type: the string's length (12) and its bytes
            varint(ts),
            varint(collection_id),
            string(vchannel),
            self.payload_index,
            varint(body["collection_id"]),
            varint(body["partition_id"]),
            varint(body["segment_id"]),
            varint(body["num_rows"]),
            varint(body["first_row_id"]),
        ]
        columns = body["columns"]
        if columns:
            parts.append(varint(len(columns)))
            for c in columns:
                parts += (varint(c["field_id"]), string(c["field_name"]))
                self._column(parts, *c["column"])
        parts.append(b"\x00")
        return b"".join(parts)

    def _column(self, parts: list[Any], name: str, value: dict[str, Any]) -> None:
        """Appends one FieldColumn's union value (`name`: its branch's full name)."""
        index, how, schema = self.columns[name]
        parts.append(index)
        if how == "packed":
            data = value["data"]
            parts += (varint(value["dim"]), varint(memoryview(data).nbytes), data)
        elif how and value.get("valid") is None and _exact(how, value["values"]):
            parts += _numeric_values(how, value["values"])
        else:  # fastavro writes it: its bytes by construction
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, schema, plain(value))
            parts.append(buf.getvalue())


def _numeric(record: dict[str, Any], item: str) -> bool:
    """Returns whether a column record is {values: array<item>, valid: [null, array<boolean>]}."""
    values, valid = record["fields"][0]["type"], record["fields"][1]["type"]
    return (
        values.get("items") == item
        and isinstance(valid, list)
        and len(valid) == 2
        and valid[0] == "null"
        and isinstance(valid[1], dict)
        and valid[1].get("type") == "array"
        and valid[1].get("items") == "boolean"
    )


def _exact(item: str, values: Any) -> bool:
    """Returns whether numpy writes `values` as fastavro writes its list of `item`s: a 1-D
    array whose every value `item` holds as it is (not a uint64 past a long's range, nor
    floats as longs: fastavro refuses or truncates those, numpy wraps them)."""
    if not isinstance(values, np.ndarray) or values.ndim != 1:
        return False
    kind = values.dtype.kind
    if item == "long":
        return kind in "bi" or (kind == "u" and values.dtype.itemsize < 8)
    return kind in "biuf"


def _numeric_values(item: str, values: np.ndarray) -> Sequence[bytes]:
    """Returns the encoding of {values: the array, valid: null} of a numeric column."""
    if not len(values):
        return (b"\x00\x00",)  # an empty array, then the null branch of `valid`
    if item == "long":
        data = varints(values)
    elif item == "double":
        data = values.astype("<f8", copy=False).tobytes()
    else:
        data = values.astype(np.bool_, copy=False).view(np.uint8).tobytes()
    return (varint(len(values)), data, b"\x00\x00")


def listed(body: dict[str, Any]) -> dict[str, Any]:
    """Returns a RowsInserted body whose columns hold no numpy arrays (lists of numbers,
    vector bytes as bytes): what fastavro writes."""
    columns = [{**c, "column": (c["column"][0], plain(c["column"][1]))} for c in body["columns"]]
    return {**body, "columns": columns}


def plain(value: dict[str, Any]) -> dict[str, Any]:
    """Returns a column's Avro value with a numpy array of numbers as a list and vector
    data as bytes (what fastavro writes)."""
    if isinstance(value.get("values"), np.ndarray):
        value = {**value, "values": value["values"].tolist()}
    if "data" in value and not isinstance(value["data"], bytes):
        value = {**value, "data": bytes(value["data"])}
    return value
