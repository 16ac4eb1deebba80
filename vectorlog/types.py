"""Public types of vectorlog's API: what a read reads at, index specifications, and the shapes
of results. They sit at the bottom layer (beside `vectorlog.model` and `vectorlog.errors`) so
the client, the proxy and every processor share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from vectorlog.errors import InvalidArgument
from vectorlog.model import CollectionInfo, DataType, check_name


@dataclass(frozen=True)
class ReadAt:
    """When a read reads: a consistency level or an `as_of` ts, and how long it may wait."""

    consistency_level: str = "Strong"
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
        if not isinstance(self.consistency_level, str):
            raise InvalidArgument(
                f"consistency_level must be a string, not {self.consistency_level!r}"
            )


MAX_TS = 1 << 63
STRONG = ReadAt()


@dataclass(frozen=True)
class SearchOptions:
    """A search's arguments beyond its vectors, limit, output fields and partitions, by
    MilvusClient's names (the proxy checks them): a filter expression and its `{param}`
    values, {"metric_type", "params"} of the index, the vector field, hits to skip, and a
    scalar field to group hits by."""

    filter: str | None = ""
    filter_params: dict[str, Any] | None = None
    search_params: dict[str, Any] | None = None
    anns_field: str | None = None
    offset: int = 0
    group_by_field: str | None = None


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


VECTOR_INDEXES: dict[str, dict[str, type]] = {
    "FLAT": {},
    "IVF_FLAT": {"nlist": int},
    "IVF_SQ8": {"nlist": int},
    "IVF_PQ": {"nlist": int, "m": int, "nbits": int},
    "HNSW": {"M": int, "efConstruction": int},
}
SCALAR_INDEXES = ("INVERTED", "STL_SORT")


@dataclass(frozen=True)
class IndexSpec:
    """One index to describe: field, type, metric and parameters."""

    field_name: str
    index_type: str = "FLAT"
    metric_type: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    index_name: str | None = None

    def event_body(self, info: CollectionInfo, index_id: int) -> dict[str, Any]:
        """Returns the IndexCreated body for `info`. Raises InvalidArgument naming the problem."""
        f = info.schema.field(self.field_name)
        name = check_name("index", self.index_name or self.field_name)
        kind = str(self.index_type).upper()
        if f.dtype is DataType.FLOAT_VECTOR:
            metric = self._vector_checks(kind, f.metric_type or "")
        else:
            metric = self._scalar_checks(kind, f.dtype)
        return {
            "collection_id": info.collection_id,
            "index_id": index_id,
            "index_name": name,
            "field_id": f.field_id,
            "field_name": f.name,
            "index_type": kind,
            "metric_type": metric,
            "params": {k: str(v) for k, v in self.params.items()},
        }

    def _vector_checks(self, kind: str, field_metric: str) -> str:
        if kind not in VECTOR_INDEXES:
            raise InvalidArgument(
                f"index_type {self.index_type!r} is not one of "
                f"{sorted(VECTOR_INDEXES)} for vector field {self.field_name!r}"
            )
        metric = (self.metric_type or field_metric).upper()
        if metric != field_metric:
            raise InvalidArgument(
                f"metric_type {metric!r} differs from field "
                f"{self.field_name!r}'s metric {field_metric!r}"
            )
        allowed = VECTOR_INDEXES[kind]
        for key, value in self.params.items():
            if key not in allowed:
                raise InvalidArgument(f"{kind} has no parameter {key!r} (has {sorted(allowed)})")
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidArgument(
                    f"{kind} parameter {key!r} must be a positive int, not {value!r}"
                )
        return metric

    def _scalar_checks(self, kind: str, dtype: DataType) -> str:
        if kind not in SCALAR_INDEXES or dtype is DataType.JSON:
            raise InvalidArgument(
                f"index_type {self.index_type!r} cannot index "
                f"{dtype.value} field {self.field_name!r}"
            )
        if self.params or self.metric_type:
            raise InvalidArgument(f"scalar index on {self.field_name!r} takes no metric or params")
        return ""
