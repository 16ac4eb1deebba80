"""`vectorlog.Client`: MilvusClient-style methods over an embedded or Kafka-backed cluster.

`Client("./my.db")` opens embedded mode (all state under that directory, like Milvus Lite);
`Client("kafka://host:9092")` runs the same processors on Kafka.
"""

from __future__ import annotations

from typing import Any

from processors.errors import InvalidArgument
from processors.model import (
    CollectionInfo,
    CollectionSchema,
    DataType,
    FieldSchema,
    quick_schema,
)
from vectorlog.config import Config
from vectorlog.standalone import Standalone


class SchemaBuilder:
    """A collection schema under construction (MilvusClient.create_schema())."""

    def __init__(self, auto_id: bool = False, description: str = "") -> None:
        self.auto_id, self.description = auto_id, description
        self.fields: list[FieldSchema] = []

    def add_field(
        self, field_name: str, datatype: DataType, is_primary: bool = False,
        auto_id: bool | None = None, dim: int | None = None, max_length: int | None = None,
        metric_type: str | None = None, description: str = "",
    ) -> SchemaBuilder:
        """Adds a field; returns self so calls chain."""
        auto = (self.auto_id if auto_id is None else auto_id) if is_primary else False
        self.fields.append(FieldSchema(field_name, datatype, is_primary, auto, dim,
                                       metric_type, max_length, description))
        return self

    def build(self, metric_type: str) -> CollectionSchema:
        fields = tuple(
            FieldSchema(f.name, f.dtype, f.is_primary, f.auto_id, f.dim,
                        (f.metric_type or metric_type).upper(), f.max_length, f.description)
            if f.dtype is DataType.FLOAT_VECTOR else f for f in self.fields)
        return CollectionSchema(fields, self.description)


class Client:
    """A connection to a vectorlog cluster; a context manager."""

    def __init__(self, uri: str = "./vectorlog-data", **settings: Any) -> None:
        self.cfg = Config.load(log=uri, **settings)
        self._node = Standalone(self.cfg)
        self._session_ts = 0

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        self._node.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- collections ------------------------------------------------------------------------
    @staticmethod
    def create_schema(auto_id: bool = False, description: str = "") -> SchemaBuilder:
        return SchemaBuilder(auto_id, description)

    def create_collection(
        self, collection_name: str, dimension: int | None = None, *,
        schema: SchemaBuilder | CollectionSchema | None = None, primary_field_name: str = "id",
        id_type: str = "int", vector_field_name: str = "vector", metric_type: str = "COSINE",
        auto_id: bool = False, num_shards: int = 1, max_length: int = 65_535,
        properties: dict[str, str] | None = None,
    ) -> None:
        """Creates a collection: quick setup with `dimension=`, or a full `schema=`."""
        if schema is None:
            if dimension is None:
                raise InvalidArgument("create_collection needs dimension= or schema=")
            built = quick_schema(dimension, metric_type, auto_id, primary_field_name,
                                 vector_field_name, id_type, max_length)
        elif isinstance(schema, SchemaBuilder):
            built = schema.build(metric_type)
        else:
            built = schema
        self._node.rootcoord.create_collection(collection_name, built, num_shards, properties)

    def drop_collection(self, collection_name: str) -> None:
        self._node.rootcoord.drop_collection(collection_name)

    def has_collection(self, collection_name: str) -> bool:
        return self._node.rootcoord.meta.has(collection_name)

    def list_collections(self) -> list[str]:
        return self._node.rootcoord.meta.names()

    def describe_collection(self, collection_name: str) -> dict[str, Any]:
        """Returns MilvusClient's description of a collection. Raises CollectionNotFound."""
        return describe(self._node.rootcoord.meta.get(collection_name))

    def get_collection_stats(self, collection_name: str) -> dict[str, int]:
        """Returns {"row_count": rows visible now}."""
        return {"row_count": self._node.proxy.count(collection_name, session_ts=self._session_ts)}

    # -- data ---------------------------------------------------------------------------------
    def insert(self, collection_name: str, data: Any, partition_name: str | None = None
               ) -> dict[str, Any]:
        """Inserts rows; returns {insert_count, ids, timestamp} after the log made them durable."""
        res = self._node.proxy.insert(collection_name, data, partition_name)
        self._session_ts = max(self._session_ts, res["timestamp"])
        return res

    def delete(self, collection_name: str, ids: Any, partition_name: str | None = None
               ) -> dict[str, Any]:
        """Deletes rows by primary key; returns {delete_count, timestamp}."""
        res = self._node.proxy.delete(collection_name, ids, partition_name)
        self._session_ts = max(self._session_ts, res["timestamp"])
        return res

    def search(
        self, collection_name: str, data: Any, limit: int = 10,
        output_fields: list[str] | None = None, partition_names: list[str] | None = None,
        consistency_level: str = "Strong", as_of: int | None = None,
        timeout: float | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Returns, per query vector, up to `limit` hits {"id", "distance", "entity"}."""
        return self._node.proxy.search(collection_name, data, limit, output_fields,
                                       partition_names, consistency_level, self._session_ts,
                                       as_of, timeout)

    def get(
        self, collection_name: str, ids: Any, output_fields: list[str] | None = None,
        consistency_level: str = "Strong", as_of: int | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Returns the entities with these primary keys (all fields unless output_fields)."""
        return self._node.proxy.get(collection_name, ids, output_fields, None, consistency_level,
                                    self._session_ts, as_of, timeout)


def describe(info: CollectionInfo) -> dict[str, Any]:
    """Returns the MilvusClient-shaped description of a collection."""
    fields = []
    for f in info.schema.fields:
        params: dict[str, Any] = {}
        if f.dim is not None:
            params["dim"] = f.dim
        if f.max_length is not None:
            params["max_length"] = f.max_length
        if f.metric_type:
            params["metric_type"] = f.metric_type
        d = {"field_id": f.field_id, "name": f.name, "description": f.description,
             "type": f.dtype, "params": params}
        if f.is_primary:
            d.update(is_primary=True, auto_id=f.auto_id)
        fields.append(d)
    return {
        "collection_name": info.name, "collection_id": info.collection_id,
        "auto_id": info.schema.primary.auto_id, "num_shards": info.shards_num,
        "description": info.schema.description, "fields": fields, "aliases": [],
        "virtual_channel_names": list(info.vchannels), "num_partitions": len(info.partitions),
        "properties": dict(info.properties), "created_timestamp": info.created_ts,
        "enable_dynamic_field": False,
    }
