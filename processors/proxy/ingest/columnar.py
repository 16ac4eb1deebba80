"""Columnar decoding of a batch of ingest records: the rows of one collection become one
Arrow column per field (`pa.array` per column, native), fitted to the schema as columns
(`fit.fit_columns`) and written as one `Validated` upsert, instead of a dict per row through
the proxy's row validation.

With `ingest_json_reader=arrow` (a route's `json_reader`), JSON rows, and the payloads of
Connect envelopes that repeat the batch's first schema byte for byte (`envelope_prefix`), are
read by pyarrow's JSON reader into the collection's Arrow schema (`_arrow_batch`): it parses
without the GIL and makes no Python object per value, where orjson plus `pa.array` hold the
GIL for all of their ~9-10 µs per row. Its CPU is like or higher (19-27 µs/row either way on
2,000 GloVe rows at load 25-43; in the benchmark's process at load 30-75 the consumer thread
took 30-34 µs/row with it, 24-27 with orjson, and the rate fell: benchmarks/
ingest_topic_threads.py), so it pays only where a core is idle while the GIL is the bound;
orjson is the default. A batch the reader refuses (a value of another type, an unknown
field, a key twice, a record over several lines or of several documents) and Debezium events
go through orjson, then each field's values become one Arrow array. Earlier measurements of
that choice: on 1000 rows of 128-d float32 vectors written with 17 digits, orjson plus
`pa.array` took 8-12 ms where pyarrow's reader took 25-37 ms (one thread; machine load 7-18);
on 500 of the benchmark's records orjson took 4.0-4.6 ms of CPU and the reader 6.6-7.0 ms
(load 84). orjson also handles a record of another shape without failing the batch.
Confluent-framed Avro is read by fastavro, its `bytes` vectors joined and read with
`numpy.frombuffer`; Debezium's `after` rows are taken by column, its other events marked to
go record by record.

A batch this module cannot read as a whole (mixed collections or schema ids, a field type
with no column form here, a value of another type) returns None: the consumer decodes it
record by record as before, so what is wrong is found and dead-lettered record by record.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import fastavro
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pa_json

from vectorlog.core.errors import SchemaMismatch
from vectorlog.core.model import CollectionSchema, DataType, FieldSchema
from vectorlog.core.vector_json import GO_TYPES, packed_row
from vectorlog.processors.proxy.ingest import native_json
from vectorlog.processors.proxy.ingest.avro import MAGIC, WriterSchemas
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.formats import COLLECTION_HEADER
from vectorlog.streams.log.base import Record

#: the Arrow type each field type is read as (JSON and ARRAY fields have none here)
_ARROW = {
    DataType.BOOL: pa.bool_(),
    DataType.INT8: pa.int64(),
    DataType.INT16: pa.int64(),
    DataType.INT32: pa.int64(),
    DataType.INT64: pa.int64(),
    DataType.FLOAT: pa.float64(),
    DataType.DOUBLE: pa.float64(),
    DataType.VARCHAR: pa.string(),
    DataType.FLOAT_VECTOR: pa.list_(pa.float32()),
    # sparse, binary and half vectors: each row's bytes (core/vector_json.packed_row)
    **dict.fromkeys(GO_TYPES, pa.binary()),
}
#: {name: field} of the packed vector fields a batch converts to row bytes
Packed = dict[str, FieldSchema]
_UPSERT_OPS = ("c", "r", "u")
_DECODER = json.JSONDecoder()
#: records decoded at a time (their Python objects let go before the next chunk)
CHUNK = 128


@dataclass(frozen=True)
class Batch:
    """The rows of `records` (one per record) as columns of `collection`'s fields;
    `upserts[i]` False: record i is not an upsert row (a Debezium delete, another op) and
    goes record by record."""

    collection: str
    table: pa.Table
    upserts: np.ndarray


def collection_of(records: Sequence[Record], route: IngestRoute) -> str | None:
    """Returns the one collection every record names (the route's, or on the default topic
    the same `collection` header, else record key, on each), or None."""
    if route.collection is not None:
        return route.collection
    names = {_named(rec) for rec in records}
    name = names.pop() if len(names) == 1 else None
    try:
        return name.decode() if name else None
    except UnicodeDecodeError:
        return None


def _named(rec: Record) -> bytes | None:
    header = rec.header(COLLECTION_HEADER)
    return header if header is not None else rec.key


def arrow_schema(schema: CollectionSchema) -> pa.Schema | None:
    """Returns the Arrow schema the collection's user fields are read as (a BM25 function's
    output left out: it is derived), or None if a field has no column form here (JSON,
    ARRAY, nullable or defaulted fields go row by row)."""
    out = []
    for f in input_fields(schema):
        if f.dtype not in _ARROW or f.nullable or f.default_value is not None:
            return None
        out.append(pa.field(f.name, _ARROW[f.dtype]))
    return pa.schema(out)


def input_fields(schema: CollectionSchema) -> list[FieldSchema]:
    """Returns the user fields a record gives: all but the functions' outputs."""
    outputs = {n for fn in schema.functions for n in fn.output_field_names}
    return [f for f in schema.user_fields if f.name not in outputs]


def warm_up() -> None:
    """Makes pyarrow's first conversion of Python values now: it imports pandas (0.3 s on an
    idle machine, 1-2 s under load; py-spy found it in an ingest worker's first batch, in
    the records' wait), so the ingest consumer pays it when it opens, not on its first
    records. Idempotent (later calls cost microseconds)."""
    pa.array([0], type=pa.int64())


def read_batch(
    records: Sequence[Record],
    route: IngestRoute,
    schema: CollectionSchema,
    collection: str,
    schemas: WriterSchemas | None,
) -> Batch | None:
    """Returns the records as columns, or None if they cannot be read as one batch."""
    fields = arrow_schema(schema)
    packed = {f.name: f for f in schema.user_fields if f.dtype in GO_TYPES}
    values = [rec.value for rec in records]
    if fields is None or not values or not all(values):
        return None
    if all(v[:1] == MAGIC for v in values):
        if route.format == "json" or schemas is None:
            return None
        return _avro_batch(values, fields, schemas, collection, route, packed)
    if route.format == "avro" or not all(v[:1] == b"{" for v in values):
        return None
    return _json_batch(values, fields, collection, route, packed)


# -- JSON --------------------------------------------------------------------------------------
def _json_batch(
    values: list[bytes], fields: pa.Schema, collection: str, route: IngestRoute, packed: Packed
) -> Batch | None:
    """Reads JSON rows, Connect envelopes or Debezium events, all of the first record's
    shape (a record of another shape makes the batch go record by record), CHUNK records
    at a time: a chunk's parsed documents are let go once they are columns (parsing a whole
    batch of 2000 records at once took 1.5x the CPU per record of chunks: fresh memory)."""
    prefix = envelope_prefix(values[0])
    if route.json_reader == "arrow" and not packed:  # rows or one schema's envelopes
        batch = _arrow_batch(values, fields, collection, route, prefix)
        if batch is not None:
            return batch
    shape = _head_shape(values[:CHUNK], prefix, route)
    if shape is None:
        return None
    chunks: list[Chunk] = []
    for lo in range(0, len(values), CHUNK):
        part = values[lo : lo + CHUNK]
        chunk = None if packed else _native_chunk(part, prefix, shape, fields)
        if chunk is None:
            chunk = _orjson_chunk(part, prefix, shape, fields, packed)
        if chunk is None:
            return None
        chunks.append(chunk)
    return _joined(collection, fields, chunks)


def _head_shape(
    part: list[bytes], prefix: bytes | None, route: IngestRoute
) -> tuple[bool, bool] | None:
    """Returns the batch's shape (`_json_shape`) from its first record, read as the first
    chunk `part` is read (its payload if every record of `part` is an envelope of `prefix`),
    or None if the first record does not parse or is of no shape read here."""
    payloads = _enveloped(part, prefix)
    try:
        if payloads is not None:
            return _json_shape(orjson.loads(payloads[0]), route, envelope=True)
    except ValueError:  # not a payload alone: the whole record is read, as orjson's path does
        pass
    try:
        return _json_shape(orjson.loads(part[0]), route)
    except ValueError:
        return None


def _native_chunk(
    part: list[bytes], prefix: bytes | None, shape: tuple[bool, bool], fields: pa.Schema
) -> Chunk | None:
    """Returns the columns of a chunk of rows (or of one schema's envelopes of rows) read by
    `native_json` (float vectors with no Python float per element), or None if it does not
    read them exactly as `_orjson_chunk` would: that then reads them."""
    docs: list[bytes] | list[memoryview] | None = _enveloped(part, prefix)
    if docs is None and not shape[0]:
        docs = part
    if docs is None:
        return None
    vectors = [f.name for f in fields if f.type == _ARROW[DataType.FLOAT_VECTOR]]
    scalars = [f.name for f in fields if f.name not in vectors]
    parsed = native_json.read_rows(docs, scalars, vectors, shape[1])
    if parsed is None:
        return None
    values, vector_rows = parsed
    columns = [
        _rows_column(vector_rows[f.name])
        if f.name in vector_rows
        else _column(f, values[f.name], None)
        for f in fields
    ]
    if any(c is None for c in columns):
        return None
    return cast(list[pa.Array], columns), np.ones(len(part), dtype=bool)


def _orjson_chunk(
    part: list[bytes],
    prefix: bytes | None,
    shape: tuple[bool, bool],
    fields: pa.Schema,
    packed: Packed,
) -> Chunk | None:
    """Returns the columns of a chunk of records read by orjson, or None if one does not
    parse or a row does not make columns."""
    docs = _payloads(part, prefix)
    if docs is None:
        try:
            docs = [orjson.loads(v) for v in part]
        except ValueError:
            return None
        if shape[0]:  # in a Connect envelope
            docs = [d.get("payload") if type(d) is dict and len(d) == 2 else None for d in docs]
    return _rows_chunk(docs, fields, shape[1], packed)


def _arrow_batch(
    values: list[bytes],
    fields: pa.Schema,
    collection: str,
    route: IngestRoute,
    prefix: bytes | None,
) -> Batch | None:
    """Returns JSON rows (or the payloads of Connect envelopes that all start with `prefix`)
    read by pyarrow's JSON reader into `fields`, without the GIL and with no Python object
    per value; None if the batch is of another shape (Debezium events, a record over several
    lines or of several documents) or Arrow refuses a value (another type, an unknown field,
    a key twice): the orjson path then reads it, or goes record by record."""
    rows = _row_texts(values, prefix, route)
    if rows is None:
        return None
    text = b"\n".join(rows)
    if text.count(b"\n") != len(rows) - 1:  # a record over lines: not one row per line
        return None
    try:
        table = pa_json.read_json(
            io.BytesIO(text),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(len(text), 1)),
            parse_options=pa_json.ParseOptions(
                explicit_schema=fields, unexpected_field_behavior="error"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != len(rows):  # a record of two documents
        return None
    return Batch(collection, table.select(fields.names), np.ones(len(rows), dtype=bool))


def _row_texts(
    values: list[bytes], prefix: bytes | None, route: IngestRoute
) -> list[bytes] | list[memoryview] | None:
    """Returns each record's row as JSON text (an envelope's payload), if the first record
    is a row or an envelope of rows (not a Debezium event), else None."""
    head: list[memoryview] | None = None
    if prefix is not None and all(v.startswith(prefix) and v[-1:] == b"}" for v in values):
        cut = len(prefix)
        head = [memoryview(v)[cut:-1] for v in values]
    try:
        doc = orjson.loads(head[0] if head is not None else values[0])
    except ValueError:
        return None
    shape = _json_shape(doc, route, envelope=head is not None)
    if shape is None or shape[1] or (shape[0] and head is None):
        return None
    return head if head is not None else values


_ENVELOPE_START = re.compile(rb'\{\s*"schema"\s*:\s*')
_PAYLOAD_KEY = re.compile(rb'\s*,\s*"payload"\s*:')


def envelope_prefix(value: bytes) -> bytes | None:
    """Returns the bytes of `value` up to its payload if it is a Kafka Connect envelope
    written schema first (`{"schema": S, "payload": ...}`, as JsonConverter writes it), else
    None. Records of one topic repeat one schema, so a record starting with these same bytes
    is an envelope of that schema whose payload is the rest but its closing brace."""
    start = _ENVELOPE_START.match(value)
    if start is None:
        return None
    try:
        text = value.decode()
        _, end = _DECODER.raw_decode(text, start.end())
        head = text[:end].encode()
        orjson.loads(head[start.end() :])  # what the whole record's parse would refuse
    except ValueError:  # not UTF-8, or the schema is not one JSON value
        return None
    key = _PAYLOAD_KEY.match(value, len(head))
    return None if key is None else value[: key.end()]


def _payloads(values: list[bytes], prefix: bytes | None) -> list[Any] | None:
    """Returns the payloads of Connect envelopes that all start with `prefix` (the schema
    then not parsed again: a third of an envelope's objects), or None if one does not, or
    its rest is not one JSON value and a closing brace (then the whole record is parsed)."""
    payloads = _enveloped(values, prefix)
    if payloads is None:
        return None
    try:
        return [orjson.loads(p) for p in payloads]
    except ValueError:
        return None


def _enveloped(values: list[bytes], prefix: bytes | None) -> list[memoryview] | None:
    """Returns the payloads' bytes of Connect envelopes that all start with `prefix` and end
    with their closing brace, or None if one does not."""
    if prefix is None or not all(v.startswith(prefix) and v[-1:] == b"}" for v in values):
        return None
    cut = len(prefix)
    return [memoryview(v)[cut:-1] for v in values]


def _json_shape(doc: Any, route: IngestRoute, envelope: bool = False) -> tuple[bool, bool] | None:
    """Returns (in a Connect envelope, a Debezium event) of a decoded record (`envelope`:
    `doc` is an envelope's payload), or None."""
    if not envelope and isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
        envelope, doc = True, doc["payload"]
    if not isinstance(doc, dict):
        return None
    return envelope, route.format == "debezium" or (route.format == "auto" and _is_debezium(doc))


#: a chunk's columns and its upsert mask
Chunk = tuple[list[pa.Array], np.ndarray]


def _rows_chunk(docs: list[Any], fields: pa.Schema, debezium: bool, packed: Packed) -> Chunk | None:
    """Returns the columns of decoded rows (Debezium: the `after` rows of upserts; the other
    events are marked for the record-by-record path), or None if a row is not an object of
    the collection's fields or a column has a value of another type."""
    upserts = np.ones(len(docs), dtype=bool)
    if debezium:
        upserts = np.array([_after(d) is not None for d in docs], dtype=bool)
        docs = [_after(d) or {} for d in docs]
    names = set(fields.names)
    if not all(type(d) is dict and d.keys() <= names for d in docs):
        return None
    columns = [_column(f, [d.get(f.name) for d in docs], packed.get(f.name)) for f in fields]
    if any(c is None for c in columns):
        return None
    return cast(list[pa.Array], columns), upserts


def _joined(collection: str, fields: pa.Schema, chunks: list[Chunk]) -> Batch:
    """Returns the batch of `chunks`' rows, in order."""
    if len(chunks) == 1:
        return Batch(collection, pa.table(chunks[0][0], schema=fields), chunks[0][1])
    arrays = [pa.chunked_array([c[0][i] for c in chunks], f.type) for i, f in enumerate(fields)]
    upserts = np.concatenate([c[1] for c in chunks])
    return Batch(collection, pa.table(arrays, schema=fields), upserts)


#: the Python types a column's values may have (None: the row lacks the field)
_TYPES = {
    pa.int64(): (int,),
    pa.float64(): (int, float),
    pa.bool_(): (bool,),
    pa.string(): (str,),
}


def _column(field: pa.Field, values: list[Any], packed: FieldSchema | None) -> pa.Array | None:
    """Returns one column (null where a row lacks the field), or None if a value has
    another type (a bool for a number, a float for an integer, a base64 vector)."""
    if field.type == _ARROW[DataType.FLOAT_VECTOR]:
        return _vector_column(values)
    if packed is not None:
        return _packed_column(packed, values)
    allowed = {*_TYPES[field.type], type(None)}
    if not {type(v) for v in values} <= allowed:
        return None
    try:
        return pa.array(values, type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


def _vector_column(values: list[Any]) -> pa.Array | None:
    """Returns a list<float32> column of JSON arrays or Avro `bytes` (little-endian
    float32, read with numpy.frombuffer), or None for values of another kind."""
    kinds = {type(v) for v in values} - {type(None)}
    if kinds == {bytes}:
        column = _bytes_vectors(values)
        if column is not None:
            return column
    if not kinds <= {list}:
        return None
    rows = _rectangular(values) if None not in values else None
    if rows is not None:  # every row a list of numbers, of one length: through numpy
        return _rows_column(rows)
    try:
        return pa.array(values, type=pa.list_(pa.float32()))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _rows_column(rows: np.ndarray) -> pa.Array:
    """Returns (n, dim) float32 rows as a list<float32> column."""
    offsets = pa.array(np.arange(0, rows.size + 1, rows.shape[1], dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(rows.ravel(), type=pa.float32()))


def _bytes_vectors(values: list[bytes | None]) -> pa.Array | None:
    """Returns Avro `bytes` vectors (little-endian float32; None: null) as list<float32>, or
    None if one's size is not a whole number of floats."""
    sizes = np.fromiter((0 if v is None else len(v) for v in values), np.int64, len(values))
    if (sizes % 4).any():
        return None
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(sizes // 4, out=offsets[1:])
    flat = np.frombuffer(b"".join(v for v in values if v is not None), dtype="<f4")
    nulls = [v is None for v in values]
    mask = pa.array(nulls) if any(nulls) else None
    vectors = pa.array(flat, type=pa.float32())
    return pa.ListArray.from_arrays(pa.array(offsets), vectors, mask=mask)


def _rectangular(values: list[Any]) -> np.ndarray | None:
    """Returns lists of numbers (bools, ints, floats: what Arrow's float32 takes) of one
    non-zero length as an (n, dim) float32 array, or None (a missing, ragged, empty or
    non-numeric row: Arrow's own conversion then decides)."""
    try:
        rows = np.array(values)
    except (ValueError, TypeError, OverflowError):
        return None
    if rows.ndim != 2 or rows.shape[1] == 0 or rows.dtype.kind not in "biuf":
        return None
    with np.errstate(over="ignore"):  # beyond float32: inf, as Arrow gives (then refused)
        return rows.astype(np.float32)


def _packed_column(f: FieldSchema, values: list[Any]) -> pa.Array | None:
    """Returns a sparse, binary or half vector column as each row's bytes (null where a row
    lacks it), or None if a value is not one Milvus takes (the record-by-record path then
    dead-letters it with its reason)."""
    try:
        rows = [None if v is None else packed_row(f, v) for v in values]
    except (SchemaMismatch, TypeError, ValueError):
        return None
    return pa.array(rows, type=pa.binary())


# -- Avro --------------------------------------------------------------------------------------
def _avro_batch(
    values: list[bytes],
    fields: pa.Schema,
    schemas: WriterSchemas,
    collection: str,
    route: IngestRoute,
    packed: Packed,
) -> Batch | None:
    """Reads Confluent-framed Avro of one schema id: rows, or Debezium events (their `after`
    rows); `bytes` vectors become one float32 buffer per column."""
    ids = {v[1:5] for v in values}
    if len(ids) != 1:
        return None
    (schema_id,) = struct.unpack(">I", next(iter(ids)))
    chunks, debezium = [], None
    for lo in range(0, len(values), CHUNK):
        try:
            data = _data(values[lo : lo + CHUNK], schemas.get(schema_id))
        except Exception:  # noqa: BLE001 - the record-by-record path names what is wrong
            return None
        if data is None:
            return None
        if debezium is None:
            debezium = route.format == "debezium" or (
                route.format == "auto" and _is_debezium(data[0])
            )
        chunk = _rows_chunk(data, fields, debezium, packed)
        if chunk is None:
            return None
        chunks.append(chunk)
    return _joined(collection, fields, chunks)


def _data(values: list[bytes], writer: Any) -> list[Any] | None:
    """Returns the datums of Confluent-framed records, read from one stream of their bytes
    (a stream per record cost as much as its read), or None if a read ends anywhere but at its
    own record's end (read alone, a record cut short or with bytes after its datum is
    dead-lettered). Raises what fastavro raises on a bad body."""
    stream = io.BytesIO(b"".join(values))
    seek, tell = stream.seek, stream.tell
    out, end = [], 0
    for value in values:
        seek(end + 5)
        end += len(value)
        out.append(fastavro.schemaless_reader(stream, writer, None))
        if tell() != end:
            return None
    return out


def _is_debezium(doc: Any) -> bool:
    return isinstance(doc, dict) and "op" in doc and ("after" in doc or "before" in doc)


def _after(doc: Any) -> dict[str, Any] | None:
    if (
        isinstance(doc, dict)
        and doc.get("op") in _UPSERT_OPS
        and isinstance(doc.get("after"), dict)
    ):
        return doc["after"]
    return None
