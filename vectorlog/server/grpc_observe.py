"""Observing each gRPC call (metrics, the access log) on either server: `observing` wraps a
unary method handler so a callback hears each call's Milvus or gRPC code and latency, a sync
behaviour (the thread-pool server) staying sync and a coroutine one (the asyncio server,
grpc_loop.py) a coroutine; `LoopInterceptor` runs a grpc.ServerInterceptor (which wraps
handlers, never awaits) as the asyncio server's kind."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from pymilvus.grpc_gen import common_pb2

from vectorlog.core.inline import Declined

#: told of each call: (request, context, code, seconds)
Done = Callable[[Any, Any, str, float], None]


def observing(handler: grpc.RpcMethodHandler, done: Done) -> grpc.RpcMethodHandler:
    """Returns `handler` (unary-unary) with `done` told of each call once it is answered:
    the code is the Milvus status code of the response when it has one, else the gRPC
    code's name (the abort's, or UNKNOWN for an exception)."""
    return grpc.unary_unary_rpc_method_handler(
        observed(handler.unary_unary, done),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def observed(behaviour: Callable[[Any, Any], Any], done: Done) -> Callable[[Any, Any], Any]:
    """Returns `behaviour` (sync or a coroutine function, kept so) with `done` told of each
    call (see `observing`)."""
    if inspect.iscoroutinefunction(behaviour):
        coroutine: Callable[[Any, Any], Awaitable[Any]] = behaviour

        async def call_async(request: Any, context: Any) -> Any:
            started, code = time.perf_counter(), grpc.StatusCode.UNKNOWN.name
            try:
                response = await coroutine(request, context)
                code = response_code(response, context)
                return response
            except Exception:
                code = grpc_code(context, grpc.StatusCode.UNKNOWN)
                raise
            finally:
                done(request, context, code, time.perf_counter() - started)

        return call_async

    def call(request: Any, context: Any) -> Any:
        started, code = time.perf_counter(), grpc.StatusCode.UNKNOWN.name
        try:
            response = behaviour(request, context)
            code = response_code(response, context)
            return response
        except Declined:  # tried inline, answered by a worker: that one is observed
            code = ""
            raise
        except Exception:
            code = grpc_code(context, grpc.StatusCode.UNKNOWN)
            raise
        finally:
            if code:
                done(request, context, code, time.perf_counter() - started)

    return call


def response_code(response: Any, context: Any) -> str:
    """Returns the Milvus status code of `response` (itself a Status, or one with a `status`
    field): its merr `code`, else its legacy `error_code`; else the gRPC code's name."""
    kind = type(response)
    status_of = _STATUS_OF.get(kind)
    if status_of is None:
        status_of = _STATUS_OF[kind] = _status_reader(kind)
    status = status_of(response)
    if status is None:
        return grpc_code(context, grpc.StatusCode.OK)
    return str(status.code or status.error_code)


#: per response type: how to read its Status (looked up once per type: a call's response
#: type is one of MilvusService's)
_STATUS_OF: dict[type, Callable[[Any], Any]] = {}


def _status_reader(kind: type) -> Callable[[Any], Any]:
    """Returns the function reading the Status of a response of type `kind` (None: it has
    none): the response itself for a Status, its `status` field if it has one."""
    if issubclass(kind, common_pb2.Status):
        return lambda response: response
    fields = getattr(getattr(kind, "DESCRIPTOR", None), "fields_by_name", {})
    if "status" in fields:
        return lambda response: response.status
    return lambda response: None


def grpc_code(context: Any, default: grpc.StatusCode) -> str:
    """Returns the name of the gRPC code the handler set on `context` (`default` if none)."""
    code = getattr(context, "code", lambda: None)()
    return code.name if isinstance(code, grpc.StatusCode) else default.name


class LoopInterceptor(grpc.aio.ServerInterceptor):
    """A grpc.ServerInterceptor run by the asyncio server: the method's handler is looked
    up (awaited) first, then handed to the interceptor, which returns it, wraps it or
    refuses the call (its wrappers keep a coroutine behaviour one: `observed`)."""

    def __init__(self, inner: grpc.ServerInterceptor) -> None:
        self.inner = inner

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        """Returns what the wrapped interceptor makes of the method's handler."""
        handler = await continuation(handler_call_details)
        return self.inner.intercept_service(lambda _details: handler, handler_call_details)
