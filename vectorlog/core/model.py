"""The data model shared by every processor: data types, field and collection schemas, names.

Collections have exactly one primary key (INT64 or VARCHAR, optionally auto_id), one to four
FLOAT_VECTOR fields (dim, metric L2/IP/COSINE; Milvus 2.4's limit), and scalar BOOL,
INT8/16/32/64, FLOAT, DOUBLE, VARCHAR, JSON and ARRAY (element_type, max_capacity) fields; at
most one INT64 or VARCHAR field other than the primary key may be the partition key. With
enable_dynamic_field, the dynamic JSON field `$meta` (is_dynamic, last) keeps the keys of a row
outside the schema. User fields get ids from 100; row id (0) and timestamp (1) are system
fields."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from vectorlog.core.analyzer import analyzer_of
from vectorlog.core.errors import (
    FieldNameInvalid,
    InvalidArgument,
    InvalidName,
    InvalidPartitionName,
)
from vectorlog.core.functions import FunctionSchema, check_functions
from vectorlog.core.sparse import SPARSE_METRICS

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
ROW_ID_FIELD, TIMESTAMP_FIELD, FIRST_USER_FIELD = 0, 1, 100
MAX_DIM = 32_768
MAX_VARCHAR = 65_535
MAX_VECTOR_FIELDS = 4  # Milvus: proxy.maxVectorFieldNum
METRICS = ("L2", "IP", "COSINE")
DEFAULT_PARTITION = "_default"
#: Milvus's system field names, refused for user fields
RESERVED_FIELD_NAMES = frozenset({"RowID", "Timestamp", "$meta"})
#: words of Milvus's filters refused as field names, in these casings (Milvus's
#: common.FieldNameKeywords); like, and, or, not, in and null in any casing
FIELD_NAME_KEYWORDS = frozenset(
    {
        *("exists", "EXISTS", "text_match", "TEXT_MATCH", "phrase_match", "PHRASE_MATCH"),
        *("random_sample", "RANDOM_SAMPLE", "array_length", "ARRAY_LENGTH"),
        *(f"{kind}_contains{mode}" for kind in ("json", "array") for mode in ("", "_all", "_any")),
        *(f"{kind}_CONTAINS{mode}" for kind in ("JSON", "ARRAY") for mode in ("", "_ALL", "_ANY")),
        *("true", "True", "TRUE", "false", "False", "FALSE"),
    }
)
ANY_CASE_KEYWORDS = frozenset({"like", "and", "or", "not", "in", "null"})
ID_TYPES = frozenset(
    {"int", "int64", "str", "string", "varchar"}
)  # every collection is created with it


class DataType(enum.Enum):
    BOOL = "BOOL"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    VARCHAR = "VARCHAR"
    JSON = "JSON"
    ARRAY = "ARRAY"
    FLOAT_VECTOR = "FLOAT_VECTOR"
    SPARSE_FLOAT_VECTOR = "SPARSE_FLOAT_VECTOR"
    FLOAT16_VECTOR = "FLOAT16_VECTOR"
    BFLOAT16_VECTOR = "BFLOAT16_VECTOR"
    BINARY_VECTOR = "BINARY_VECTOR"


#: dense vector types, searched as float32 (the half types: vectorlog/core/halfvec.py)
DENSE_TYPES = frozenset({DataType.FLOAT_VECTOR, DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR})
HALF_TYPES = frozenset({DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR})
#: the vector types a collection's vector fields may have
VECTOR_TYPES = DENSE_TYPES | {DataType.SPARSE_FLOAT_VECTOR, DataType.BINARY_VECTOR}
#: a binary field's metrics, the first its default (Milvus's BinaryVectorDefaultMetricType)
BINARY_METRICS = ("HAMMING", "JACCARD")


#: the dynamic field of a collection with enable_dynamic_field (Milvus's name)
META = "$meta"
MAX_CAPACITY = 4096  # Milvus's limit on an ARRAY field's max_capacity
#: the element types an ARRAY field may have (Milvus: scalars other than JSON and ARRAY)
ELEMENT_TYPES = frozenset(
    {
        DataType.BOOL,
        DataType.INT8,
        DataType.INT16,
        DataType.INT32,
        DataType.INT64,
        DataType.FLOAT,
        DataType.DOUBLE,
        DataType.VARCHAR,
    }
)
#: the (lowest, highest) value of each integer type
INT_RANGES = {
    DataType.INT8: (-(2**7), 2**7 - 1),
    DataType.INT16: (-(2**15), 2**15 - 1),
    DataType.INT32: (-(2**31), 2**31 - 1),
    DataType.INT64: (-(2**63), 2**63 - 1),
}


#: Go's names of the data types (schemapb.DataType.String()), as Milvus's messages print them
GO_NAMES = {
    DataType.BOOL: "Bool",
    DataType.INT8: "Int8",
    DataType.INT16: "Int16",
    DataType.INT32: "Int32",
    DataType.INT64: "Int64",
    DataType.FLOAT: "Float",
    DataType.DOUBLE: "Double",
    DataType.VARCHAR: "VarChar",
    DataType.JSON: "JSON",
    DataType.ARRAY: "Array",
    DataType.FLOAT_VECTOR: "FloatVector",
    DataType.SPARSE_FLOAT_VECTOR: "SparseFloatVector",
    DataType.FLOAT16_VECTOR: "Float16Vector",
    DataType.BFLOAT16_VECTOR: "BFloat16Vector",
    DataType.BINARY_VECTOR: "BinaryVector",
}


def default_text(value: Any) -> str | None:
    """Returns a default value as stored in a field's params (JSON text; None: no default)."""
    return None if value is None else json.dumps(value)


PARTITION_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,254}")


def partition_tag(name: object) -> str:
    """Returns `name` if Milvus's partition tag check takes it (spaces around trimmed;
    letters, digits, `_`, `-`, at most 255). Raises InvalidPartitionName naming it, in
    Milvus's words."""
    if not isinstance(name, str) or not PARTITION_TAG_RE.fullmatch(name.strip()):
        raise InvalidPartitionName(name)
    return name


def check_name(kind: str, name: object) -> str:
    """Returns `name` if it is a valid identifier. Raises InvalidName naming it."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InvalidName(kind, name)
    return name


@dataclass(frozen=True)
class FieldSchema:
    """One field. `dim`/`metric_type` for vectors, `max_length` for VARCHAR (and ARRAY of
    VARCHAR), `element_type`/`max_capacity` for ARRAY; `is_dynamic` marks `$meta`."""

    name: str
    dtype: DataType
    is_primary: bool = False
    auto_id: bool = False
    dim: int | None = None
    metric_type: str | None = None
    max_length: int | None = None
    description: str = ""
    field_id: int = 0
    element_type: DataType | None = None
    max_capacity: int | None = None
    is_dynamic: bool = False
    #: a row may hold no value (None); Milvus 2.5's nullable scalar fields
    nullable: bool = False
    #: the value a row that gives none (or None) takes; None: no default
    default_value: Any = None
    is_partition_key: bool = False
    #: VARCHAR: text analyzed into tokens (full-text search: a BM25 function's input), by
    #: `analyzer_params` (None: Milvus's standard analyzer); `enable_match`: text_match
    enable_analyzer: bool = False
    analyzer_params: dict[str, Any] | None = None
    enable_match: bool = False

    def validate(self) -> None:
        """Raises InvalidArgument naming this field if its settings are inconsistent."""
        if self.is_dynamic:
            self._validate_dynamic()
            return
        check_name("field", self.name)
        check_description(f"field {self.name!r}", self.description)
        if self.name in FIELD_NAME_KEYWORDS or self.name.lower() in ANY_CASE_KEYWORDS:
            raise FieldNameInvalid(self.name, f"{self.name} is keyword in milvus.")
        if self.name in RESERVED_FIELD_NAMES:
            raise InvalidArgument(f"field name {self.name!r} is reserved (system fields)")
        if not isinstance(self.dtype, DataType):
            raise InvalidArgument(f"field {self.name!r}: unknown data type {self.dtype!r}")
        if self.is_primary and self.dtype not in (DataType.INT64, DataType.VARCHAR):
            raise InvalidArgument(f"primary key {self.name!r} must be INT64 or VARCHAR")
        for flag in ("is_primary", "auto_id", "is_partition_key"):
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise InvalidArgument(f"field {self.name!r}: {flag} must be a bool, not {value!r}")
        if self.auto_id and not self.is_primary:
            raise InvalidArgument(f"auto_id is only valid on the primary key, not {self.name!r}")
        if self.is_partition_key:
            self._validate_partition_key()
        if self.dtype in DENSE_TYPES:
            self._validate_vector()
        elif self.dtype is DataType.SPARSE_FLOAT_VECTOR:
            self._validate_sparse()
        elif self.dtype is DataType.BINARY_VECTOR:
            self._validate_binary()
        if self.dtype is DataType.VARCHAR and not (
            isinstance(self.max_length, int) and 0 < self.max_length <= MAX_VARCHAR
        ):
            raise InvalidArgument(f"field {self.name!r}: max_length must be 1..{MAX_VARCHAR}")
        if self.dtype is DataType.ARRAY:
            self._validate_array()
        elif self.element_type is not None or self.max_capacity is not None:
            raise InvalidArgument(
                f"field {self.name!r}: element_type and max_capacity are for ARRAY fields only"
            )
        check_nullable(self)
        if self.enable_analyzer or self.enable_match or self.analyzer_params is not None:
            self._validate_analyzer()

    def _validate_analyzer(self) -> None:
        """Raises InvalidArgument unless this VARCHAR field's analyzer settings are valid."""
        if self.dtype is not DataType.VARCHAR:
            raise InvalidArgument(f"field {self.name!r}: only VARCHAR fields can enable_analyzer")
        if self.enable_match and not self.enable_analyzer:
            raise InvalidArgument(
                f"field {self.name} is set to enable match but not enable analyzer"
            )
        analyzer_of(self.analyzer_params)  # raises for params Milvus refuses

    def tokenizer(self) -> Any:
        """Returns this VARCHAR field's analyzer as a function: text -> its tokens."""
        return analyzer_of(self.analyzer_params).tokens

    def _validate_array(self) -> None:
        if self.element_type not in ELEMENT_TYPES:
            raise InvalidArgument(
                f"ARRAY field {self.name!r}: element_type {self.element_type!r} is not one of "
                f"{sorted(t.value for t in ELEMENT_TYPES)}"
            )
        cap = self.max_capacity
        if not isinstance(cap, int) or isinstance(cap, bool) or not 0 < cap <= MAX_CAPACITY:
            raise InvalidArgument(
                f"ARRAY field {self.name!r}: max_capacity must be 1..{MAX_CAPACITY}, not {cap!r}"
            )
        if self.element_type is DataType.VARCHAR and not (
            isinstance(self.max_length, int) and 0 < self.max_length <= MAX_VARCHAR
        ):
            raise InvalidArgument(
                f"ARRAY field {self.name!r}: VARCHAR elements need max_length 1..{MAX_VARCHAR}"
            )

    def _validate_partition_key(self) -> None:
        """Raises InvalidArgument with Milvus's message if this field cannot be the key."""
        if self.is_primary:
            raise InvalidArgument("the partition key field must not be primary field")
        if self.dtype not in (DataType.INT64, DataType.VARCHAR):
            raise InvalidArgument("the data type of partition key should be Int64 or VarChar")

    def _validate_dynamic(self) -> None:
        if self.name != META or self.dtype is not DataType.JSON or self.is_primary:
            raise InvalidArgument(
                f"field {self.name!r}: only the JSON field {META!r} is dynamic "
                "(set enable_dynamic_field on the schema instead)"
            )

    def _validate_vector(self) -> None:
        if (
            not isinstance(self.dim, int)
            or isinstance(self.dim, bool)
            or not (0 < self.dim <= MAX_DIM)
        ):
            raise InvalidArgument(f"vector field {self.name!r}: dim must be 1..{MAX_DIM}")
        if self.metric_type not in METRICS:
            raise InvalidArgument(
                f"vector field {self.name!r}: metric_type {self.metric_type!r} not in {METRICS}"
            )

    def _validate_binary(self) -> None:
        """Raises InvalidArgument as Milvus does for a binary dim that is not a multiple of
        8 (or out of range), or a metric a binary field is not searched with."""
        dim = self.dim
        if not isinstance(dim, int) or isinstance(dim, bool) or not 0 < dim <= MAX_DIM:
            raise InvalidArgument(f"vector field {self.name!r}: dim must be 1..{MAX_DIM}")
        if dim % 8:
            raise InvalidArgument(
                f"dimension of binary vector field {self.name} should be multiple of 8, "
                f"but got {dim}"
            )
        if self.metric_type not in (None, *BINARY_METRICS):
            raise InvalidArgument(
                f"binary vector field {self.name!r}: metric_type {self.metric_type!r} not in "
                f"{BINARY_METRICS}"
            )

    def _validate_sparse(self) -> None:
        """Raises InvalidArgument as Milvus does for a sparse field given a dim, or a metric
        a sparse field is not searched with."""
        if self.dim is not None:
            raise InvalidArgument(
                f"dim should not be specified for sparse vector field {self.name}"
            )
        if self.metric_type not in (None, *SPARSE_METRICS):
            raise InvalidArgument(
                f"sparse vector field {self.name!r}: metric_type {self.metric_type!r} not in "
                f"{SPARSE_METRICS}"
            )

    @property
    def is_vector(self) -> bool:
        """Returns whether this is a vector field (dense or sparse)."""
        return self.dtype in VECTOR_TYPES

    def to_avro(self) -> dict[str, Any]:
        params = {
            k: str(v)
            for k, v in (
                ("dim", self.dim),
                ("metric_type", self.metric_type),
                ("max_length", self.max_length),
                ("element_type", self.element_type and self.element_type.value),
                ("max_capacity", self.max_capacity),
                ("nullable", "true" if self.nullable else None),
                ("default_value", default_text(self.default_value)),
                ("enable_analyzer", "true" if self.enable_analyzer else None),
                ("enable_match", "true" if self.enable_match else None),
                ("analyzer_params", _json_or_none(self.analyzer_params)),
            )
            if v is not None
        }
        return {
            "field_id": self.field_id,
            "name": self.name,
            "data_type": self.dtype.value,
            "is_primary_key": self.is_primary,
            "auto_id": self.auto_id,
            "params": params,
            "description": self.description,
            "is_dynamic": self.is_dynamic,
            "is_partition_key": self.is_partition_key,
        }

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> FieldSchema:
        p = d.get("params") or {}
        return cls(
            d["name"],
            DataType(d["data_type"]),
            d["is_primary_key"],
            d["auto_id"],
            int(p["dim"]) if "dim" in p else None,
            p.get("metric_type"),
            int(p["max_length"]) if "max_length" in p else None,
            d.get("description", ""),
            d["field_id"],
            DataType(p["element_type"]) if "element_type" in p else None,
            int(p["max_capacity"]) if "max_capacity" in p else None,
            bool(d.get("is_dynamic", False)),
            p.get("nullable") == "true",
            json.loads(p["default_value"]) if "default_value" in p else None,
            bool(d.get("is_partition_key", False)),
            p.get("enable_analyzer") == "true",
            json.loads(p["analyzer_params"]) if "analyzer_params" in p else None,
            p.get("enable_match") == "true",
        )


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def check_description(whose: str, description: Any) -> None:
    """Raises InvalidArgument naming `whose` description if it is not a string of valid
    Unicode text."""
    if not isinstance(description, str):
        raise InvalidArgument(f"description of {whose} must be a string, not {description!r:.80}")
    try:
        description.encode()
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"description of {whose} is not valid Unicode text (a lone surrogate?)"
        ) from None


@dataclass(frozen=True)
class CollectionSchema:
    """The fields of a collection, validated as a whole by `validated()`; with
    `enable_dynamic_field`, the last field is the dynamic `$meta`."""

    fields: tuple[FieldSchema, ...]
    description: str = ""
    name: str = ""
    enable_dynamic_field: bool = False
    #: functions deriving fields (BM25: text to a sparse vector), see functions.py
    functions: tuple[FunctionSchema, ...] = ()

    def validated(self) -> CollectionSchema:
        """Returns a copy with field ids assigned (and `$meta` appended if the dynamic field
        is enabled). Raises InvalidArgument naming the problem."""
        if not isinstance(self.enable_dynamic_field, bool):
            raise InvalidArgument(
                f"enable_dynamic_field must be a bool, not {self.enable_dynamic_field!r}"
            )
        check_description("the collection schema", self.description)
        if any(f.is_dynamic for f in self.fields) and not self.enable_dynamic_field:
            raise InvalidArgument(f"a dynamic field {META!r} needs enable_dynamic_field=True")
        user = [f for f in self.fields if not f.is_dynamic]
        dynamic = [FieldSchema(META, DataType.JSON, is_dynamic=True)]
        fields = (*user, *dynamic) if self.enable_dynamic_field else tuple(user)
        return replace(self, fields=fields)._validated()

    def _validated(self) -> CollectionSchema:
        names = [f.name for f in self.fields]
        for f in self.fields:
            f.validate()
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise InvalidArgument(f"duplicated field name {dup} found")
        self._require_one("primary key", [f for f in self.fields if f.is_primary])
        vectors = sum(f.is_vector for f in self.fields)
        if vectors > MAX_VECTOR_FIELDS:
            raise InvalidArgument(
                f"maximum vector field's number should be limited to {MAX_VECTOR_FIELDS}"
            )
        if not vectors:
            raise InvalidArgument("schema does not contain vector field")
        keys = [f.name for f in self.fields if f.is_partition_key]
        if len(keys) > 1:
            raise InvalidArgument(
                f"there are more than one partition key, field name = {keys[0]}, {keys[1]}"
            )
        check_functions(self)
        fields = tuple(replace(f, field_id=FIRST_USER_FIELD + i) for i, f in enumerate(self.fields))
        return replace(self, fields=fields)

    @staticmethod
    def _require_one(what: str, found: list[FieldSchema]) -> None:
        if len(found) != 1:
            raise InvalidArgument(f"a collection needs exactly one {what}, got {len(found)}")

    @property
    def primary(self) -> FieldSchema:
        return next(f for f in self.fields if f.is_primary)

    @property
    def vector(self) -> FieldSchema:
        """Returns the first vector field (the only one, but in multi-vector
        collections)."""
        return next(f for f in self.fields if f.is_vector)

    @property
    def vectors(self) -> tuple[FieldSchema, ...]:
        """Returns the vector fields (FLOAT_VECTOR and SPARSE_FLOAT_VECTOR), in schema
        order."""
        return tuple(f for f in self.fields if f.is_vector)

    @property
    def partition_key(self) -> FieldSchema | None:
        """Returns the partition key field, or None if the collection has none."""
        return next((f for f in self.fields if f.is_partition_key), None)

    @property
    def dynamic(self) -> FieldSchema | None:
        """Returns the dynamic field `$meta`, or None if the collection has none."""
        return next((f for f in self.fields if f.is_dynamic), None)

    @property
    def user_fields(self) -> tuple[FieldSchema, ...]:
        """Returns the fields a user defined (every field but `$meta`)."""
        return tuple(f for f in self.fields if not f.is_dynamic)

    def field(self, name: str) -> FieldSchema:
        """Returns the field called `name`. Raises InvalidArgument naming it."""
        for f in self.fields:
            if f.name == name:
                return f
        raise InvalidArgument(f"field {name!r} does not exist")

    def to_avro(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "fields": [f.to_avro() for f in self.fields],
            "enable_dynamic_field": self.enable_dynamic_field,
            "functions": [fn.to_avro() for fn in self.functions],
        }

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> CollectionSchema:
        return cls(
            tuple(FieldSchema.from_avro(f) for f in d["fields"]),
            d.get("description", ""),
            d.get("name", ""),
            bool(d.get("enable_dynamic_field", False)),
            tuple(FunctionSchema.from_avro(fn) for fn in d.get("functions") or ()),
        )


def metric_name(metric_type: Any) -> str:
    """Returns a metric type upper-cased (None: COSINE, Milvus's default). Raises
    InvalidArgument for a non-string; an unknown name is refused by FieldSchema."""
    if metric_type is None:
        return "COSINE"
    if not isinstance(metric_type, str):
        raise InvalidArgument(f"metric_type must be a string, not {metric_type!r}")
    return metric_type.upper()


def quick_schema(
    dimension: int,
    metric_type: str = "COSINE",
    auto_id: bool = False,
    primary_field: str = "id",
    vector_field: str = "vector",
    id_type: str = "int",
    max_length: int = MAX_VARCHAR,
    enable_dynamic_field: bool = False,
) -> CollectionSchema:
    """Returns MilvusClient's quick-setup schema: a primary key and one vector field (and
    the dynamic field if `enable_dynamic_field`: Client's quick setup enables it, as
    Milvus's)."""
    if id_type not in ID_TYPES:
        raise InvalidArgument(f"id_type must be one of {sorted(ID_TYPES)}, not {id_type!r}")
    pk_type = DataType.VARCHAR if id_type in ("str", "string", "varchar") else DataType.INT64
    pk = FieldSchema(
        primary_field,
        pk_type,
        is_primary=True,
        auto_id=auto_id,
        max_length=max_length if pk_type is DataType.VARCHAR else None,
    )
    vec = FieldSchema(
        vector_field, DataType.FLOAT_VECTOR, dim=dimension, metric_type=metric_name(metric_type)
    )
    return CollectionSchema((pk, vec), enable_dynamic_field=enable_dynamic_field)


@dataclass(frozen=True)
class CollectionHistory:
    """What rootcoord's meta still holds of one collection's life (live, or dropped and not
    yet past the meta retention): enough to rebuild a replica of it as of any ts since."""

    collection_id: int
    schema: CollectionSchema
    created_ts: int
    dropped_ts: int | None  # None while live
    #: partition id -> the ts it was dropped at (0: before the oldest version still held)
    partition_drops: dict[int, int] = field(default_factory=dict)
    partitions: frozenset[int] = frozenset()  # every partition id its versions name


@dataclass
class CollectionInfo:
    """What rootcoord knows of one live collection."""

    collection_id: int
    name: str
    schema: CollectionSchema
    shards_num: int
    vchannels: list[str]
    pchannels: list[int]
    created_ts: int
    partitions: dict[str, int] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the database it lives in (vectorlog.core.databases)
    db: str = "default"
    #: the ts of its schema's last change (a field added; else its creation): a read at an
    #: earlier ts may find a query node that does not have the newest field yet
    schema_ts: int = 0
    #: which partitions are loaded (core/load_state.py; {}: every one, the default)
    load: dict[str, Any] = field(default_factory=dict)


#: per ValueField member (the kind of a default value on the wire), the field types it may
#: default (Milvus's rootcoord checkDefaultValue) and the name its message gives
DEFAULT_KINDS: dict[str, tuple[frozenset[DataType], str]] = {
    "bool_data": (frozenset({DataType.BOOL}), "DataType_Bool"),
    "int_data": (frozenset({DataType.INT8, DataType.INT16, DataType.INT32}), "DataType_Int"),
    "long_data": (frozenset({DataType.INT64}), "DataType_Int64"),
    "float_data": (frozenset({DataType.FLOAT}), "DataType_Float"),
    "double_data": (frozenset({DataType.DOUBLE}), "DataType_Double"),
    "string_data": (frozenset({DataType.VARCHAR}), "DataType_VarChar"),
}


def default_kind(value: Any, dtype: DataType) -> str:
    """Returns the ValueField member a default value travels in (what pymilvus sends for
    it: ints of INT8/16/32 fields as int_data, floats of FLOAT fields as float_data)."""
    if isinstance(value, bool):
        return "bool_data"
    if isinstance(value, int):
        return "int_data" if dtype in DEFAULT_KINDS["int_data"][0] else "long_data"
    if isinstance(value, float):
        return "float_data" if dtype is DataType.FLOAT else "double_data"
    if isinstance(value, str):
        return "string_data"
    raise InvalidArgument(f"default value {value!r:.60} is not a bool, number or string")


def check_default(f: FieldSchema, kind: str) -> None:
    """Raises InvalidArgument with Milvus's message if field `f` cannot take its default
    value sent as ValueField member `kind` (another type, out of range, too long)."""
    value, go = f.default_value, GO_NAMES.get(f.dtype, f.dtype.value)
    if f.is_primary:
        raise InvalidArgument(f"primary field not support default_value, type:{go}, name:{f.name}")
    if f.dtype in (DataType.JSON, DataType.ARRAY, *VECTOR_TYPES):
        raise InvalidArgument(f"type not support default_value, type:{go}, name:{f.name}")
    types, expected = DEFAULT_KINDS[kind]
    if f.dtype not in types:
        raise InvalidArgument(  # Milvus's rootcoord
            f"type ({go}) of field ({f.name}) is not equal to the type({expected}) of default_value"
        )
    if f.dtype in INT_RANGES:
        lo, hi = INT_RANGES[f.dtype]
        if not lo <= value <= hi:
            raise InvalidArgument(
                f"default value out of range: invalid parameter[expected=in range [{lo}, {hi}]]"
                f"[actual={value}]"
            )
    if f.dtype is DataType.VARCHAR and len(value.encode()) > (f.max_length or MAX_VARCHAR):
        raise InvalidArgument(
            f"the length ({len(value.encode())}) of string exceeds max length "
            f"({f.max_length}): invalid parameter[expected=valid length string]"
            "[actual=string length exceeds max length]"
        )


def check_nullable(f: FieldSchema) -> None:
    """Raises InvalidArgument naming field `f` if it cannot be nullable or take its default
    value (Milvus: no nullable primary key; vectorlog: no nullable vector, a search needs
    every row's)."""
    if not isinstance(f.nullable, bool):
        raise InvalidArgument(f"field {f.name!r}: nullable must be a bool, not {f.nullable!r}")
    if f.nullable and f.is_primary:
        raise InvalidArgument(  # Milvus's rootcoord
            f"primary field not support null, type:{GO_NAMES.get(f.dtype, f.dtype.value)}, "
            f"name:{f.name}"
        )
    if f.nullable and f.is_vector:
        raise InvalidArgument(f"vector field {f.name!r} cannot be nullable in vectorlog")
    if f.default_value is not None:
        check_default(f, default_kind(f.default_value, f.dtype))
