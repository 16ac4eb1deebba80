"""Milvus's gRPC MilvusService over an in-process `vectorlog.Client`: each RPC maps its
request onto the Client and its result onto Milvus's response; every error becomes a Milvus
status (vectorlog.server.grpc_status) and RPCs vectorlog does not serve answer merr 10. The
data RPCs are in grpc_data.py, the handlers' plumbing in grpc_rpc.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc

from vectorlog.core.errors import CollectionNotFound, IndexNotFound, InvalidArgument
from vectorlog.core.hybridts import physical_ms
from vectorlog.core.types import CONSISTENCY_PROPERTY, LEVEL_CODES, IndexSpec, collection_level
from vectorlog.processors.querycoord.errors import ReplicaNotFound
from vectorlog.sdk.client import Client, IndexParams
from vectorlog.server import grpc_convert as conv
from vectorlog.server.grpc_access import Authorizer, caller
from vectorlog.server.grpc_compaction import CompactionRpcs
from vectorlog.server.grpc_data import DataRpcs
from vectorlog.server.grpc_databases import DatabaseRpcs
from vectorlog.server.grpc_hybrid import HybridRpcs
from vectorlog.server.grpc_import import ImportRpcs
from vectorlog.server.grpc_iterator import SearchCursors
from vectorlog.server.grpc_operations import OperationRpcs
from vectorlog.server.grpc_rpc import CALL_DATABASE, SERVICE, failed, rpc
from vectorlog.server.grpc_status import ok, unimplemented
from vectorlog.server.grpc_users import UserRpcs

#: the Milvus version GetVersion reports: the protocol vectorlog speaks (pymilvus checks it)
MILVUS_VERSION = "v2.5.0"


#: the segment states GetPersistentSegmentInfo lists by default (Milvus's proxy)
PERSISTENT = {common_pb2.Sealed, common_pb2.Flushing, common_pb2.Flushed}
#: Milvus's segment states by name, as Client.list_segments names them
STATES: dict[str, int] = dict(common_pb2.SegmentState.items())


#: the per-database Clients kept (beyond it they are made again)
MAX_DATABASE_CLIENTS = 64


class MilvusServicer(
    UserRpcs,
    DataRpcs,
    HybridRpcs,
    ImportRpcs,
    CompactionRpcs,
    DatabaseRpcs,
    OperationRpcs,
    milvus_pb2_grpc.MilvusServiceServicer,
):
    """The MilvusService RPCs vectorlog serves, over one in-process Client."""

    def __init__(self, client: Client, authorization: bool = False) -> None:
        """`authorization`: every RPC's privilege is checked (grpc_access.Authorizer)."""
        self.base = client
        self._clients: dict[str, Client] = {}
        self.cursors = SearchCursors()
        self.authorizer = Authorizer(client) if authorization else None

    @property
    def client(self) -> Client:  # type: ignore[override]
        """The Client of the call being served: the base one, in the call's database (one
        per database, made once: they share the base's cluster and session)."""
        db = CALL_DATABASE.get()
        client = self._clients.get(db)
        if client is None:
            if len(self._clients) >= MAX_DATABASE_CLIENTS:  # names a caller made up
                self._clients.clear()
            client = self._clients[db] = self.base.in_database(db)
        return client

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
            request.collection_name,
            schema=schema,
            num_shards=shards,
            properties=properties,
            num_partitions=request.num_partitions,
            consistency_level=request.consistency_level,  # pymilvus sends Bounded by default
        )
        return ok()

    @rpc
    def DescribeCollection(self, request: Any, context: Any) -> Any:
        try:
            info = self._info(request.collection_name)
        except CollectionNotFound as exc:  # Milvus's DescribeCollection words it so
            raise CollectionNotFound(exc.name, exc.database, described=True) from None
        return milvus_pb2.DescribeCollectionResponse(
            status=ok(),
            schema=conv.schema_to_proto(info),
            collectionID=info.collection_id,
            virtual_channel_names=info.vchannels,
            created_timestamp=info.created_ts,
            created_utc_timestamp=physical_ms(info.created_ts),
            shards_num=info.shards_num,
            aliases=info.aliases,
            consistency_level=LEVEL_CODES[collection_level(info.properties)],
            collection_name=info.name,
            properties=conv.kv_pairs(
                {k: v for k, v in info.properties.items() if k != CONSISTENCY_PROPERTY}
            ),
            db_name=info.db,
            num_partitions=len(info.partitions),
        )

    @rpc
    def HasCollection(self, request: Any, context: Any) -> Any:
        value = self.client.has_collection(request.collection_name)
        return milvus_pb2.BoolResponse(status=ok(), value=value)

    @rpc
    def ShowCollections(self, request: Any, context: Any) -> Any:
        names = self.client.list_collections()
        if self.authorizer is not None:  # only those the caller may see, as Milvus
            names = self.authorizer.visible(caller(context) or "", names, CALL_DATABASE.get())
        return milvus_pb2.ShowCollectionsResponse(status=ok(), collection_names=names)

    @rpc
    def DropCollection(self, request: Any, context: Any) -> Any:
        self.client.drop_collection(request.collection_name)
        return ok()

    @rpc
    def TruncateCollection(self, request: Any, context: Any) -> Any:
        self.client.truncate_collection(request.collection_name)
        return milvus_pb2.TruncateCollectionResponse(status=ok())

    @rpc
    def RenameCollection(self, request: Any, context: Any) -> Any:
        self.client.rename_collection(request.oldName, request.newName)
        return ok()

    @rpc
    def AlterCollection(self, request: Any, context: Any) -> Any:
        props, keys = conv.kv_dict(request.properties), list(request.delete_keys)
        if props and keys:
            raise InvalidArgument("can not provide properties and deletekeys at the same time")
        if keys:
            self.client.drop_collection_properties(request.collection_name, keys)
        else:
            self.client.alter_collection_properties(request.collection_name, props)
        return ok()

    @rpc
    def AddCollectionField(self, request: Any, context: Any) -> Any:
        field = conv.field_from_bytes(request.schema)
        self.client.add_collection_field(request.collection_name, field)
        return ok()

    @rpc
    def AlterCollectionSchema(self, request: Any, context: Any) -> Any:
        """Serves the one alteration pymilvus asks for first in add_collection_field: one
        field added, no function, no index; any other is refused with merr 10."""
        field = conv.added_field_of(request)
        if field is None:
            status = unimplemented("AlterCollectionSchema (beyond adding one field)")
            return milvus_pb2.AlterCollectionSchemaResponse(alter_status=status)
        self.client.add_collection_field(request.collection_name, field)
        return milvus_pb2.AlterCollectionSchemaResponse(alter_status=ok())

    @rpc
    def GetCollectionStatistics(self, request: Any, context: Any) -> Any:
        rows = self.client.get_collection_stats(request.collection_name)["row_count"]
        stats = conv.kv_pairs({"row_count": rows})
        return milvus_pb2.GetCollectionStatisticsResponse(status=ok(), stats=stats)

    @rpc
    def GetPartitionStatistics(self, request: Any, context: Any) -> Any:
        stats = self.client.get_partition_stats(request.collection_name, request.partition_name)
        pairs = conv.kv_pairs({"row_count": stats["row_count"]})
        return milvus_pb2.GetPartitionStatisticsResponse(status=ok(), stats=pairs)

    # -- loading: a collection is loaded from its creation on, until released ------------------
    @rpc
    def LoadCollection(self, request: Any, context: Any) -> Any:
        self._info(request.collection_name)
        replicas = request.replica_number or 1  # pymilvus leaves it 0 unless asked
        self.client.load_collection(request.collection_name, replica_number=replicas)
        return ok()

    @rpc
    def ReleaseCollection(self, request: Any, context: Any) -> Any:
        self.client.release_collection(request.collection_name)
        return ok()

    @rpc
    def LoadPartitions(self, request: Any, context: Any) -> Any:
        self.client.load_partitions(request.collection_name, list(request.partition_names))
        return ok()

    @rpc
    def ReleasePartitions(self, request: Any, context: Any) -> Any:
        self.client.release_partitions(request.collection_name, list(request.partition_names))
        return ok()

    @rpc
    def GetLoadState(self, request: Any, context: Any) -> Any:
        """NotLoad if the collection (or a partition named) is released; NotExist (not an
        error) for a missing collection, as Milvus."""
        try:
            self._info(request.collection_name)
        except CollectionNotFound:
            state = common_pb2.LoadState.Value("LoadStateNotExist")
            return milvus_pb2.GetLoadStateResponse(status=ok(), state=state)
        states = [
            self.client.get_load_state(request.collection_name, p)["state"]
            for p in list(request.partition_names) or [""]
        ]
        state = "NotLoad" if "NotLoad" in states else states[0]
        named = common_pb2.LoadState.Value(f"LoadState{state}")
        return milvus_pb2.GetLoadStateResponse(status=ok(), state=named)

    @rpc
    def GetLoadingProgress(self, request: Any, context: Any) -> Any:
        """100 once loaded; a released collection or partition is refused, as Milvus."""
        self._info(request.collection_name)
        names = list(request.partition_names)
        progress = self.client.get_loading_progress(request.collection_name, names)
        return milvus_pb2.GetLoadingProgressResponse(
            status=ok(), progress=progress, refresh_progress=progress
        )

    @rpc
    def GetReplicas(self, request: Any, context: Any) -> Any:
        try:
            name = request.collection_name or self._name_of(request.collectionID)
        except CollectionNotFound:  # Milvus's query coordinator knows no replica of it
            raise ReplicaNotFound(request.collectionID) from None
        found = self.client.describe_replica(name)
        replicas = [conv.replica_info(r, request.with_shard_nodes) for r in found]
        return milvus_pb2.GetReplicasResponse(status=ok(), replicas=replicas)

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

    @rpc
    def GetPersistentSegmentInfo(self, request: Any, context: Any) -> Any:
        """The collection's segments in `states` (default as Milvus: Sealed, Flushing,
        Flushed), as pymilvus's list_persistent_segments reads them."""
        states = set(request.states) or PERSISTENT
        infos = [
            milvus_pb2.PersistentSegmentInfo(
                segmentID=s["segment_id"],
                collectionID=s["collection_id"],
                partitionID=s["partition_id"],
                num_rows=s["num_rows"],
                state=STATES.get(s["state"], 0),
                insert_channel=s["insert_channel"],
            )
            for s in self.client.list_segments(request.collectionName)
            if STATES.get(s["state"], 0) in states
        ]
        return milvus_pb2.GetPersistentSegmentInfoResponse(status=ok(), infos=infos)

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
            status=ok(), db_name=self.client.db, alias=request.alias, collection=target
        )

    @rpc
    def ListAliases(self, request: Any, context: Any) -> Any:
        res = self.client.list_aliases(request.collection_name)
        return milvus_pb2.ListAliasesResponse(
            status=ok(),
            db_name=self.client.db,
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
    """Returns the IndexDescription of Client.describe_index's dict. Milvus answers the
    params as the client sent them: pymilvus's MilvusClient sends each one as its own key
    (`json_cast_type`, `M`...), the ORM a JSON `params`; both are given."""
    built = d.get("params") or {}
    params: dict[str, Any] = {
        k: v if isinstance(v, str) else json.dumps(v) for k, v in built.items()
    }
    params |= {"index_type": d["index_type"], "metric_type": d.get("metric_type")}
    params["params"] = json.dumps(built)
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
        return failed(name, unimplemented(name), context)

    handler.__name__ = name
    handler.unimplemented = True  # type: ignore[attr-defined]
    return handler


#: RPCs served for some requests only (the others answer merr 10 in their status):
#: AlterCollectionSchema adds one field (add_collection_field), nothing else
PARTLY_SERVED = frozenset({"AlterCollectionSchema"})


def served_rpcs() -> frozenset[str]:
    """Returns the MilvusService RPCs vectorlog serves (the others answer merr 10)."""
    generated = milvus_pb2_grpc.MilvusServiceServicer
    return frozenset(
        m.name
        for m in SERVICE.methods
        if getattr(MilvusServicer, m.name) is not getattr(generated, m.name)
        and not getattr(getattr(MilvusServicer, m.name), "unimplemented", False)
    )


def _mro_served(cls: type) -> int:
    """The number of classes of `cls`'s MRO before the generated servicer (whose methods
    answer UNIMPLEMENTED): the ones whose RPCs vectorlog serves."""
    return cls.__mro__.index(milvus_pb2_grpc.MilvusServiceServicer)


def _install_unimplemented(cls: type) -> None:
    """Gives every unary MilvusService RPC `cls` does not serve a handler answering merr 10."""
    for method in SERVICE.methods:
        served = any(method.name in c.__dict__ for c in cls.__mro__[: _mro_served(cls)])
        if served or method.client_streaming or method.server_streaming:
            continue
        setattr(cls, method.name, _unimplemented_handler(method.name))


_install_unimplemented(MilvusServicer)
