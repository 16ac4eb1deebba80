"""Confluent-framed Avro ingest records: magic byte 0, the 4-byte big-endian schema id, then the
Avro binary body of a record schema derived from a collection's schema and registered in a
Schema Registry under `{topic}-value` (TopicNameStrategy), as the ingest consumer reads them.

Fields are named as the collection's: BOOL boolean, INT8/16/32 int, INT64 long, FLOAT float,
DOUBLE double, VARCHAR string, ARRAY array of its element type, JSON a string of JSON text,
FLOAT_VECTOR `bytes` of little-endian float32 (`vectors="bytes"`, 4x faster to encode) or
`array<float>` (`vectors="array"`); SPARSE_FLOAT_VECTOR a map<float> ({"index": value}),
BINARY/FLOAT16/BFLOAT16_VECTOR `bytes` of each row; a BM25 function's output is no field (it
is derived); `nullable` fields are unions with null (default null).
The dynamic field `$meta` is not an Avro name: rows with keys outside the schema are refused.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

import fastavro
import numpy as np

from vectorlog.core.errors import InvalidArgument, SchemaMismatch
from vectorlog.core.model import INT_RANGES, CollectionSchema, DataType, FieldSchema
from vectorlog.core.sparse import as_dict
from vectorlog.core.vector_json import GO_TYPES, packed_row
from vectorlog.producer.records import IngestRecord, IngestTopic, checked_row, float32_vector

MAGIC = b"\x00"
VECTOR_TYPES = ("bytes", "array")
#: the sparse, binary and half vector types (core/vector_json.py)
PACKED = frozenset(GO_TYPES)
NAMESPACE = "vectorlog.ingest"
_SCALARS = {
    DataType.BOOL: "boolean",
    DataType.INT8: "int",
    DataType.INT16: "int",
    DataType.INT32: "int",
    DataType.INT64: "long",
    DataType.FLOAT: "float",
    DataType.DOUBLE: "double",
    DataType.VARCHAR: "string",
    DataType.JSON: "string",
}


def avro_schema(
    schema: CollectionSchema,
    vectors: str = "bytes",
    nullable: Collection[str] = (),
    name: str | None = None,
) -> dict[str, Any]:
    """Returns the Avro record schema (a JSON-able dict, with docs and defaults) of rows of a
    collection with `schema`. Raises InvalidArgument for an invalid `schema`, an unknown
    `vectors` type or a `nullable` name that is not a field."""
    if vectors not in VECTOR_TYPES:
        raise InvalidArgument(f"vectors must be one of {VECTOR_TYPES}, not {vectors!r}")
    schema = schema.validated()
    names = {f.name for f in schema.user_fields}
    unknown = sorted(set(nullable) - names)
    if unknown:
        raise InvalidArgument(f"nullable fields {unknown} are not in the collection's schema")
    return {
        "type": "record",
        "name": name or schema.name or "Row",
        "namespace": NAMESPACE,
        "doc": schema.description or "a row of a vectorlog collection",
        "fields": [_field(f, vectors, f.name in nullable) for f in input_fields(schema)],
    }


def input_fields(schema: CollectionSchema) -> list[FieldSchema]:
    """Returns the fields a row gives: the user fields but a function's output (derived)."""
    outputs = {n for fn in schema.functions for n in fn.output_field_names}
    return [f for f in schema.user_fields if f.name not in outputs]


def _field(f: FieldSchema, vectors: str, nullable: bool) -> dict[str, Any]:
    kind = _type(f, vectors)
    json_text = " (JSON text)" if f.dtype is DataType.JSON else ""
    doc = f.description or f"{f.dtype.value}{json_text}"
    if nullable:
        return {"name": f.name, "type": ["null", kind], "default": None, "doc": doc}
    return {"name": f.name, "type": kind, "doc": doc}


def _type(f: FieldSchema, vectors: str) -> Any:
    if f.dtype is DataType.FLOAT_VECTOR:
        return "bytes" if vectors == "bytes" else {"type": "array", "items": "float"}
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:  # {"index": value}, as Milvus's JSON
        return {"type": "map", "values": "float"}
    if f.dtype in PACKED:  # binary, float16, bfloat16: each row's bytes
        return "bytes"
    if f.dtype is DataType.ARRAY:
        assert f.element_type is not None  # a validated ARRAY field has one
        return {"type": "array", "items": _SCALARS[f.element_type]}
    return _SCALARS[f.dtype]


class AvroRows:
    """Serializes rows of a collection as Confluent-framed Avro for `topic`, the schema
    registered on construction under `{topic.name}-value`."""

    def __init__(
        self,
        topic: IngestTopic,
        schema: CollectionSchema,
        registry: Any,
        vectors: str = "bytes",
        nullable: Collection[str] = (),
    ) -> None:
        """`schema`: the collection's (e.g. `vectorlog.core.model.quick_schema(dim)`); its primary
        key keys the records of a mapped topic. `registry`: a Schema Registry URL or a
        `SchemaRegistryClient`. Raises InvalidArgument as `avro_schema`, and
        SchemaRegistryError if the registry refuses the schema (e.g. not BACKWARD compatible
        with the subject's latest version)."""
        schema = schema.validated()
        self.topic = replace(
            topic, primary_key=schema.primary.name, vector_field=schema.vector.name
        )
        self.collection_schema = schema
        self.schema = avro_schema(schema, vectors, nullable)
        self._parsed = fastavro.parse_schema(self.schema)
        self._fields = {f.name: f for f in input_fields(schema)}
        self._nullable, self.vectors = frozenset(nullable), vectors
        self.subject = f"{topic.name}-value"
        self.schema_id = _register(registry, self.subject, self.schema)
        self._header = MAGIC + struct.pack(">I", self.schema_id)

    def row(self, row: Mapping[str, Any]) -> IngestRecord:
        """Returns the record upserting `row`. Raises InvalidArgument naming a missing,
        unknown or badly typed field, a bad vector (or its dim) or a bad primary key."""
        datum = self._datum(checked_row(row))
        return self.topic.row_record(datum, self.encode(datum))

    def encode(self, datum: Mapping[str, Any]) -> bytes:
        """Returns the framed bytes of a datum already shaped for the schema (as `_datum`
        makes it). Raises InvalidArgument if fastavro refuses it."""
        buf = io.BytesIO()
        buf.write(self._header)
        try:
            fastavro.schemaless_writer(buf, self._parsed, datum)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            raise InvalidArgument(
                f"the row does not fit the Avro schema of {self.topic.name!r}: {exc}"
            ) from None
        return buf.getvalue()

    def _datum(self, row: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(row) - set(self._fields))
        if unknown:
            raise InvalidArgument(
                f"fields {unknown} are not in the Avro schema of {self.topic.name!r} (the "
                "dynamic field is not supported in Avro: send such rows as JSON)"
            )
        return {name: self._value(f, row) for name, f in self._fields.items()}

    def _value(self, f: FieldSchema, row: dict[str, Any]) -> Any:
        value = row.get(f.name)
        if value is None:
            if f.name in self._nullable:
                return None
            raise InvalidArgument(f"field {f.name!r} is missing (or null) and is not nullable")
        if f.dtype is DataType.FLOAT_VECTOR:
            vec = float32_vector(f.name, value, f.dim)
            return vec.astype("<f4").tobytes() if self.vectors == "bytes" else vec.tolist()
        if f.dtype is DataType.JSON:
            return _json_text(f.name, value)
        if f.dtype in PACKED:
            return _packed(f, value)
        if isinstance(value, np.ndarray):
            value = value.tolist()
        value = value.item() if isinstance(value, np.generic) else value
        _check_scalar(f, value)
        return value


#: what a scalar field's value must be (bools are ints to Python: refused where not BOOL)
_PYTHON_TYPES: dict[DataType, tuple[type, ...]] = {
    DataType.BOOL: (bool,),
    DataType.FLOAT: (int, float),
    DataType.DOUBLE: (int, float),
    DataType.VARCHAR: (str,),
    **{t: (int,) for t in INT_RANGES},
}


def _packed(f: FieldSchema, value: Any) -> Any:
    """Returns a sparse row as {"index": value}, a binary or half row as its bytes. Raises
    InvalidArgument naming the field for a value Milvus refuses."""
    try:
        row = packed_row(f, value)
    except (SchemaMismatch, TypeError, ValueError) as exc:
        raise InvalidArgument(f"field {f.name!r}: {exc}") from None
    if f.dtype is DataType.SPARSE_FLOAT_VECTOR:
        return {str(k): v for k, v in as_dict(row).items()}
    return row


def _check_scalar(f: FieldSchema, value: Any) -> None:
    """Raises InvalidArgument naming `f` if `value` (or an ARRAY's element) is not of its type
    (a bool where a number is due, 1 where a bool is), or an integer outside its range."""
    if f.dtype is DataType.ARRAY:
        if not isinstance(value, (list, tuple)):
            raise InvalidArgument(f"field {f.name!r}: {value!r:.80} is not an ARRAY")
        if f.max_capacity is not None and len(value) > f.max_capacity:
            raise InvalidArgument(f"field {f.name!r}: over max_capacity {f.max_capacity}")
        assert f.element_type is not None  # a validated ARRAY field has one
        for item in value:
            _check_type(f.name, f.element_type, item)
    else:
        _check_type(f.name, f.dtype, value)


def _check_type(name: str, dtype: DataType, value: Any) -> None:
    kinds = _PYTHON_TYPES[dtype]
    is_kind = isinstance(value, kinds)  # (not narrowing `value` to object)
    if not is_kind or (isinstance(value, bool) and dtype is not DataType.BOOL):
        raise InvalidArgument(f"field {name!r}: {value!r:.80} is not a {dtype.value}")
    if dtype in INT_RANGES:
        lo, hi = INT_RANGES[dtype]
        if not lo <= value <= hi:
            raise InvalidArgument(f"field {name!r}: {value} is outside {dtype.value} ({lo}..{hi})")


def _json_text(name: str, value: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"field {name!r} is not JSON: {exc}") from None


def _register(registry: Any, subject: str, schema: dict[str, Any]) -> int:
    """Registers `schema` under `subject` (idempotent: the same schema keeps its id) and
    returns its id. Raises SchemaRegistryError."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = (
        SchemaRegistryClient.new_client({"url": registry})
        if isinstance(registry, str)
        else registry
    )
    return int(client.register_schema(subject, Schema(json.dumps(schema), "AVRO")))
