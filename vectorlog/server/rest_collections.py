"""REST v2 handlers of collections, partitions, aliases and indexes: each reads its typed
request fields and calls the in-process Client; returns the envelope's `data`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vectorlog.core.errors import CollectionNotFound
from vectorlog.core.types import level_name
from vectorlog.sdk.client import Client, IndexParams, SchemaBuilder
from vectorlog.server.rest_convert import (
    TYPE_NAMES,
    Field,
    data_type,
    int_param,
    jsonable,
    parse,
)
from vectorlog.server.rest_errors import bad_format
from vectorlog.server.rest_functions import rest_analyzer, rest_function

Handler = Callable[[Client, Any], Any]

NAME = {"collectionName": Field("str", required=True)}
PARTITION = {**NAME, "partitionName": Field("str", required=True)}
LOADED = {"loadState": "LoadStateLoaded", "loadProgress": 100}
NOT_LOADED = "LoadStateNotLoad"


def _name(body: Any, **extra: Field) -> str:
    return str(parse(body, {**NAME, **extra})["collectionName"])


def list_collections(c: Client, body: Any) -> Any:
    parse(body, {})
    return c.list_collections()


def has_collection(c: Client, body: Any) -> Any:
    return {"has": c.has_collection(_name(body))}


def drop_collection(c: Client, body: Any) -> Any:
    c.drop_collection(_name(body))


def rename_collection(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "newCollectionName": Field("str", required=True)})
    c.rename_collection(args["collectionName"], args["newCollectionName"])


def alter_properties(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "properties": Field("dict", required=True)})
    c.alter_collection_properties(args["collectionName"], args["properties"])


def drop_properties(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "propertyKeys": Field("list", required=True)})
    c.drop_collection_properties(args["collectionName"], args["propertyKeys"])


def load_collection(c: Client, body: Any) -> Any:
    c.load_collection(_name(body))


def release_collection(c: Client, body: Any) -> Any:
    c.release_collection(_name(body))


def get_load_state(c: Client, body: Any) -> Any:
    """Returns {"loadState", "loadProgress"}; {"loadState": "LoadStateNotLoad"} (no progress,
    as Milvus) if the collection or a partition named is released."""
    args = parse(body, {**NAME, "partitionNames": Field("list")})
    name = args["collectionName"]
    names = [str(p) for p in args.get("partitionNames") or []] or [""]
    if any(c.get_load_state(name, p)["state"] == "NotLoad" for p in names):
        return {"loadState": NOT_LOADED}
    return dict(LOADED)


def get_stats(c: Client, body: Any) -> Any:
    return {"rowCount": c.get_collection_stats(_name(body))["row_count"]}


def flush(c: Client, body: Any) -> Any:
    c.flush(_name(body))


def describe_collection(c: Client, body: Any) -> Any:
    """Returns Milvus's REST description: fields with {key, value} params, indexes."""
    try:
        d = c.describe_collection(_name(body))
    except CollectionNotFound as exc:  # Milvus's DescribeCollection words it so
        raise CollectionNotFound(exc.name, exc.database, described=True) from None
    fields = [_field(f) for f in d["fields"]]
    indexes = []
    for index in d["indexes"]:
        ix = c.describe_index(d["collection_name"], index)
        indexes.append(
            {
                "fieldName": ix["field_name"],
                "indexName": index,
                "metricType": ix.get("metric_type", ""),
            }
        )
    return {
        "collectionName": d["collection_name"],
        "collectionID": d["collection_id"],
        "description": d["description"],
        "autoId": d["auto_id"],
        "fields": fields,
        "indexes": indexes,
        "load": NOT_LOADED if _released(c, d["collection_name"]) else LOADED["loadState"],
        "shardsNum": d["num_shards"],
        "partitionsNum": d["num_partitions"],
        "consistencyLevel": level_name(d["consistency_level"]),
        "enableDynamicField": d["enable_dynamic_field"],
        "aliases": d["aliases"],
        "properties": [{"key": k, "value": v} for k, v in d["properties"].items()],
    }


def _released(c: Client, name: str) -> bool:
    return c.get_load_state(name)["state"] == "NotLoad"


def _field(f: dict[str, Any]) -> dict[str, Any]:
    out = {
        "name": f["name"],
        "id": f["field_id"],
        "type": TYPE_NAMES[f["type"]],
        "description": f["description"],
        "primaryKey": bool(f.get("is_primary")),
        "autoId": bool(f.get("auto_id")),
        "partitionKey": bool(f.get("is_partition_key")),
        "clusteringKey": False,
        "params": [{"key": k, "value": str(v)} for k, v in f["params"].items()],
    }
    if "element_type" in f:
        out["elementType"] = TYPE_NAMES[f["element_type"]]
    out["nullable"] = bool(f.get("nullable"))
    if f.get("default_value") is not None:
        out["defaultValue"] = f["default_value"]
    return out


# -- create ----------------------------------------------------------------------------------
CREATE = {
    **NAME,
    "dimension": Field("int"),
    "metricType": Field("str", default="COSINE"),
    "idType": Field("str", default="Int64"),
    "autoId": Field("bool", default=False),
    "primaryFieldName": Field("str", default="id"),
    "vectorFieldName": Field("str", default="vector"),
    "description": Field("str", default=""),
    "schema": Field("dict"),
    "indexParams": Field("list"),
    "params": Field("dict", default={}),
    "consistencyLevel": Field("str"),  # as params.consistencyLevel
}
#: a collection created without a level reads Bounded, as Milvus's REST v2 (its reads that
#: name no level; vectorlog's own Client defaults to Strong)
REST_DEFAULT_LEVEL = "Bounded"
#: the quick setup's `params` vectorlog honours (others, e.g. partitionsNum, are refused)
QUICK_PARAMS = frozenset({"max_length", "shardsNum", "enableDynamicField", "consistencyLevel"})
#: what a full-schema create's `params` may hold besides (partitionsNum: a partition key's)
SCHEMA_PARAMS = QUICK_PARAMS | {"partitionsNum"}
_ID_TYPES = {"int64": "int", "varchar": "string"}


def create_collection(c: Client, body: Any) -> Any:
    """Quick setup (dimension) or a full schema (schema + indexParams), as Milvus."""
    args = parse(body, CREATE)
    params = args["params"]
    allowed = QUICK_PARAMS if args["schema"] is None else SCHEMA_PARAMS
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise bad_format(f"params {unknown} are not supported (only {sorted(allowed)})")
    shards = int_param(params, "shardsNum", "params") or 1
    level = params.get("consistencyLevel", args["consistencyLevel"]) or REST_DEFAULT_LEVEL
    if args["schema"] is None:
        _create_quick(c, args, shards, level)
        return
    if args["dimension"] is not None:
        raise bad_format("give dimension (quick setup) or schema, not both")
    schema = build_schema(args["schema"], args["description"])
    indexes = index_params(args["indexParams"] or [])
    c.create_collection(
        args["collectionName"],
        schema=schema,
        index_params=indexes,
        num_shards=shards,
        num_partitions=int_param(params, "partitionsNum", "params") or 0,
        consistency_level=level,
    )


def _create_quick(c: Client, args: dict[str, Any], shards: int, level: str) -> None:
    """Creates a quick-setup collection: primary key, vector field, an AUTOINDEX index."""
    if args["dimension"] is None:
        raise bad_format("create needs dimension (quick setup) or schema")
    id_type = _ID_TYPES.get(args["idType"].lower())
    if id_type is None:
        raise bad_format(f"idType must be Int64 or VarChar, not {args['idType']!r}")
    params = args["params"]
    c.create_collection(
        args["collectionName"],
        args["dimension"],
        primary_field_name=args["primaryFieldName"],
        id_type=id_type,
        vector_field_name=args["vectorFieldName"],
        metric_type=args["metricType"],
        auto_id=args["autoId"],
        num_shards=shards,
        max_length=int_param(params, "max_length", "params") or 65_535,
        index_params=index_params(args["indexParams"]) if args["indexParams"] else None,
        enable_dynamic_field=_flag(params, "enableDynamicField", True),
        consistency_level=level,
    )


def _flag(params: dict[str, Any], key: str, default: bool) -> bool:
    """Returns the boolean `params[key]` (true/false or "true"/"false"). Raises
    RequestError (1801)."""
    value = params.get(key, default)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise bad_format(f"params: {key} must be a boolean, not {value!r}")
    return value


SCHEMA = {
    "autoId": Field("bool", default=False),
    "enableDynamicField": Field("bool", default=False),
    "fields": Field("list", required=True),
    "description": Field("str", default=""),
    "functions": Field("list", default=[]),
}
FIELD = {
    "fieldName": Field("str", required=True),
    "dataType": Field("str", required=True),
    "isPrimary": Field("bool", default=False),
    "autoId": Field("bool"),
    "description": Field("str", default=""),
    "elementTypeParams": Field("dict", default={}),
    "elementDataType": Field("str"),
    "isPartitionKey": Field("bool", default=False),
    "nullable": Field("bool", default=False),
    "defaultValue": Field("any"),
}


def build_schema(body: dict[str, Any], description: str) -> SchemaBuilder:
    """Returns the schema of a full create's `schema` object. Raises RequestError."""
    args = parse(body, SCHEMA, "schema")
    schema = SchemaBuilder(
        args["autoId"], description or args["description"], args["enableDynamicField"]
    )
    for i, raw in enumerate(args["fields"]):
        _add_field(schema, raw, f"schema.fields[{i}]")
    for i, raw in enumerate(args["functions"]):
        schema.add_function(rest_function(raw, f"schema.functions[{i}]"))
    return schema


def _add_field(schema: SchemaBuilder, raw: Any, where: str) -> None:
    """Adds the field of one REST field object to `schema`. Raises RequestError."""
    f = parse(raw, FIELD, where)
    what = f"field {f['fieldName']!r}"
    params = f["elementTypeParams"]
    element = f["elementDataType"]
    schema.add_field(
        f["fieldName"],
        data_type(f["dataType"], what),
        is_primary=f["isPrimary"],
        auto_id=f["autoId"],
        dim=int_param(params, "dim", what),
        max_length=int_param(params, "max_length", what),
        description=f["description"],
        element_type=None if element is None else data_type(element, what),
        max_capacity=int_param(params, "max_capacity", what),
        nullable=f["nullable"],
        default_value=f["defaultValue"],
        is_partition_key=f["isPartitionKey"],
        **rest_analyzer(params, what),
    )


def add_field(c: Client, body: Any) -> Any:
    """collections/fields/add: `schema` is one field object, as in a create's fields."""
    args = parse(body, {**NAME, "schema": Field("dict", required=True)})
    builder = SchemaBuilder()
    _add_field(builder, args["schema"], "schema")
    c.add_collection_field(args["collectionName"], builder.fields[0])


INDEX = {
    "fieldName": Field("str", required=True),
    "indexName": Field("str"),
    "metricType": Field("str"),
    "indexType": Field("str"),
    "params": Field("dict", default={}),
}


def index_params(items: list[Any]) -> IndexParams:
    """Returns the indexes of an `indexParams` list ({fieldName, indexName, metricType,
    indexType or params.index_type, params}). Raises RequestError."""
    out = IndexParams()
    for i, raw in enumerate(items):
        ix = parse(raw, INDEX, f"indexParams[{i}]")
        params = dict(ix["params"])
        kind = ix["indexType"] or params.pop("index_type", "") or ""
        params.pop("metric_type", None)
        out.add_index(ix["fieldName"], kind, ix["indexName"] or "", ix["metricType"], params)
    return out


# -- partitions ------------------------------------------------------------------------------
def list_partitions(c: Client, body: Any) -> Any:
    return c.list_partitions(_name(body))


def has_partition(c: Client, body: Any) -> Any:
    args = parse(body, PARTITION)
    return {"has": c.has_partition(args["collectionName"], args["partitionName"])}


def create_partition(c: Client, body: Any) -> Any:
    args = parse(body, PARTITION)
    c.create_partition(args["collectionName"], args["partitionName"])


def load_partitions(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "partitionNames": Field("list", required=True)})
    c.load_partitions(args["collectionName"], [str(p) for p in args["partitionNames"]])


def release_partitions(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "partitionNames": Field("list", required=True)})
    c.release_partitions(args["collectionName"], [str(p) for p in args["partitionNames"]])


def drop_partition(c: Client, body: Any) -> Any:
    args = parse(body, PARTITION)
    c.drop_partition(args["collectionName"], args["partitionName"])


# -- indexes ---------------------------------------------------------------------------------
def list_indexes(c: Client, body: Any) -> Any:
    return c.list_indexes(_name(body))


def describe_index(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "indexName": Field("str", required=True)})
    ix = c.describe_index(args["collectionName"], args["indexName"])
    return [
        {
            "indexName": ix["index_name"],
            "fieldName": ix["field_name"],
            "indexType": ix["index_type"],
            "metricType": ix.get("metric_type", ""),
            "params": jsonable(ix["params"]),
            "indexState": ix["state"],
            "totalRows": ix["total_rows"],
            "indexedRows": ix["indexed_rows"],
            "pendingRows": ix["pending_index_rows"],
            "failReason": ix.get("index_state_fail_reason", ""),
        }
    ]


def create_index(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "indexParams": Field("list", required=True)})
    c.create_index(args["collectionName"], index_params(args["indexParams"]))


def drop_index(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, "indexName": Field("str", required=True)})
    c.drop_index(args["collectionName"], args["indexName"])


# -- aliases ---------------------------------------------------------------------------------
ALIAS = {"aliasName": Field("str", required=True)}


def list_aliases(c: Client, body: Any) -> Any:
    args = parse(body, {"collectionName": Field("str", default="")})
    return c.list_aliases(args["collectionName"])["aliases"]


def describe_alias(c: Client, body: Any) -> Any:
    alias = parse(body, ALIAS)["aliasName"]
    d = c.describe_alias(alias)
    return {"aliasName": alias, "collectionName": d["collection_name"], "dbName": c.db}


def create_alias(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, **ALIAS})
    c.create_alias(args["collectionName"], args["aliasName"])


def alter_alias(c: Client, body: Any) -> Any:
    args = parse(body, {**NAME, **ALIAS})
    c.alter_alias(args["collectionName"], args["aliasName"])


def drop_alias(c: Client, body: Any) -> Any:
    c.drop_alias(parse(body, ALIAS)["aliasName"])


ROUTES: dict[str, Handler] = {
    "collections/list": list_collections,
    "collections/has": has_collection,
    "collections/describe": describe_collection,
    "collections/create": create_collection,
    "collections/drop": drop_collection,
    "collections/rename": rename_collection,
    "collections/alter_properties": alter_properties,
    "collections/drop_properties": drop_properties,
    "collections/fields/add": add_field,
    "collections/load": load_collection,
    "collections/release": release_collection,
    "collections/get_load_state": get_load_state,
    "collections/get_stats": get_stats,
    "collections/flush": flush,
    "partitions/list": list_partitions,
    "partitions/has": has_partition,
    "partitions/create": create_partition,
    "partitions/drop": drop_partition,
    "partitions/load": load_partitions,
    "partitions/release": release_partitions,
    "indexes/list": list_indexes,
    "indexes/describe": describe_index,
    "indexes/create": create_index,
    "indexes/drop": drop_index,
    "aliases/list": list_aliases,
    "aliases/describe": describe_alias,
    "aliases/create": create_alias,
    "aliases/alter": alter_alias,
    "aliases/drop": drop_alias,
}
