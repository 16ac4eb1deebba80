"""The plumbing of vectorlog's gRPC handlers: the `rpc` decorator turning any error into
the Milvus status of the RPC's response, and the request fields every handler reads alike
(consistency level, deadline, partition names)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from google.protobuf.message_factory import GetMessageClass
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectorlog.errors import VectorlogError
from vectorlog.server.grpc_status import status_of
from vectorlog.types import level_name

log = logging.getLogger(__name__)
SERVICE = milvus_pb2.DESCRIPTOR.services_by_name["MilvusService"]


def response_class(rpc: str) -> Any:
    """Returns the protobuf class of an RPC's response."""
    return GetMessageClass(SERVICE.methods_by_name[rpc].output_type)


def failed(rpc: str, status: common_pb2.Status) -> Any:
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
            return failed(method.__name__, status_of(exc))

    return handler


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
