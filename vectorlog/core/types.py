"""Public types of vectorlog's API: what a read reads at, index specifications, and the shapes
of results. They sit at the bottom layer (beside `vectorlog.core.model` and
`vectorlog.core.errors`) so the client, the proxy and every processor share them without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import (
    BINARY_METRICS,
    DENSE_TYPES,
    META,
    METRICS,
    CollectionInfo,
    CollectionSchema,
    DataType,
    FieldSchema,
    check_name,
)
from vectorlog.core.scalar_index import JSON_PATH, default_index_name, scalar_params
from vectorlog.core.scalar_index import SCALAR_INDEXES as SCALAR_INDEXES
from vectorlog.core.sparse import sparse_index_checks

LEVELS = ("strong", "bounded", "session", "eventually")
#: the collection property holding the level of its reads that name none (Milvus keeps it
#: beside the schema); a collection created without one reads Strong
CONSISTENCY_PROPERTY = "consistency_level"
DEFAULT_LEVEL = "Strong"
#: Milvus's ConsistencyLevel numbers (common.proto), as describe_collection reports them
LEVEL_CODES = {"Strong": 0, "Session": 1, "Bounded": 2, "Eventually": 3}


def level_name(level: object) -> str:
    """Returns a level's canonical name ("Strong", "Bounded", ...; any case, or Milvus's
    number). Raises InvalidArgument naming anything else."""
    if isinstance(level, int) and not isinstance(level, bool):
        for name, code in LEVEL_CODES.items():
            if code == level:
                return name
    elif isinstance(level, str) and level.lower() in LEVELS:
        return level.lower().capitalize()
    raise InvalidArgument(f"consistency_level {level!r} is not one of {tuple(LEVEL_CODES)}")


def with_level(properties: dict[str, str] | None, level: str | int | None) -> dict[str, str] | None:
    """Returns collection properties with the read level `level` added (None: unchanged).
    Raises InvalidArgument naming a level that is not one."""
    if level is None:
        return properties
    return {**(properties or {}), CONSISTENCY_PROPERTY: level_name(level)}


def collection_level(properties: dict[str, str]) -> str:
    """Returns the read level of a collection with these properties (default Strong)."""
    return properties.get(CONSISTENCY_PROPERTY, DEFAULT_LEVEL)


#: every index type Milvus knows (its vector and scalar index checkers), served or not: any
#: other is refused first, as Milvus's proxy refuses it
MILVUS_INDEXES = frozenset(
    {"", "AUTOINDEX", "FLAT", "IVF_FLAT", "IVF_SQ8", "IVF_PQ", "IVF_RABITQ", "HNSW"}
    | {"HNSW_SQ", "HNSW_PQ", "HNSW_PRQ", "DISKANN", "SCANN", "SCANN_DVR", "AISAQ"}
    | {"GPU_IVF_FLAT", "GPU_IVF_PQ", "GPU_CAGRA", "GPU_BRUTE_FORCE", "BIN_FLAT"}
    | {"BIN_IVF_FLAT", "MINHASH_LSH", "SPARSE_INVERTED_INDEX", "SPARSE_WAND", "INVERTED"}
    | {"BITMAP", "STL_SORT", "TRIE", "NGRAM", "RTREE", "MARISA-TRIE", "ASCENDING", "SORT"}
    | {"EMB_LIST_HNSW"}
)


@dataclass(frozen=True)
class ReadAt:
    """When a read reads: a consistency level (None: the collection's) or an `as_of` ts, and
    how long it may wait."""

    consistency_level: str | None = None
    session_ts: int = 0  # the client's last write, for Session
    as_of: int | None = None
    timeout: float | None = None  # None: the configured read timeout

    def __post_init__(self) -> None:
        """Raises InvalidArgument naming a malformed `as_of`, `timeout` or level."""
        as_of, timeout = self.as_of, self.timeout
        if as_of is not None and (
            not isinstance(as_of, int) or isinstance(as_of, bool) or not 0 < as_of < MAX_TS
        ):
            raise InvalidArgument(f"as_of must be a hybrid timestamp in 1..2**63-1, not {as_of!r}")
        if timeout is not None and (
            not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0
        ):
            raise InvalidArgument(f"timeout must be a positive number of seconds, not {timeout!r}")
        if not isinstance(self.consistency_level, str | None):
            raise InvalidArgument(
                f"consistency_level must be a string, not {self.consistency_level!r}"
            )


MAX_TS = 1 << 63
STRONG = ReadAt("Strong")
#: a read at its collection's consistency level
COLLECTION_LEVEL = ReadAt()
#: ReadAts of reads naming at most a level, by (level, session ts); cleared when full
_READS: dict[tuple[str | None, int], ReadAt] = {}


def read_at(
    level: str | None, session_ts: int = 0, as_of: int | None = None, timeout: float | None = None
) -> ReadAt:
    """Returns ReadAt(level, session_ts, as_of, timeout): one shared (it is frozen) for a
    read naming no as_of or timeout, sparing each read its checks. Raises as ReadAt."""
    if as_of is not None or timeout is not None or not (level is None or type(level) is str):
        return ReadAt(level, session_ts, as_of, timeout)
    key = (level, session_ts)
    at = _READS.get(key)
    if at is None:
        if len(_READS) >= 256:
            _READS.clear()
        at = _READS[key] = ReadAt(level, session_ts)
    return at


@dataclass(frozen=True)
class SearchOptions:
    """A search's arguments beyond its vectors, limit, output fields and partitions, by
    MilvusClient's names (the proxy checks them): a filter expression and its `{param}`
    values, {"metric_type", "params"} of the index (a range search's radius / range_filter
    among the params), the vector field, hits to skip, a scalar field to group hits by
    and the hits per group (strict_group_size: vectorlog always fills groups it can)."""

    filter: str | None = ""
    filter_params: dict[str, Any] | None = None
    search_params: dict[str, Any] | None = None
    anns_field: str | None = None
    offset: int = 0
    group_by_field: str | None = None
    group_size: int | None = None
    strict_group_size: bool = False


DEFAULT_SEARCH = SearchOptions()


class InsertResult(TypedDict):
    """What an insert returns once the log made its rows durable."""

    insert_count: int
    ids: list[Any]
    timestamp: int


class DeleteResult(TypedDict):
    """What a delete returns once the log made it durable."""

    delete_count: int
    timestamp: int


class Hit(TypedDict):
    """One search result: the primary key, the distance, and the requested fields."""

    id: Any
    distance: float
    entity: dict[str, Any]


#: per vector index type, its build parameters: name -> (default, lowest, highest), the ranges
#: of Milvus 2.4's indexparamcheck. A missing parameter takes the default (what the index node
#: builds; Milvus 2.4 requires nlist, M and efConstruction, later versions default them).
#: AUTOINDEX takes none: it is built as HNSW (processors/indexnode/builder.py says how).
VECTOR_INDEXES: dict[str, dict[str, tuple[int, int, int]]] = {
    "FLAT": {},
    "IVF_FLAT": {"nlist": (128, 1, 65_536)},
    "IVF_SQ8": {"nlist": (128, 1, 65_536)},
    "IVF_PQ": {"nlist": (128, 1, 65_536), "m": (8, 1, 65_536), "nbits": (8, 1, 16)},
    "HNSW": {"M": (16, 2, 2_048), "efConstruction": (200, 1, (1 << 31) - 1)},
    "AUTOINDEX": {},
}
#: the index types of a BINARY_VECTOR field and their parameters (AUTOINDEX builds BIN_FLAT)
BINARY_INDEXES: dict[str, dict[str, tuple[int, int, int]]] = {
    "BIN_FLAT": {},
    "BIN_IVF_FLAT": {"nlist": (128, 1, 65_536)},
}
#: the metric of a vector index created without one (Milvus: FloatVectorDefaultMetricType)
DEFAULT_METRIC = "COSINE"
#: metrics whose larger scores are nearer (L2 and the binary metrics: smaller is nearer)
LARGER_IS_NEARER = frozenset({"IP", "COSINE", "BM25"})
#: a range search's search parameters (Milvus's names)
RADIUS, RANGE_FILTER = "radius", "range_filter"
#: keys a params map may carry that configure no build: accepted, not stored
IGNORED_PARAMS = frozenset({"mmap.enabled"})


@dataclass(frozen=True)
class IndexSpec:
    """One index to create: field, type ("" = AUTOINDEX), metric (None or "" = COSINE, as
    Milvus; vector indexes only), build parameters (ints or decimal strings, as pymilvus sends
    them) and name (default: the field's name, as Milvus)."""

    field_name: str
    index_type: str = ""
    metric_type: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    index_name: str | None = None

    def resolved(self, schema: CollectionSchema) -> dict[str, Any]:
        """Returns {index_name, field_id, field_name, index_type, metric_type, params} as
        stored (params as decimal strings). Raises InvalidArgument naming the bad field,
        type, metric or parameter."""
        if not isinstance(self.field_name, str):
            raise InvalidArgument(f"index field_name must be a string, not {self.field_name!r}")
        f = self._indexed_field(schema)
        if isinstance(self.index_type, str) and self.index_type.upper() not in MILVUS_INDEXES:
            raise InvalidArgument(  # Milvus's proxy: once the field is found, the type
                "invalid parameter[expected=valid index]"
                f"[actual=invalid index type: {self.index_type}]"
            )
        if self.index_name:
            check_name("index", self.index_name)
        if not isinstance(self.index_type, str):
            raise InvalidArgument(f"index_type must be a string, not {self.index_type!r}")
        kind = self.index_type.upper() or "AUTOINDEX"
        if f.dtype in DENSE_TYPES:
            metric, params = self._vector_checks(kind, f.dim or 0)
        elif f.dtype is DataType.SPARSE_FLOAT_VECTOR:
            kind, metric, params = sparse_index_checks(f, kind, self.metric_type, self._params())
        elif f.dtype is DataType.BINARY_VECTOR:
            kind, metric, params = self._binary_checks(kind)
        else:
            metric, params = self._scalar_checks(kind, f)
        name = self.index_name or default_index_name(f.name, params)
        return {
            "index_name": name,
            "field_id": f.field_id,
            "field_name": f.name,
            "index_type": kind,
            "metric_type": metric,
            "params": params,
        }

    def event_body(self, info: CollectionInfo, index_id: int) -> dict[str, Any]:
        """Returns the IndexCreated body for `info`. Raises InvalidArgument naming the problem."""
        return {"collection_id": info.collection_id, "index_id": index_id} | self.resolved(
            info.schema
        )

    def _indexed_field(self, schema: CollectionSchema) -> FieldSchema:
        """Returns the field the index names; with the dynamic field, a name outside the
        schema is a key of `$meta` (Milvus's GetFieldFromNameDefaultJSON). Raises
        InvalidArgument with Milvus's message for a field that does not exist."""
        if any(f.name == self.field_name for f in schema.fields):
            return schema.field(self.field_name)
        if not schema.enable_dynamic_field:
            raise InvalidArgument(f"cannot create index on non-exist field: {self.field_name}")
        return schema.field(META)

    def _vector_checks(self, kind: str, dim: int) -> tuple[str, dict[str, str]]:
        """Returns (the metric, the params as strings) of a vector index."""
        if kind not in VECTOR_INDEXES:
            raise InvalidArgument(
                f"index_type {self.index_type!r} is not one of "
                f"{sorted(VECTOR_INDEXES)} for vector field {self.field_name!r}"
            )
        metric = self.metric_type or DEFAULT_METRIC
        if not isinstance(metric, str) or metric.upper() not in METRICS:
            raise InvalidArgument(f"metric_type {metric!r} is not one of {list(METRICS)}")
        allowed = VECTOR_INDEXES[kind]
        params = {}
        for key, value in self._params().items():
            if key not in allowed:
                has = f"has {sorted(allowed)}" if allowed else "takes none"
                raise InvalidArgument(f"{kind} has no parameter {key!r} ({has})")
            params[key] = index_param(kind, key, value, *allowed[key][1:])
        if kind == "IVF_PQ" and dim % params.get("m", allowed["m"][0]):
            m = params.get("m", allowed["m"][0])
            raise InvalidArgument(
                f"IVF_PQ parameter 'm' ({m}) must divide the dim {dim} of {self.field_name!r}"
            )
        return metric.upper(), {k: str(v) for k, v in params.items()}

    def _binary_checks(self, kind: str) -> tuple[str, str, dict[str, str]]:
        """Returns (type, metric, params as strings) of an index on a binary field: BIN_FLAT
        (AUTOINDEX) or BIN_IVF_FLAT (nlist), metric HAMMING (default) or JACCARD."""
        kind = "BIN_FLAT" if kind == "AUTOINDEX" else kind
        if kind not in BINARY_INDEXES:
            raise InvalidArgument(
                f"index_type {kind} cannot index binary vector field {self.field_name!r}: use "
                f"one of {list(BINARY_INDEXES)}"
            )
        metric = (self.metric_type or BINARY_METRICS[0]).upper()
        if metric not in BINARY_METRICS:
            raise InvalidArgument(
                f"metric type {metric} not found or not supported, supported: "
                f"{list(BINARY_METRICS)}"
            )
        allowed, params = BINARY_INDEXES[kind], {}
        for key, value in self._params().items():
            if key not in allowed:
                raise InvalidArgument(f"{kind} has no parameter {key!r} (has {sorted(allowed)})")
            params[key] = str(index_param(kind, key, value, *allowed[key][1:]))
        return kind, metric, params

    def _params(self) -> dict[str, Any]:
        """Returns the build parameters given, without IGNORED_PARAMS."""
        if not isinstance(self.params, dict) or not all(isinstance(k, str) for k in self.params):
            raise InvalidArgument(f"index params must be a dict with str keys, not {self.params!r}")
        return {k: v for k, v in self.params.items() if k not in IGNORED_PARAMS}

    def _scalar_checks(self, kind: str, f: FieldSchema) -> tuple[str, dict[str, str]]:
        """Returns ("", the params as stored) of a scalar index (Milvus ignores a metric
        given with one). Raises InvalidArgument as scalar_params does."""
        if kind not in SCALAR_INDEXES:
            raise InvalidArgument(
                f"index_type {self.index_type!r} cannot index {f.dtype.value} field {f.name!r}"
            )
        params = self._params()
        params.pop("metric_type", None)
        if f.is_dynamic and f.name != self.field_name:  # a dynamic key: its path by default
            params.setdefault(JSON_PATH, self.field_name)
        return "", scalar_params(kind, f, params)


def index_param(kind: str, key: str, value: Any, lowest: int, highest: int) -> int:
    """Returns an index parameter given as an int or a decimal string (pymilvus sends
    strings). Raises InvalidArgument naming it unless it is an integer in [lowest, highest]."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    if number is None or not lowest <= number <= highest:
        raise InvalidArgument(
            f"{kind} parameter {key!r} must be an integer in [{lowest}, {highest}], not {value!r}"
        )
    return number


def shown_params(params: dict[str, str]) -> dict[str, Any]:
    """Returns stored index params as describe_index shows them: integers as ints (Milvus
    shows the JSON the client sent; pymilvus sends ints as JSON numbers)."""
    return {k: int(v) if v.isdigit() else v for k, v in params.items()}
