"""The database RPCs of vectorlog's gRPC service (Milvus 2.2+): CreateDatabase, DropDatabase,
ListDatabases, DescribeDatabase and AlterDatabase over the Client's database calls. Every
other RPC addresses the database of its call (grpc_rpc.call_database)."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from vectorlog.core.databases import DEFAULT_DATABASE
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.hybridts import physical_ms
from vectorlog.sdk.client import Client
from vectorlog.server import grpc_convert as conv
from vectorlog.server.grpc_rpc import rpc
from vectorlog.server.grpc_status import ok


class DatabaseRpcs:
    """The database RPCs, for MilvusServicer."""

    client: Client

    @rpc
    def ListDatabases(self, request: Any, context: Any) -> Any:
        dbs = self.client.database_infos()
        return milvus_pb2.ListDatabasesResponse(
            status=ok(),
            db_names=[d["name"] for d in dbs],
            db_ids=[d["db_id"] for d in dbs],
            created_timestamp=[physical_ms(d["created_ts"]) for d in dbs],
        )

    @rpc
    def DescribeDatabase(self, request: Any, context: Any) -> Any:
        d = self.client.database_info(request.db_name or DEFAULT_DATABASE)
        return milvus_pb2.DescribeDatabaseResponse(
            status=ok(),
            db_name=d["name"],
            dbID=d["db_id"],
            created_timestamp=physical_ms(d["created_ts"]),
            properties=conv.kv_pairs(d["properties"]),
        )

    @rpc
    def CreateDatabase(self, request: Any, context: Any) -> Any:
        self.client.create_database(request.db_name, conv.kv_dict(request.properties) or None)
        return ok()

    @rpc
    def DropDatabase(self, request: Any, context: Any) -> Any:
        self.client.drop_database(request.db_name or DEFAULT_DATABASE)
        return ok()

    @rpc
    def AlterDatabase(self, request: Any, context: Any) -> Any:
        """Sets properties or removes delete_keys, as Milvus (not both at once)."""
        props, keys = conv.kv_dict(request.properties), list(request.delete_keys)
        if props and keys:
            raise InvalidArgument("can not provide properties and deletekeys at the same time")
        name = request.db_name or DEFAULT_DATABASE
        if keys:
            self.client.drop_database_properties(name, keys)
        else:
            self.client.alter_database_properties(name, props)
        return ok()
