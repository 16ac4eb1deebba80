"""Milvus protobuf <-> vectorlog values: schemas, FieldData columns <-> row dicts, the
PlaceholderGroup of a search, primary-key IDs and key/value pairs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from vectorlog.core import sparse
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import (
    DEFAULT_KINDS,
    DENSE_TYPES,
    HALF_TYPES,
    META,
    CollectionInfo,
    CollectionSchema,
    DataType,
    FieldSchema,
    check_default,
    default_kind,
)
from vectorlog.processors.proxy.columnar import ColumnBatch
from vectorlog.server.grpc_functions import (
    analyzer_settings,
    function_from_proto,
    function_to_proto,
    with_analyzer,
)

TO_PROTO = {
    DataType.BOOL: schema_pb2.Bool,
    DataType.INT8: schema_pb2.Int8,
    DataType.INT16: schema_pb2.Int16,
    DataType.INT32: schema_pb2.Int32,
    DataType.INT64: schema_pb2.Int64,
    DataType.FLOAT: schema_pb2.Float,
    DataType.DOUBLE: schema_pb2.Double,
    DataType.VARCHAR: schema_pb2.VarChar,
    DataType.JSON: schema_pb2.JSON,
    DataType.ARRAY: schema_pb2.Array,
    DataType.FLOAT_VECTOR: schema_pb2.FloatVector,
    DataType.SPARSE_FLOAT_VECTOR: schema_pb2.SparseFloatVector,
    DataType.FLOAT16_VECTOR: schema_pb2.Float16Vector,
    DataType.BFLOAT16_VECTOR: schema_pb2.BFloat16Vector,
    DataType.BINARY_VECTOR: schema_pb2.BinaryVector,
}
FROM_PROTO = {v: k for k, v in TO_PROTO.items()} | {schema_pb2.String: DataType.VARCHAR}
#: the ScalarField member holding each scalar type's values
_SCALAR_SLOT = {
    DataType.BOOL: "bool_data",
    DataType.INT8: "int_data",
    DataType.INT16: "int_data",
    DataType.INT32: "int_data",
    DataType.INT64: "long_data",
    DataType.FLOAT: "float_data",
    DataType.DOUBLE: "double_data",
    DataType.VARCHAR: "string_data",
}
#: the numpy type a columnar insert reads a non-null numeric column as
_NUMPY: dict[DataType, Any] = {
    DataType.INT8: np.int64,
    DataType.INT16: np.int64,
    DataType.INT32: np.int64,
    DataType.INT64: np.int64,
    DataType.FLOAT: np.float32,
    DataType.DOUBLE: np.float64,
}
_CASTS: dict[str, Any] = {"int_data": int, "long_data": int, "float_data": float}
_CASTS |= {"double_data": float, "bool_data": bool, "string_data": str}


def kv_dict(pairs: Iterable[common_pb2.KeyValuePair]) -> dict[str, str]:
    """Returns key/value pairs as a dict (a later key wins)."""
    return {p.key: p.value for p in pairs}


def kv_pairs(d: dict[str, Any]) -> list[common_pb2.KeyValuePair]:
    """Returns a dict as key/value pairs (values as strings)."""
    return [common_pb2.KeyValuePair(key=str(k), value=str(v)) for k, v in d.items()]


def replica_info(r: dict[str, Any], with_shard_nodes: bool) -> milvus_pb2.ReplicaInfo:
    """Returns Milvus's ReplicaInfo of one of Client.describe_replica's replicas (each shard's
    node ids only `with_shard_nodes`, as Milvus's query coordinator)."""
    shards = [
        milvus_pb2.ShardReplica(
            leaderID=s["leader_id"],
            leader_addr=s["leader_address"],
            dm_channel_name=s["channel_name"],
            node_ids=s["node_ids"] if with_shard_nodes else [],
        )
        for s in r["shards"]
    ]
    return milvus_pb2.ReplicaInfo(
        replicaID=r["replica_id"],
        collectionID=r["collection_id"],
        partition_ids=r["partition_ids"],
        shard_replicas=shards,
        node_ids=r["node_ids"],
        resource_group_name=r["resource_group"],
    )


def data_type(code: int) -> DataType:
    """Returns vectorlog's type of a Milvus DataType code. Raises InvalidArgument."""
    try:
        return FROM_PROTO[code]
    except KeyError:
        name = schema_pb2.DataType.Name(code) if code in schema_pb2.DataType.values() else code
        raise InvalidArgument(f"vectorlog does not support the data type {name}") from None


# -- schemas -----------------------------------------------------------------------------------
def schema_from_bytes(raw: bytes) -> CollectionSchema:
    """Returns the schema of a CreateCollectionRequest (serialized CollectionSchema); vector
    fields take type_params' metric_type, else COSINE (the index's decides at search).
    Raises InvalidArgument for malformed bytes or an unsupported type."""
    try:
        proto = schema_pb2.CollectionSchema.FromString(raw)
    except DecodeError as exc:
        raise InvalidArgument(f"the collection schema is not a valid protobuf: {exc}") from None
    fields = tuple(field_from_proto(f) for f in proto.fields if not f.is_dynamic)
    return CollectionSchema(
        fields,
        proto.description,
        enable_dynamic_field=proto.enable_dynamic_field,
        functions=tuple(function_from_proto(fn) for fn in proto.functions),
    )


def field_from_bytes(raw: bytes) -> FieldSchema:
    """Returns the field of an AddCollectionFieldRequest (a serialized FieldSchema).
    Raises InvalidArgument for malformed bytes or an unsupported type."""
    try:
        proto = schema_pb2.FieldSchema.FromString(raw)
    except DecodeError as exc:
        raise InvalidArgument(f"the field schema is not a valid protobuf: {exc}") from None
    return field_from_proto(proto)


def added_field_of(request: Any) -> FieldSchema | None:
    """Returns the field an AlterCollectionSchemaRequest adds; None for any other
    alteration (a drop, a function, an index, several fields: not served). Raises
    InvalidArgument for a field of an unsupported type."""
    action = request.action
    add = action.add_request if action.HasField("add_request") else None
    if add is None or len(add.field_infos) != 1 or len(add.func_schema):
        return None
    info = add.field_infos[0]
    if info.index_name or len(info.extra_params):
        return None
    return field_from_proto(info.field_schema)


def _int_param(params: dict[str, str], key: str) -> int | None:
    if key not in params:
        return None
    try:
        return int(params[key])
    except ValueError:
        raise InvalidArgument(f"type param {key} must be an integer, not {params[key]!r}") from None


def field_from_proto(f: schema_pb2.FieldSchema) -> FieldSchema:
    """Returns vectorlog's field of a Milvus FieldSchema (its default value checked against
    its type as Milvus does, by the ValueField member it came in). Raises InvalidArgument."""
    params = kv_dict(f.type_params)
    dtype = data_type(f.data_type)
    vector = dtype in DENSE_TYPES
    field = _field(f, params, dtype, vector)
    kind = f.default_value.WhichOneof("data") if f.HasField("default_value") else None
    if kind is not None:
        if kind not in DEFAULT_KINDS:
            raise InvalidArgument(f"default value unsupport data type {kind}")
        field = replace(field, default_value=getattr(f.default_value, kind))
        check_default(field, kind)
    return field


def _field(f: schema_pb2.FieldSchema, params: dict, dtype: DataType, vector: bool) -> FieldSchema:
    return FieldSchema(
        f.name,
        dtype,
        is_primary=f.is_primary_key,
        auto_id=f.autoID,
        dim=_int_param(params, "dim"),
        metric_type=params.get("metric_type", "COSINE") if vector else None,
        max_length=_int_param(params, "max_length"),
        description=f.description,
        element_type=data_type(f.element_type) if dtype is DataType.ARRAY else None,
        max_capacity=_int_param(params, "max_capacity"),
        nullable=f.nullable,
        is_partition_key=f.is_partition_key,
        **analyzer_settings(params),
    )


def field_to_proto(f: FieldSchema) -> schema_pb2.FieldSchema:
    """Returns the Milvus FieldSchema of a field (dim, max_length, max_capacity as params)."""
    params = {"dim": f.dim, "max_length": f.max_length, "max_capacity": f.max_capacity}
    return schema_pb2.FieldSchema(
        fieldID=f.field_id,
        name=f.name,
        is_primary_key=f.is_primary,
        autoID=f.auto_id,
        description=f.description,
        data_type=TO_PROTO[f.dtype],
        type_params=kv_pairs({k: v for k, v in params.items() if v is not None}),
        element_type=TO_PROTO[f.element_type] if f.element_type else 0,
        is_dynamic=f.is_dynamic,
        nullable=f.nullable,
        default_value=_default_proto(f),
        is_partition_key=f.is_partition_key,
    )


def _default_proto(f: FieldSchema) -> schema_pb2.ValueField | None:
    """Returns a field's default value as Milvus's ValueField (None without one)."""
    if f.default_value is None:
        return None
    value = schema_pb2.ValueField()
    setattr(value, default_kind(f.default_value, f.dtype), f.default_value)
    return value


def schema_to_proto(info: CollectionInfo) -> schema_pb2.CollectionSchema:
    """Returns the Milvus CollectionSchema of a collection (without the dynamic `$meta`, as
    Milvus: pymilvus adds it itself when enable_dynamic_field is set)."""
    return schema_pb2.CollectionSchema(
        name=info.name,
        description=info.schema.description,
        autoID=info.schema.primary.auto_id,
        fields=[with_analyzer(info.schema, f, field_to_proto(f)) for f in info.schema.user_fields],
        enable_dynamic_field=info.schema.enable_dynamic_field,
        functions=[function_to_proto(info.schema, fn) for fn in info.schema.functions],
    )


# -- columns -> rows -----------------------------------------------------------------------------
def _scalars(sf: schema_pb2.ScalarField, dtype: DataType) -> list[Any]:
    if dtype is DataType.JSON:
        return [json.loads(b) for b in sf.json_data.data]
    if dtype is DataType.ARRAY:
        return [_cell(cell) for cell in sf.array_data.data]
    return list(getattr(sf, _SCALAR_SLOT[dtype]).data)


def _cell(sf: schema_pb2.ScalarField) -> list[Any]:
    """Returns the values of one ARRAY cell, whichever scalar member holds them (pymilvus
    leaves the element type unset)."""
    slot = sf.WhichOneof("data")
    if slot is None:
        return []
    if slot not in _CASTS:
        raise InvalidArgument(f"an ARRAY cell holds {slot}, not scalars")
    return list(getattr(sf, slot).data)


def column_values(fd: schema_pb2.FieldData) -> list[Any]:
    """Returns the values of one FieldData column (None where valid_data says null).
    Raises InvalidArgument for an unsupported type or a malformed vector column."""
    dtype = data_type(fd.type)
    if dtype is DataType.FLOAT_VECTOR:
        return float_vectors(fd).tolist()
    if dtype is DataType.SPARSE_FLOAT_VECTOR:  # rows in Milvus's format, checked at insert
        return list(fd.vectors.sparse_float_vector.contents)
    if dtype in HALF_TYPES:
        return half_values(fd)
    if dtype is DataType.BINARY_VECTOR:
        raw, width = fd.vectors.binary_vector, fd.vectors.dim // 8
        if width <= 0 or len(raw) % width:
            raise InvalidArgument(
                f"binary column {fd.field_name!r}: {len(raw)} bytes, dim {fd.vectors.dim}"
            )
        return [raw[i : i + width] for i in range(0, len(raw), width)]
    values = _scalars(fd.scalars, dtype)
    return with_nulls(fd.field_name, values, fd.valid_data) if fd.valid_data else values


#: the FieldData.vectors member of each half-float type
HALF_SLOTS = {
    DataType.FLOAT16_VECTOR: "float16_vector",
    DataType.BFLOAT16_VECTOR: "bfloat16_vector",
}


def half_values(fd: schema_pb2.FieldData) -> list[Any]:
    """Returns the rows of a FLOAT16/BFLOAT16 column: each row's bytes, or its float32
    values when pymilvus sent them as a float_vector (numbers given for the field)."""
    dim = fd.vectors.dim
    if fd.vectors.HasField("float_vector"):
        flat = fd.vectors.float_vector.data
        if dim <= 0 or len(flat) % dim:
            raise InvalidArgument(f"vector column {fd.field_name!r}: {len(flat)} floats, dim {dim}")
        return np.asarray(flat, dtype=np.float32).reshape(-1, dim).tolist()
    raw = getattr(fd.vectors, HALF_SLOTS[data_type(fd.type)])
    if dim <= 0 or len(raw) % (2 * dim):
        raise InvalidArgument(f"vector column {fd.field_name!r}: {len(raw)} bytes, dim {dim}")
    return [raw[i : i + 2 * dim] for i in range(0, len(raw), 2 * dim)]


def float_vectors(fd: schema_pb2.FieldData) -> np.ndarray:
    """Returns a FLOAT_VECTOR column as an (n, dim) float32 array (one copy, no Python float
    per value). Raises InvalidArgument (Milvus's message) unless its floats fill whole rows."""
    dim, flat = fd.vectors.dim, fd.vectors.float_vector.data
    if dim <= 0 or len(flat) % dim:
        raise InvalidArgument(f"the length({len(flat)}) of float data should divide the dim({dim})")
    return np.asarray(flat, dtype=np.float32).reshape(-1, dim)


def column_array(fd: schema_pb2.FieldData) -> Any:
    """Returns one FieldData column for a columnar insert: vectors (n, dim) and non-null
    64/32/16/8-bit integers, floats and doubles as numpy arrays, other columns as lists (None
    where valid_data says null). Raises InvalidArgument as `column_values`."""
    dtype = data_type(fd.type)
    if dtype is DataType.FLOAT_VECTOR:
        return float_vectors(fd)
    numeric = _NUMPY.get(dtype)
    if numeric is not None and not fd.valid_data:
        return np.asarray(getattr(fd.scalars, _SCALAR_SLOT[dtype]).data, dtype=numeric)
    return column_values(fd)


def column_batch(columns: Sequence[schema_pb2.FieldData], num_rows: int) -> ColumnBatch | None:
    """Returns an insert's columns as a ColumnBatch (never a row dict per row); None if one
    is the dynamic field's (its keys become fields: `rows_from_columns`). Raises
    InvalidArgument (Milvus's messages) for a column of another length than `num_rows` or
    vector floats that do not fill whole rows."""
    out: dict[str, Any] = {}
    for fd in columns:
        if fd.is_dynamic:
            return None
        values = column_array(fd)
        if len(values) != num_rows:
            raise InvalidArgument(
                f"the num_rows ({len(values)}) of field ({fd.field_name}) is not equal to "
                f"passed num_rows ({num_rows})"
            )
        out[fd.field_name] = values
    return ColumnBatch(out, num_rows)


def with_nulls(name: str, values: list[Any], valid: Sequence[bool]) -> list[Any]:
    """Returns a nullable column's values with None where `valid` says null: pymilvus 3
    sends only the valid rows' values (Milvus's proxy fills the others), older clients a
    value for every row. Raises InvalidArgument if the counts fit neither."""
    if len(values) == len(valid):
        return [v if ok else None for v, ok in zip(values, valid, strict=True)]
    if len(values) != sum(valid):
        raise InvalidArgument(
            f"column {name!r} has {len(values)} values for {sum(valid)} valid rows of {len(valid)}"
        )
    it = iter(values)
    return [next(it) if ok else None for ok in valid]


def rows_from_columns(columns: Sequence[schema_pb2.FieldData], num_rows: int) -> list[dict]:
    """Returns the row dicts of an insert's columns, the dynamic `$meta` JSON merged into each
    row. Raises InvalidArgument if a column's length is not `num_rows`."""
    rows: list[dict[str, Any]] = [{} for _ in range(num_rows)]
    for fd in columns:
        values = column_values(fd)
        if len(values) != num_rows:
            raise InvalidArgument(
                f"the num_rows ({len(values)}) of field ({fd.field_name}) is not equal to "
                f"passed num_rows ({num_rows})"
            )
        for row, value in zip(rows, values, strict=True):
            if fd.is_dynamic:
                if not isinstance(value, dict):
                    raise InvalidArgument(f"the dynamic field holds {value!r:.60}, not an object")
                row.update(value)
            else:
                row[fd.field_name] = value
    return rows


# -- rows -> columns -----------------------------------------------------------------------------
def _scalar_field(dtype: DataType, values: Sequence[Any]) -> schema_pb2.ScalarField:
    sf = schema_pb2.ScalarField()
    if dtype is DataType.JSON:
        sf.json_data.data.extend(json.dumps(v).encode() for v in values)
    else:
        slot = _SCALAR_SLOT[dtype]
        getattr(sf, slot).data.extend(_CASTS[slot](v) for v in values)
    return sf


#: what a null row of each type holds in a result column (Milvus's results keep every row
#: in the values, valid_data saying which are null)
_PLACEHOLDER: dict[DataType, Any] = {DataType.BOOL: False, DataType.VARCHAR: ""}
_PLACEHOLDER |= {DataType.JSON: {}, DataType.ARRAY: []}


def column(field: FieldSchema, values: Sequence[Any]) -> schema_pb2.FieldData:
    """Returns the FieldData column of `values` of `field`; a nullable field's has
    valid_data for every row and a placeholder value in each null row, as Milvus's."""
    fd = schema_pb2.FieldData(
        type=TO_PROTO[field.dtype], field_name=field.name, field_id=field.field_id
    )
    if field.nullable:
        fd.valid_data.extend(v is not None for v in values)
        blank = _PLACEHOLDER.get(field.dtype, 0)
        values = [blank if v is None else v for v in values]
    if field.dtype is DataType.FLOAT_VECTOR:
        fd.vectors.dim = field.dim or 0
        fd.vectors.float_vector.data.extend(np.asarray(values, np.float32).ravel().tolist())
    elif field.dtype in HALF_TYPES:
        fd.vectors.dim = field.dim or 0
        setattr(fd.vectors, HALF_SLOTS[field.dtype], b"".join(values))
    elif field.dtype is DataType.BINARY_VECTOR:
        fd.vectors.dim = field.dim or 0
        fd.vectors.binary_vector = b"".join(values)
    elif field.dtype is DataType.SPARSE_FLOAT_VECTOR:
        rows = [sparse.row_of(v) for v in values]
        fd.vectors.dim = sparse.dim_of(rows)
        fd.vectors.sparse_float_vector.dim = fd.vectors.dim
        fd.vectors.sparse_float_vector.contents.extend(rows)
    elif field.dtype is DataType.ARRAY:
        element = field.element_type or DataType.INT64
        fd.scalars.array_data.element_type = TO_PROTO[element]
        fd.scalars.array_data.data.extend(_scalar_field(element, v or []) for v in values)
    else:
        fd.scalars.CopyFrom(_scalar_field(field.dtype, values))
    return fd


def columns_from_rows(rows: Sequence[dict[str, Any]], schema: CollectionSchema) -> tuple:
    """Returns (FieldData columns, output field names) of result rows: a column per schema
    field the rows hold, keys outside the schema in one dynamic `$meta` JSON column."""
    by_name = {f.name: f for f in schema.fields if not f.is_dynamic}
    keys = list(dict.fromkeys(k for row in rows for k in row))
    columns = [column(by_name[k], [row.get(k) for row in rows]) for k in keys if k in by_name]
    extra = [k for k in keys if k not in by_name]
    if extra:
        meta = [{k: row[k] for k in extra if k in row} for row in rows]
        fd = column(FieldSchema(META, DataType.JSON, is_dynamic=True), meta)
        fd.is_dynamic = True
        columns.append(fd)
    return columns, keys


def ids_proto(ids: Sequence[Any]) -> schema_pb2.IDs:
    """Returns primary keys as Milvus IDs (str_id for strings, else int_id)."""
    return fill_ids(schema_pb2.IDs(), ids)


def fill_ids(out: schema_pb2.IDs, ids: Sequence[Any]) -> schema_pb2.IDs:
    """Fills an empty IDs `out` (a response's, in place: no copy) with primary keys as
    `ids_proto` makes them; returns `out`, set even when `ids` is empty."""
    out.SetInParent()
    if ids and isinstance(ids[0], str):
        out.str_id.data.extend(ids)
    elif isinstance(ids, list):
        try:  # an insert's keys: one call, no per-key check (nothing added if it raises)
            out.int_id.data.extend(ids)
        except TypeError:
            out.int_id.data.extend(int(i) for i in ids)
    else:
        out.int_id.data.extend(int(i) for i in ids)
    return out


# -- search ---------------------------------------------------------------------------------------
def vectors_from_placeholder(raw: bytes) -> np.ndarray | list[np.ndarray] | list[bytes] | list[str]:
    """Returns the float vectors of a search's PlaceholderGroup (one placeholder of
    FloatVector values, each little-endian float32): one (nq, dim) float32 array when they
    are all as long (no Python float per value), else one array each (the proxy names the
    one of another dim); or its sparse rows (a SparseFloatVector placeholder's, Milvus's row
    format), or its texts (a VarChar placeholder's: BM25). Raises InvalidArgument."""
    try:
        group = common_pb2.PlaceholderGroup.FromString(raw)
    except DecodeError as exc:
        raise InvalidArgument(f"the placeholder group is not a valid protobuf: {exc}") from None
    if len(group.placeholders) != 1:
        raise InvalidArgument(f"a search needs one placeholder, not {len(group.placeholders)}")
    ph = group.placeholders[0]
    if ph.type != _FLOAT_VECTOR:
        return _other_placeholder(ph)
    values = ph.values
    if len(values) == 1:  # one query (the common call): no set of sizes to build
        only = values[0]
        if len(only) % 4 or not only:
            raise InvalidArgument("a float vector placeholder must hold float32 bytes")
        out = np.frombuffer(bytearray(only), _LE_F32).reshape(1, -1)  # a writable copy
        return out if _LE_F32 is _NATIVE_F32 else out.astype(np.float32)
    sizes = {len(v) for v in values}
    if any(n % 4 or not n for n in sizes):
        raise InvalidArgument("a float vector placeholder must hold float32 bytes")
    if len(sizes) == 1:
        flat = np.frombuffer(values[0] if len(values) == 1 else b"".join(values), dtype="<f4")
        return flat.reshape(len(values), -1).astype(np.float32)
    return [np.frombuffer(v, dtype="<f4").astype(np.float32) for v in values]


_PH = common_pb2.PlaceholderType
_FLOAT_VECTOR = _PH.FloatVector
#: the placeholder's float32s (little-endian), and numpy's own (the same on this machine's
#: byte order, where reading them needs no conversion)
_LE_F32, _NATIVE_F32 = np.dtype("<f4"), np.dtype(np.float32)


def _other_placeholder(ph: common_pb2.PlaceholderValue) -> list[bytes] | list[str]:
    """Returns the rows of a placeholder of other than float vectors: sparse, half-float and
    binary rows as bytes (the field's type reads them), or a VarChar one's texts (a BM25
    function output's search). Raises InvalidArgument for another type."""
    if ph.type in (
        _PH.SparseFloatVector,
        _PH.Float16Vector,
        _PH.BFloat16Vector,
        _PH.BinaryVector,
    ):
        return list(ph.values)
    if ph.type == _PH.VarChar:
        try:
            return [v.decode() for v in ph.values]
        except UnicodeDecodeError:
            raise InvalidArgument("a text query is not valid UTF-8") from None
    kind = _PH.Name(ph.type) if ph.type in _PH.values() else ph.type
    raise InvalidArgument(f"vectorlog searches float vectors only, not {kind}")


def search_params(pairs: Iterable[common_pb2.KeyValuePair]) -> dict[str, Any]:
    """Returns a SearchRequest's search_params (JSON values, as pymilvus sends them; a value
    that is not JSON stays a string)."""
    out: dict[str, Any] = {}
    for key, value in kv_dict(pairs).items():
        if value.lstrip(_JSON_SPACE)[:1] not in _JSON_STARTS:  # json.loads would raise
            out[key] = value  # ("COSINE", "False", a field name: no exception per value)
            continue
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


#: what json.loads skips before a value, and the characters a value it accepts can start with
#: (objects, arrays, strings, numbers, true, false, null, and Python's NaN and Infinity)
_JSON_SPACE, _JSON_STARTS = " \t\n\r", frozenset('{["-0123456789tfnNI')


# -- filter templates -----------------------------------------------------------------------------
def filter_params(templates: Any) -> dict[str, Any] | None:
    """Returns the `{name}` values of a request's expr_template_values (None without any).
    Raises InvalidArgument for a bytes value."""
    if not templates:
        return None
    return {name: _template_value(v) for name, v in templates.items()}


def _template_value(v: schema_pb2.TemplateValue) -> Any:
    kind = v.WhichOneof("val")
    if kind == "array_val":
        return _template_array(v.array_val)
    if kind is None or kind == "bytes_val":
        raise InvalidArgument(f"a filter parameter cannot be {kind or 'empty'}")
    return getattr(v, kind)


def _template_array(a: schema_pb2.TemplateArrayValue) -> list[Any]:
    kind = a.WhichOneof("data")
    if kind is None:
        return []
    if kind == "array_data":
        return [_template_array(x) for x in a.array_data.data]
    if kind == "json_data":
        return [json.loads(b) for b in a.json_data.data]
    return list(getattr(a, kind).data)
