"""A hand-written Avro reader for RowsInserted events: what fastavro's schemaless_reader
returns for them (`return_record_name=True`, the writer's schema as the reader's), in a
fraction of its time.

fastavro reads a long of an array in ~95 ns: a 1,000-row {id, tag, vector} batch took
~0.2 ms, nearly all of it its two long columns, on the thread of whichever consumer (query
node, data node) decoded it first while holding the GIL. This reader decodes a numeric
column's values with numpy (the varints' ends found at once; doubles and booleans as raw
bytes) and hands back the same dicts and bytes; a numeric column without null flags holds
its values as a read-only numpy array instead of fastavro's list (what every reader made of
that list, decode_column: it is not made twice, and not per reader of a shared decode), one
with null flags fastavro's lists. Every other column kind is read by
fastavro with its record's schema. It reads only the layout RowsInsertedWriter writes
(rowswriter.py: the same checks of the envelope schema); an event of another type, or
anything it does not read exactly as fastavro would (a varint past 10 bytes, a boolean byte
other than 0 or 1, a truncated body), is left to fastavro (`read` returns None), whose
errors name what was wrong.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
import numpy as np

from vectorlog.core.errors import VectorlogError
from vectorlog.schemas.registry import NAMESPACE
from vectorlog.schemas.rowswriter import DIGIT_SHIFTS, RowsInsertedWriter

ROWS_INSERTED = f"{NAMESPACE}.RowsInserted"
_DIGIT = np.uint8(0x7F)  # a varint byte's value bits
#: the numpy type of an Avro array's items, as decode_column reads them
_DTYPES = {"long": np.int64, "double": np.float64, "boolean": np.bool_}
_ENVELOPE_FIELDS = ("collection_id", "partition_id", "segment_id", "num_rows", "first_row_id")


class LeftToFastavro(VectorlogError):  # noqa: N818 (internal: a decode fastavro does instead)
    """Raised inside the reader for input it leaves to fastavro; never escapes `read`."""


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    """Returns (the long at `pos`, the position after it). Raises LeftToFastavro."""
    z = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise LeftToFastavro
        b = data[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            if z >> 64:  # a tenth byte past bit 64: fastavro drops those bits
                raise LeftToFastavro
            return (z >> 1) ^ -(z & 1), pos
        shift += 7


def read_varints(data: bytes, pos: int, count: int) -> tuple[np.ndarray, int]:
    """Returns (the `count` longs at `pos` as int64, the position after them). Raises
    LeftToFastavro for a varint longer than 10 bytes or a body that ends first. The ends are
    looked for in the next 3 bytes a value first (keys and counts up to 2M), then in 10."""
    avail = len(data) - pos
    window = np.frombuffer(data, np.uint8, min(avail, 3 * count), pos)
    ends = np.flatnonzero(window < 0x80)
    if len(ends) < count and avail > 3 * count:
        window = np.frombuffer(data, np.uint8, min(avail, 10 * count), pos)
        ends = np.flatnonzero(window < 0x80)
    if len(ends) < count:
        raise LeftToFastavro
    total = int(ends[count - 1]) + 1
    width = total // count
    if total == count:  # every value one byte
        z = window[:count].astype(np.uint64)
    elif total == width * count and bool((window[width - 1 : total : width] < 0x80).all()):
        z = _fixed_width(window[:total].reshape(count, width))  # every value `width` bytes
    else:
        z = _mixed_widths(window, ends[:count])
    values = (z >> np.uint64(1)).view(np.int64) ^ -(z & np.uint64(1)).view(np.int64)
    return values, pos + total


def _fixed_width(digits: np.ndarray) -> np.ndarray:
    """Returns the zigzagged values of varints of one width, one per row of `digits`."""
    width = digits.shape[1]
    if width > 10:
        raise LeftToFastavro
    z = (digits[:, 0] & _DIGIT).astype(np.uint64)
    for k in range(1, width):
        z |= (digits[:, k] & _DIGIT).astype(np.uint64) << DIGIT_SHIFTS[k]
    return z


def _mixed_widths(window: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Returns the zigzagged values of the varints ending at `ends` in `window`."""
    count = len(ends)
    starts = np.zeros(count, dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    width = int(lengths.max())
    if width > 10:
        raise LeftToFastavro
    z = (window[starts] & _DIGIT).astype(np.uint64)
    for k in range(1, width):
        at = np.flatnonzero(lengths > k)
        z[at] |= (window[starts[at] + k] & _DIGIT).astype(np.uint64) << DIGIT_SHIFTS[k]
    return z


def read_string(data: bytes, pos: int) -> tuple[str, int]:
    """Returns (the string at `pos`, the position after it). Raises LeftToFastavro."""
    n, pos = read_long(data, pos)
    if n < 0 or pos + n > len(data):
        raise LeftToFastavro
    return data[pos : pos + n].decode(), pos + n


class RowsInsertedReader:
    """Reads RowsInserted events written with one envelope schema, as fastavro reads them."""

    def __init__(self, parsed: dict[str, Any], writer: RowsInsertedWriter) -> None:
        """`parsed`: the envelope schema; `writer`: its RowsInsertedWriter (the layout)."""
        self._payload, _ = read_long(writer.payload_index, 0)
        #: per union index of FieldColumn.column: (its full name, how it is read, its schema)
        self._columns = [
            (name, how, schema)
            for name, (_, how, schema) in sorted(
                writer.columns.items(), key=lambda kv: read_long(kv[1][0], 0)[0]
            )
        ]

    @staticmethod
    def of(parsed: dict[str, Any]) -> RowsInsertedReader | None:
        """Returns the reader for the envelope schema `parsed`, or None if its layout is not
        the one RowsInsertedWriter writes."""
        writer = RowsInsertedWriter.of(parsed)
        return None if writer is None else RowsInsertedReader(parsed, writer)

    def read(self, data: bytes, pos: int) -> tuple[dict[str, Any], int] | None:
        """Returns (the envelope record fastavro would read at `pos`, the position after it)
        for a RowsInserted event; None for any other event or input left to fastavro."""
        try:
            event_type, pos = read_string(data, pos)
            if event_type != "RowsInserted":
                return None
            ts, pos = read_long(data, pos)
            collection_id, pos = read_long(data, pos)
            vchannel, pos = read_string(data, pos)
            branch, pos = read_long(data, pos)
            if branch != self._payload:
                return None
            body, pos = self._body(data, pos)
        except (LeftToFastavro, UnicodeDecodeError, IndexError, ValueError):
            return None
        record = {"event_type": event_type, "ts": ts, "collection_id": collection_id}
        record |= {"vchannel": vchannel, "payload": (ROWS_INSERTED, body)}
        return record, pos

    def _body(self, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        body: dict[str, Any] = {}
        for name in _ENVELOPE_FIELDS:
            body[name], pos = read_long(data, pos)
        columns: list[dict[str, Any]] = []
        while True:
            count, pos = read_long(data, pos)
            if count == 0:
                break
            if count < 0:  # a block with its byte size (fastavro never writes one)
                count = -count
                _, pos = read_long(data, pos)
            for _ in range(count):
                column, pos = self._field_column(data, pos)
                columns.append(column)
        body["columns"] = columns
        return body, pos

    def _field_column(self, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        field_id, pos = read_long(data, pos)
        field_name, pos = read_string(data, pos)
        branch, pos = read_long(data, pos)
        if not 0 <= branch < len(self._columns):
            raise LeftToFastavro
        name, how, schema = self._columns[branch]
        if how == "packed":
            dim, pos = read_long(data, pos)
            n, pos = read_long(data, pos)
            if n < 0 or pos + n > len(data):
                raise LeftToFastavro
            value: dict[str, Any] = {"dim": dim, "data": data[pos : pos + n]}
            pos += n
        elif how:
            value, pos = _numeric(how, data, pos)
        else:
            value, pos = _by_fastavro(schema, data, pos)
        return {"field_id": field_id, "field_name": field_name, "column": (name, value)}, pos


def _by_fastavro(schema: Any, data: bytes, pos: int) -> tuple[Any, int]:
    """Reads a column record fastavro reads (its schema `schema`) at `pos`. Raises
    LeftToFastavro where fastavro fails (a truncated body: decode names its error)."""
    buf = io.BytesIO(data)
    buf.seek(pos)
    try:
        value = fastavro.schemaless_reader(buf, schema, schema, return_record_name=True)
    except Exception:  # fastavro raises many types on corrupt bodies (EOFError, ...)
        raise LeftToFastavro from None
    return value, buf.tell()


def _numeric(item: str, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
    """Reads {values: array<item>, valid: [null, array<boolean>]} at `pos`: the values as a
    numpy array (int64, float64 or bool: what decode_column makes of fastavro's list), but
    as fastavro's lists in a column with null flags (read a row at a time)."""
    values, pos = _array(item, data, pos)
    branch, pos = read_long(data, pos)
    if branch == 0:
        return {"values": values, "valid": None}, pos
    if branch != 1:
        raise LeftToFastavro
    valid, pos = _array("boolean", data, pos)
    return {"values": values.tolist(), "valid": valid.tolist()}, pos


def _array(item: str, data: bytes, pos: int) -> tuple[np.ndarray, int]:
    """Reads an Avro array of longs, doubles or booleans at `pos` as a numpy array."""
    blocks: list[np.ndarray] = []
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            break
        if count < 0:
            count = -count
            _, pos = read_long(data, pos)
        if item == "long":
            values, pos = read_varints(data, pos, count)
            blocks.append(values)
            continue
        size = count * (8 if item == "double" else 1)
        if pos + size > len(data):
            raise LeftToFastavro
        if item == "double":
            blocks.append(np.frombuffer(data, "<f8", count, pos).astype(np.float64))
        else:
            raw = np.frombuffer(data, np.uint8, count, pos)
            if int(raw.max()) > 1:
                raise LeftToFastavro
            blocks.append(raw.astype(np.bool_))
        pos += size
    if len(blocks) == 1:
        out = blocks[0]
    else:
        out = np.concatenate(blocks) if blocks else np.empty(0, _DTYPES[item])
    out.flags.writeable = False  # shared by the readers of a decode (shared_decodes.py)
    return out, pos
