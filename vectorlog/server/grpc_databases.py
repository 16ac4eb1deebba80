"""The database RPCs of vectorlog's gRPC service. vectorlog has one database, "default"
(Milvus's, which always exists): it is listed and described as Milvus does; creating another
is refused as not supported (merr 10), and any call naming another database is refused with
Milvus's "database not found" (merr 800, grpc_rpc.check_database)."""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from vectorlog.core.errors import DatabaseNotFound, InvalidArgument
from vectorlog.sdk.client import Client
from vectorlog.server.grpc_rpc import DEFAULT_DATABASE, rpc
from vectorlog.server.grpc_status import UNIMPLEMENTED, error, ok

DEFAULT_DATABASE_ID = 1  # Milvus's id of "default"


class DatabaseRpcs:
    """ListDatabases, DescribeDatabase, CreateDatabase and DropDatabase, for MilvusServicer."""

    client: Client

    @rpc
    def ListDatabases(self, request: Any, context: Any) -> Any:
        return milvus_pb2.ListDatabasesResponse(
            status=ok(),
            db_names=[DEFAULT_DATABASE],
            db_ids=[DEFAULT_DATABASE_ID],
            created_timestamp=[0],
        )

    @rpc
    def DescribeDatabase(self, request: Any, context: Any) -> Any:
        _default(request.db_name)
        return milvus_pb2.DescribeDatabaseResponse(
            status=ok(), db_name=DEFAULT_DATABASE, dbID=DEFAULT_DATABASE_ID
        )

    @rpc
    def CreateDatabase(self, request: Any, context: Any) -> Any:
        return error(
            UNIMPLEMENTED,
            f"vectorlog has only the database {DEFAULT_DATABASE!r}: creating database "
            f"{request.db_name!r} is not supported",
        )

    @rpc
    def DropDatabase(self, request: Any, context: Any) -> Any:
        """As Milvus: the default database cannot be dropped; dropping one that does not
        exist succeeds and changes nothing."""
        if request.db_name in ("", DEFAULT_DATABASE):
            raise InvalidArgument("can not drop default database")
        return ok()


def _default(name: str) -> None:
    """Raises DatabaseNotFound unless `name` is the default database ("" included)."""
    if name not in ("", DEFAULT_DATABASE):
        raise DatabaseNotFound(name)
