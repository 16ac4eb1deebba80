"""Milvus's gRPC MilvusService over an in-process `vectorlog.Client`: each RPC maps its
request onto the Client and its result onto Milvus's response; every error becomes a Milvus
status (vectorlog.server.grpc_status) and RPCs vectorlog does not serve answer merr 10."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from google.protobuf.message_factory import GetMessageClass
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc, schema_pb2

from vectorlog.client import Client, IndexParams
from vectorlog.errors import IndexNotFound, InvalidArgument, VectorlogError
from vectorlog.hybridts import physical_ms
from vectorlog.model import CollectionInfo
from vectorlog.server import grpc_convert as conv
from vectorlog.server.grpc_status import ok, status_of, unimplemented
from vectorlog.types import Hit, IndexSpec

log = logging.getLogger(__name__)
SERVICE = milvus_pb2.DESCRIPTOR.services_by_name["MilvusService"]
#: the Milvus version GetVersion reports: the protocol vectorlog speaks (pymilvus checks it)
MILVUS_VERSION = "v2.5.0"
_LEVELS = {0: "Strong", 1: "Session", 2: "Bounded", 3: "Eventually"}
_LOADED = common_pb2.LoadState.LoadStateLoaded


def response_class(rpc: str) -> Any:
    """Returns the protobuf class of an RPC's response."""
    return GetMessageClass(SERVICE.methods_by_name[rpc].output_type)


def _failed(rpc: str, status: common_pb2.Status) -> Any:
    cls = response_class(rpc)
    return status if cls is common_pb2.Status else cls(status=status)


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps an RPC handler: any exception becomes the Milvus error status of its response
    (unexpected ones are logged); nothing escapes to gRPC."""

    @functools.wraps(method)
    def handler(self: Any, request: Any, context: Any) -> Any:
        try:
            return method(self, request, context)
        except Exception as exc:
            if not isinstance(exc, VectorlogError):
                log.exception("gRPC %s failed", method.__name__)
            return _failed(method.__name__, status_of(exc))

    return handler


def _level(request: Any) -> str:
    if request.use_default_consistency:
        return "Strong"  # vectorlog's default level (Milvus's collection default is Bounded)
    return _LEVELS.get(request.consistency_level, "Strong")


def _deadline(context: Any) -> float | None:
    """Returns the seconds left before the caller's gRPC deadline (None without one): a read
    waits for its consistency level at most that long."""
    left = context.time_remaining() if context is not None else None
    return left if left is not None and left > 0 else None


def _partitions(names: Any) -> list[str] | None:
    return list(names) or None


class MilvusServicer(milvus_pb2_grpc.MilvusServiceServicer):
    """The MilvusService RPCs vectorlog serves, over one in-process Client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _info(self, name: str) -> CollectionInfo:
        return self.client.cluster.proxy.describe_collection(name)

    # -- connection -----------------------------------------------------------------------------
    @rpc
    def Connect(self, request: Any, context: Any) -> Any:
        info = common_pb2.ServerInfo(build_tags=MILVUS_VERSION, deploy_mode="vectorlog")
        return milvus_pb2.ConnectResponse(status=ok(), server_info=info, identifier=1)

    @rpc
    def GetVersion(self, request: Any, context: Any) -> Any:
        return milvus_pb2.GetVersionResponse(status=ok(), version=MILVUS_VERSION)

    @rpc
    def AllocTimestamp(self, request: Any, context: Any) -> Any:
        ts = self.client.cluster.tso.allocate(1)
        return milvus_pb2.AllocTimestampResponse(status=ok(), timestamp=ts)

    # -- collections ----------------------------------------------------------------------------
    @rpc
    def CreateCollection(self, request: Any, context: Any) -> Any:
        schema = conv.schema_from_bytes(request.schema)
        properties = conv.kv_dict(request.properties) or None
        shards = request.shards_num or 1
        self.client.create_collection(
            request.collection_name, schema=schema, num_shards=shards, properties=properties
        )
        return ok()

    @rpc
    def DescribeCollection(self, request: Any, context: Any) -> Any:
        info = self._info(request.collection_name)
        return milvus_pb2.DescribeCollectionResponse(
            status=ok(),
            schema=conv.schema_to_proto(info),
            collectionID=info.collection_id,
            virtual_channel_names=info.vchannels,
            created_timestamp=info.created_ts,
            created_utc_timestamp=physical_ms(info.created_ts),
            shards_num=info.shards_num,
            aliases=info.aliases,
            consistency_level=common_pb2.Strong,
            collection_name=info.name,
            properties=conv.kv_pairs(info.properties),
            db_name="default",
            num_partitions=len(info.partitions),
        )

    @rpc
    def HasCollection(self, request: Any, context: Any) -> Any:
        value = self.client.has_collection(request.collection_name)
        return milvus_pb2.BoolResponse(status=ok(), value=value)

    @rpc
    def ShowCollections(self, request: Any, context: Any) -> Any:
        names = self.client.list_collections()
        return milvus_pb2.ShowCollectionsResponse(status=ok(), collection_names=names)

    @rpc
    def DropCollection(self, request: Any, context: Any) -> Any:
        self.client.drop_collection(request.collection_name)
        return ok()

    @rpc
    def RenameCollection(self, request: Any, context: Any) -> Any:
        self.client.rename_collection(request.oldName, request.newName)
        return ok()

    @rpc
    def GetCollectionStatistics(self, request: Any, context: Any) -> Any:
        rows = self.client.get_collection_stats(request.collection_name)["row_count"]
        stats = conv.kv_pairs({"row_count": rows})
        return milvus_pb2.GetCollectionStatisticsResponse(status=ok(), stats=stats)

    # -- loading: vectorlog serves every collection loaded --------------------------------------
    @rpc
    def LoadCollection(self, request: Any, context: Any) -> Any:
        self._info(request.collection_name)
        return ok()

    @rpc
    def ReleaseCollection(self, request: Any, context: Any) -> Any:
        self._info(request.collection_name)
        return ok()

    @rpc
    def LoadPartitions(self, request: Any, context: Any) -> Any:
        self._info(request.collection_name)
        return ok()

    @rpc
    def ReleasePartitions(self, request: Any, context: Any) -> Any:
        self._info(request.collection_name)
        return ok()

    @rpc
    def GetLoadState(self, request: Any, context: Any) -> Any:
        self._info(request.collection_name)
        return milvus_pb2.GetLoadStateResponse(status=ok(), state=_LOADED)

    @rpc
    def GetLoadingProgress(self, request: Any, context: Any) -> Any:
        self._info(request.collection_name)
        return milvus_pb2.GetLoadingProgressResponse(
            status=ok(), progress=100, refresh_progress=100
        )

    # -- partitions -----------------------------------------------------------------------------
    @rpc
    def CreatePartition(self, request: Any, context: Any) -> Any:
        self.client.create_partition(request.collection_name, request.partition_name)
        return ok()

    @rpc
    def DropPartition(self, request: Any, context: Any) -> Any:
        self.client.drop_partition(request.collection_name, request.partition_name)
        return ok()

    @rpc
    def HasPartition(self, request: Any, context: Any) -> Any:
        value = self.client.has_partition(request.collection_name, request.partition_name)
        return milvus_pb2.BoolResponse(status=ok(), value=value)

    @rpc
    def ShowPartitions(self, request: Any, context: Any) -> Any:
        parts = self._info(request.collection_name).partitions
        names = sorted(parts, key=lambda n: parts[n])
        return milvus_pb2.ShowPartitionsResponse(
            status=ok(), partition_names=names, partitionIDs=[parts[n] for n in names]
        )

    # -- aliases --------------------------------------------------------------------------------
    @rpc
    def CreateAlias(self, request: Any, context: Any) -> Any:
        self.client.create_alias(request.collection_name, request.alias)
        return ok()

    @rpc
    def DropAlias(self, request: Any, context: Any) -> Any:
        self.client.drop_alias(request.alias)
        return ok()

    @rpc
    def AlterAlias(self, request: Any, context: Any) -> Any:
        self.client.alter_alias(request.collection_name, request.alias)
        return ok()

    @rpc
    def DescribeAlias(self, request: Any, context: Any) -> Any:
        target = self.client.describe_alias(request.alias)["collection_name"]
        return milvus_pb2.DescribeAliasResponse(
            status=ok(), db_name="default", alias=request.alias, collection=target
        )

    @rpc
    def ListAliases(self, request: Any, context: Any) -> Any:
        res = self.client.list_aliases(request.collection_name)
        return milvus_pb2.ListAliasesResponse(
            status=ok(),
            db_name="default",
            collection_name=res["collection_name"],
            aliases=res["aliases"],
        )

    # -- indexes --------------------------------------------------------------------------------
    @rpc
    def CreateIndex(self, request: Any, context: Any) -> Any:
        self.client.create_index(request.collection_name, IndexParams([index_spec(request)]))
        return ok()

    @rpc
    def DescribeIndex(self, request: Any, context: Any) -> Any:
        name = request.collection_name
        names = [request.index_name] if request.index_name else self.client.list_indexes(name)
        if not names:
            raise IndexNotFound(name, "")
        described = [index_description(self.client.describe_index(name, n)) for n in names]
        return milvus_pb2.DescribeIndexResponse(status=ok(), index_descriptions=described)

    @rpc
    def DropIndex(self, request: Any, context: Any) -> Any:
        self.client.drop_index(request.collection_name, request.index_name)
        return ok()

    # -- flush ----------------------------------------------------------------------------------
    @rpc
    def Flush(self, request: Any, context: Any) -> Any:
        res = milvus_pb2.FlushResponse(status=ok(), db_name="default")
        for name in request.collection_names:
            ids = self.client.flush(name)
            res.coll_segIDs[name].data.extend(ids)
            res.flush_coll_segIDs[name].data.extend(ids)
        return res

    @rpc
    def GetFlushState(self, request: Any, context: Any) -> Any:
        flushed = self.client.get_flush_state(list(request.segmentIDs))
        return milvus_pb2.GetFlushStateResponse(status=ok(), flushed=flushed)

    # -- data -----------------------------------------------------------------------------------
    @rpc
    def Insert(self, request: Any, context: Any) -> Any:
        rows = conv.rows_from_columns(request.fields_data, request.num_rows)
        part = request.partition_name or None
        res = self.client.insert(request.collection_name, rows, part)
        return _mutation(res["ids"], res["timestamp"], insert_cnt=res["insert_count"])

    @rpc
    def Upsert(self, request: Any, context: Any) -> Any:
        rows = conv.rows_from_columns(request.fields_data, request.num_rows)
        part = request.partition_name or None
        res = self.client.upsert(request.collection_name, rows, part)
        return _mutation(res["ids"], res["timestamp"], upsert_cnt=res["upsert_count"])

    @rpc
    def Delete(self, request: Any, context: Any) -> Any:
        part = request.partition_name or None
        res = self.client.delete(
            request.collection_name,
            filter=request.expr,
            partition_name=part,
            filter_params=conv.filter_params(request.expr_template_values),
        )
        return _mutation([], res["timestamp"], delete_cnt=res["delete_count"])

    @rpc
    def Query(self, request: Any, context: Any) -> Any:
        params = conv.kv_dict(request.query_params)
        limit = int(params["limit"]) if "limit" in params else None
        rows = self.client.query(
            request.collection_name,
            request.expr,
            list(request.output_fields) or None,
            ids=None,
            partition_names=_partitions(request.partition_names),
            limit=limit,
            offset=int(params.get("offset", 0)),
            consistency_level=_level(request),
            filter_params=conv.filter_params(request.expr_template_values),
            timeout=_deadline(context),
        )
        info = self._info(request.collection_name)
        columns, names = _result_columns(rows, info)
        return milvus_pb2.QueryResults(
            status=ok(),
            fields_data=columns,
            collection_name=request.collection_name,
            output_fields=names,
            primary_field_name=info.schema.primary.name,
        )

    @rpc
    def Search(self, request: Any, context: Any) -> Any:
        params = conv.search_params(request.search_params)
        topk = int(params.get("topk", 10))
        hits = self.client.search(
            request.collection_name,
            conv.vectors_from_placeholder(request.placeholder_group),
            filter=request.dsl,
            limit=topk,
            output_fields=list(request.output_fields) or None,
            search_params=_index_search_params(params),
            partition_names=_partitions(request.partition_names),
            anns_field=params.get("anns_field") or None,
            consistency_level=_level(request),
            offset=int(params.get("offset", 0)),
            group_by_field=params.get("group_by_field") or None,
            filter_params=conv.filter_params(request.expr_template_values),
            timeout=_deadline(context),
        )
        info = self._info(request.collection_name)
        return milvus_pb2.SearchResults(
            status=ok(), results=search_result(hits, topk, info), collection_name=info.name
        )


def _index_search_params(params: dict[str, Any]) -> dict[str, Any]:
    inner = params.get("params") or {}
    if not isinstance(inner, dict):
        raise InvalidArgument(f"search params must be a JSON object, not {inner!r:.60}")
    out: dict[str, Any] = {"params": inner}
    if params.get("metric_type"):
        out["metric_type"] = params["metric_type"]
    return out


def _mutation(ids: list[Any], ts: int, **counts: int) -> Any:
    return milvus_pb2.MutationResult(
        status=ok(),
        IDs=conv.ids_proto(ids),
        succ_index=range(len(ids)),
        timestamp=ts,
        **counts,
    )


def _result_columns(rows: list[dict[str, Any]], info: CollectionInfo) -> tuple[list, list[str]]:
    if rows and list(rows[0]) == ["count(*)"]:
        fd = schema_pb2.FieldData(type=schema_pb2.Int64, field_name="count(*)")
        fd.scalars.long_data.data.append(int(rows[0]["count(*)"]))
        return [fd], ["count(*)"]
    return conv.columns_from_rows(rows, info.schema)


def search_result(hits: list[list[Hit]], topk: int, info: CollectionInfo) -> Any:
    """Returns the SearchResultData of per-query hits: ids, scores and entities flattened,
    `topks` the number of hits of each query."""
    flat = [h for per_query in hits for h in per_query]
    columns, names = conv.columns_from_rows([h["entity"] for h in flat], info.schema)
    return schema_pb2.SearchResultData(
        num_queries=len(hits),
        top_k=topk,
        fields_data=columns,
        scores=[float(h["distance"]) for h in flat],
        ids=conv.ids_proto([h["id"] for h in flat]),
        topks=[len(q) for q in hits],
        output_fields=names,
        primary_field_name=info.schema.primary.name,
    )


def index_spec(request: Any) -> IndexSpec:
    """Returns the IndexSpec of a CreateIndexRequest: extra_params' index_type, metric_type
    and JSON `params`, other keys as build parameters. Raises InvalidArgument."""
    params = conv.kv_dict(request.extra_params)
    kind, metric = params.pop("index_type", ""), params.pop("metric_type", None)
    try:
        inner = json.loads(params.pop("params", "{}"))
    except ValueError:
        raise InvalidArgument("index params must be a JSON object") from None
    if not isinstance(inner, dict):
        raise InvalidArgument(f"index params must be a JSON object, not {inner!r:.60}")
    build = {**inner, **params}
    return IndexSpec(request.field_name, kind, metric, build, request.index_name or None)


def index_description(d: dict[str, Any]) -> Any:
    """Returns the IndexDescription of Client.describe_index's dict."""
    params = {"index_type": d["index_type"], "metric_type": d["metric_type"]}
    params["params"] = json.dumps(d.get("params") or {})
    done = d.get("state") == "Finished"
    return milvus_pb2.IndexDescription(
        index_name=d["index_name"],
        field_name=d["field_name"],
        params=conv.kv_pairs({k: v for k, v in params.items() if v is not None}),
        indexed_rows=d.get("indexed_rows", 0),
        total_rows=d.get("total_rows", 0),
        pending_index_rows=d.get("pending_index_rows", 0),
        state=common_pb2.Finished if done else common_pb2.InProgress,
    )


def _unimplemented_handler(name: str) -> Callable[..., Any]:
    def handler(self: Any, request: Any, context: Any) -> Any:
        return _failed(name, unimplemented(name))

    handler.__name__ = name
    return handler


def _install_unimplemented(cls: type) -> None:
    """Gives every unary MilvusService RPC `cls` does not serve a handler answering merr 10."""
    for method in SERVICE.methods:
        if method.name in cls.__dict__ or method.client_streaming or method.server_streaming:
            continue
        setattr(cls, method.name, _unimplemented_handler(method.name))


_install_unimplemented(MilvusServicer)
