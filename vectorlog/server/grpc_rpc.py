"""The plumbing of vectorlog's gRPC handlers: the `rpc` decorator setting the call's
database (`call_database`) and turning any error into the Milvus status of the RPC's
response, and the request fields every handler reads alike (consistency level, deadline,
partition names)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import grpc
from google.protobuf.message_factory import GetMessageClass
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectorlog.core.databases import DEFAULT_DATABASE
from vectorlog.core.errors import PermissionDenied
from vectorlog.core.inline import Declined
from vectorlog.core.types import level_name
from vectorlog.server.grpc_status import UNIMPLEMENTED, status_of
from vectorlog.server.logs import log_failure

log = logging.getLogger(__name__)
SERVICE = milvus_pb2.DESCRIPTOR.services_by_name["MilvusService"]
#: the database of the call a handler serves (set by `rpc` around the handler)
CALL_DATABASE: ContextVar[str] = ContextVar("vectorlog_call_database", default=DEFAULT_DATABASE)


def response_class(rpc: str) -> Any:
    """Returns the protobuf class of an RPC's response."""
    return GetMessageClass(SERVICE.methods_by_name[rpc].output_type)


def status_field(rpc: str) -> str | None:
    """Returns the name of the common.Status field of an RPC's response ("status" for most,
    "base_status" for a few such as AlterCollectionSchema's), "" if the response is a
    Status itself, None if it has none."""
    cls = response_class(rpc)
    if cls is common_pb2.Status:
        return ""
    for f in cls.DESCRIPTOR.fields:
        if f.message_type is common_pb2.Status.DESCRIPTOR:
            return str(f.name)
    return None


def failed(rpc: str, status: common_pb2.Status, context: Any = None) -> Any:
    """Returns the response of a failed RPC carrying `status`; a response with no Status
    field aborts the call with gRPC UNIMPLEMENTED (merr 10) or INTERNAL and the reason."""
    slot = status_field(rpc)
    if slot == "":
        return status
    if slot is not None:
        return response_class(rpc)(**{slot: status})
    code = (
        grpc.StatusCode.UNIMPLEMENTED if status.code == UNIMPLEMENTED else grpc.StatusCode.INTERNAL
    )
    if context is None:
        raise RuntimeError(f"{rpc} failed: {status.reason}")
    context.abort(code, status.reason)


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps an RPC handler: with the servicer's `authorizer` (authorization on), the
    caller's privilege is checked first (refused: gRPC PERMISSION_DENIED, nothing done);
    the handler runs with CALL_DATABASE set to the call's database (`call_database`); any
    exception becomes the Milvus error status of its response
    (logged with their cause: server/logs.py); nothing escapes to gRPC but core.inline's
    Declined (a handler tried inline leaves the call to a worker)."""
    return rpc_of(method.__name__)(method)


def rpc_of(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Returns `rpc` for a handler of the RPC `name` whose method is named otherwise (such
    as `search_now`, a first try at Search: grpc_inline.py)."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def handler(self: Any, request: Any, context: Any) -> Any:
            db = call_database(request, context, name)
            authorizer = getattr(self, "authorizer", None)
            if authorizer is not None:
                try:
                    authorizer.check(name, request, context, db)
                except PermissionDenied as exc:  # as Milvus's interceptor: no response at all
                    context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
                except Exception as exc:  # the check itself failed: refuse, never let it through
                    log_failure(log, f"gRPC {name} authorization", exc)
                    return failed(name, status_of(exc), context)
            token = CALL_DATABASE.set(db)
            try:
                return method(self, request, context)
            except Declined:
                raise  # no failure: a worker answers the call (core.inline)
            except Exception as exc:
                log_failure(log, f"gRPC {name}", exc)
                return failed(name, status_of(exc), context)
            finally:
                CALL_DATABASE.reset(token)

        return handler

    return wrap


#: the RPCs whose db_name is their argument (grpc_databases.py), not the database used
DATABASE_RPCS = frozenset(
    {"CreateDatabase", "DropDatabase", "ListDatabases", "DescribeDatabase", "AlterDatabase"}
)


def call_database(request: Any, context: Any, rpc: str = "") -> str:
    """Returns the database a call addresses, as Milvus's proxy finds it: the request's
    db_name, else pymilvus's `dbname` metadata, else "default" (for the database RPCs,
    whose db_name is their argument, only the metadata)."""
    fields = request.DESCRIPTOR.fields_by_name
    if rpc not in DATABASE_RPCS and "db_name" in fields and request.db_name:
        return str(request.db_name)
    metadata = context.invocation_metadata() if context is not None else ()
    names = [v for k, v in metadata if k == "dbname" and v]
    return str(names[0]) if names else DEFAULT_DATABASE


def read_level(request: Any) -> str | None:
    """The read's level: None (the collection's) when pymilvus asks for the default."""
    if request.use_default_consistency:
        return None
    return level_name(request.consistency_level)


def deadline(context: Any) -> float | None:
    """Returns the seconds left before the caller's gRPC deadline (None without one): a read
    waits for its consistency level at most that long."""
    left = context.time_remaining() if context is not None else None
    return left if left is not None and left > 0 else None


def partition_names(names: Any) -> list[str] | None:
    return list(names) or None
