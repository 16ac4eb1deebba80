"""What a Client builds before a create (MilvusClient's create_schema() and
prepare_index_params()): `SchemaBuilder` and `IndexParams`, and the indexes of either form
(ours or pymilvus's) read and checked against a schema before anything is created."""

from __future__ import annotations

from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.functions import FunctionSchema
from vectorlog.core.model import DENSE_TYPES, CollectionSchema, DataType, FieldSchema, metric_name
from vectorlog.core.scalar_index import index_target
from vectorlog.core.types import IndexSpec


class SchemaBuilder:
    """A collection schema under construction (MilvusClient.create_schema())."""

    def __init__(
        self, auto_id: bool = False, description: str = "", enable_dynamic_field: bool = False
    ) -> None:
        self.auto_id, self.description = auto_id, description
        self.enable_dynamic_field = enable_dynamic_field
        self.fields: list[FieldSchema] = []
        self.functions: list[FunctionSchema] = []

    def add_field(
        self,
        field_name: str,
        datatype: DataType,
        is_primary: bool = False,
        auto_id: bool | None = None,
        dim: int | None = None,
        max_length: int | None = None,
        metric_type: str | None = None,
        description: str = "",
        element_type: DataType | None = None,
        max_capacity: int | None = None,
        nullable: bool = False,
        default_value: Any = None,
        is_partition_key: bool = False,
        enable_analyzer: bool = False,
        analyzer_params: dict[str, Any] | None = None,
        enable_match: bool = False,
    ) -> SchemaBuilder:
        """Adds a field (ARRAY: `element_type`, `max_capacity`, and `max_length` for VARCHAR
        elements; scalars: `nullable`, `default_value`; `is_partition_key`: rows are routed to
        partitions by its hash); returns self so calls chain."""
        auto = (self.auto_id if auto_id is None else auto_id) if is_primary else False
        self.fields.append(
            FieldSchema(
                field_name,
                datatype,
                is_primary,
                auto,
                dim,
                metric_type,
                max_length,
                description,
                element_type=element_type,
                max_capacity=max_capacity,
                nullable=nullable,
                default_value=default_value,
                is_partition_key=is_partition_key,
                enable_analyzer=enable_analyzer,
                analyzer_params=analyzer_params,
                enable_match=enable_match,
            )
        )
        return self

    def add_function(self, function: Any) -> SchemaBuilder:
        """Adds a function (a pymilvus `Function`, e.g. BM25 from a VARCHAR field with
        enable_analyzer to a SPARSE_FLOAT_VECTOR field); returns self. Raises
        InvalidArgument for a type vectorlog does not run."""
        self.functions.append(FunctionSchema.of(function))
        return self

    def build(self, metric_type: str) -> CollectionSchema:
        fields = tuple(
            FieldSchema(
                f.name,
                f.dtype,
                f.is_primary,
                f.auto_id,
                f.dim,
                metric_name(f.metric_type or metric_type),
                f.max_length,
                f.description,
            )
            if f.dtype in DENSE_TYPES
            else f
            for f in self.fields
        )
        return CollectionSchema(
            fields,
            self.description,
            enable_dynamic_field=self.enable_dynamic_field,
            functions=tuple(self.functions),
        )


class IndexParams(list[IndexSpec]):
    """Indexes to create (MilvusClient.prepare_index_params())."""

    def add_index(
        self,
        field_name: str,
        index_type: str = "",
        index_name: str = "",
        metric_type: str | None = None,
        params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> IndexParams:
        """Adds an index, as pymilvus: `index_type` "" is AUTOINDEX, `metric_type` None is
        COSINE, the name defaults to the field's; other keyword arguments are build
        parameters like those of `params` (ints or decimal strings). Returns self."""
        build = {**(params or {}), **kwargs}
        self.append(IndexSpec(field_name, index_type, metric_type, build, index_name or None))
        return self


def index_specs(index_params: Any) -> list[IndexSpec]:
    """Returns the indexes of `index_params`: ours, or pymilvus's IndexParams (IndexParam
    objects with field_name, index_name and get_index_configs()). Raises InvalidArgument."""
    if not isinstance(index_params, (list, tuple)):
        raise InvalidArgument(f"index_params must be IndexParams, not {index_params!r:.60}")
    specs = []
    for p in index_params:
        if isinstance(p, IndexSpec):
            specs.append(p)
        elif hasattr(p, "field_name") and hasattr(p, "get_index_configs"):
            configs = dict(p.get_index_configs())
            kind, metric = configs.pop("index_type", ""), configs.pop("metric_type", None)
            build = {**(configs.pop("params", None) or {}), **configs}
            specs.append(IndexSpec(p.field_name, kind, metric, build, p.index_name or None))
        else:
            raise InvalidArgument(f"index_params holds {p!r:.60}, not an index")
    return specs


def check_indexes(schema: CollectionSchema, specs: list[IndexSpec]) -> None:
    """Checks `specs` against `schema` before anything is created: each valid, at most one
    per field and per name. Raises InvalidArgument naming the problem."""
    seen: dict[str, str] = {}
    for spec in specs:
        body = spec.resolved(schema)
        targets = {"field_name": index_target(body), "index_name": body["index_name"]}
        for key, target in targets.items():
            if seen.setdefault(f"{key}={target}", body["index_name"]) != body["index_name"]:
                raise InvalidArgument(f"index_params has two indexes with {key} {body[key]!r}")
