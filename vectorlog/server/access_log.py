"""The access log of `vectorlog serve` (logger `vectorlog.access`, INFO): one line per gRPC
call (method, Milvus or gRPC code, latency, peer) and per HTTP request (method, path, HTTP
status, Milvus code of a REST v2 call, latency, client). It never logs a header, a query
string or a body: no token, no vectors."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import grpc

from vectorlog.server.grpc_metrics import method_label
from vectorlog.server.grpc_observe import observing

log = logging.getLogger("vectorlog.access")
#: where a REST handler leaves the Milvus code of its answer (Starlette's request.state)
MILVUS_CODE = "milvus_code"


class GrpcAccessLog(grpc.ServerInterceptor):
    """Logs each unary gRPC call once it is answered (refused ones too, when it runs before
    the token check)."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """Returns the method's handler, its unary-unary behaviour logged."""
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        return observing(
            handler, functools.partial(_log_call, method_label(handler_call_details.method))
        )


def _log_call(method: str, request: Any, context: Any, code: str, seconds: float) -> None:
    log.info("grpc %s code=%s %.1fms peer=%s", method, code, seconds * 1000, context.peer())


class HttpAccessLog:
    """ASGI middleware logging each HTTP request once its answer started."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), [500]

        async def sent(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            _log_http(scope, status[0], time.perf_counter() - started)


def _log_http(scope: dict[str, Any], status: int, seconds: float) -> None:
    code = scope.get("state", {}).get(MILVUS_CODE)
    client = scope.get("client") or ("-", 0)
    log.info(
        "http %s %s %d%s %.1fms client=%s",
        scope["method"],
        scope["path"],
        status,
        "" if code is None else f" code={code}",
        seconds * 1000,
        client[0],
    )
