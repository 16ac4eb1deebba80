"""Collections as MilvusClient's describe_collection describes them: their fields (with
analyzer params), functions, partitions, indexes, properties and consistency level."""

from __future__ import annotations

from typing import Any

from vectorlog.core.functions import FunctionSchema, output_of
from vectorlog.core.model import CollectionInfo, FieldSchema
from vectorlog.core.types import CONSISTENCY_PROPERTY, LEVEL_CODES, collection_level


def describe(info: CollectionInfo) -> dict[str, Any]:
    """Returns the MilvusClient-shaped description of a collection (without the dynamic
    field `$meta`, as Milvus)."""
    fields = []
    for f in info.schema.user_fields:
        params: dict[str, Any] = {}
        if f.dim is not None:
            params["dim"] = f.dim
        if f.max_length is not None:
            params["max_length"] = f.max_length
        if f.metric_type:
            params["metric_type"] = f.metric_type
        if f.max_capacity is not None:
            params["max_capacity"] = f.max_capacity
        params |= analyzer_description(f)
        d = {
            "field_id": f.field_id,
            "name": f.name,
            "description": f.description,
            "type": f.dtype,
            "params": params,
        }
        if f.is_primary:
            d.update(is_primary=True, auto_id=f.auto_id)
        if f.is_partition_key:
            d["is_partition_key"] = True
        if f.element_type is not None:
            d["element_type"] = f.element_type
        if f.nullable:
            d["nullable"] = True
        if f.default_value is not None:
            d["default_value"] = f.default_value
        if output_of(info.schema, f.name) is not None:
            d["is_function_output"] = True
        fields.append(d)
    return {
        "collection_name": info.name,
        "collection_id": info.collection_id,
        "auto_id": info.schema.primary.auto_id,
        "num_shards": info.shards_num,
        "description": info.schema.description,
        "fields": fields,
        "aliases": list(info.aliases),
        "virtual_channel_names": list(info.vchannels),
        "num_partitions": len(info.partitions),
        "partitions": sorted(info.partitions, key=lambda n: info.partitions[n]),
        "indexes": sorted(info.indexes),
        "properties": {k: v for k, v in info.properties.items() if k != CONSISTENCY_PROPERTY},
        "consistency_level": LEVEL_CODES[collection_level(info.properties)],
        "created_timestamp": info.created_ts,
        "enable_dynamic_field": info.schema.enable_dynamic_field,
        "functions": [function_description(fn) for fn in info.schema.functions],
    }


def analyzer_description(f: FieldSchema) -> dict[str, Any]:
    """Returns the analyzer params of a field as Milvus describes them."""
    out: dict[str, Any] = {}
    if f.enable_analyzer:
        out["enable_analyzer"] = True
    if f.analyzer_params is not None:
        out["analyzer_params"] = f.analyzer_params
    if f.enable_match:
        out["enable_match"] = True
    return out


def function_description(fn: FunctionSchema) -> dict[str, Any]:
    """Returns a function as MilvusClient's describe_collection lists it."""
    return {
        "name": fn.name,
        "description": fn.description,
        "type": fn.type,
        "input_field_names": list(fn.input_field_names),
        "output_field_names": list(fn.output_field_names),
        "params": dict(fn.params),
    }
