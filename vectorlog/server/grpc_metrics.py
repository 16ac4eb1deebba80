"""Prometheus metrics of the gRPC server: a grpc.ServerInterceptor counting requests per method
and code and timing them, into the registry the REST app exposes at /metrics (rest_metrics)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
from prometheus_client import Counter, Histogram
from pymilvus.grpc_gen import common_pb2, milvus_pb2

from vectorlog.server.milvus_metrics import ProxyMetrics, grpc_vectors
from vectorlog.server.rest_metrics import Metrics

#: the RPCs of Milvus's MilvusService: any other method name is counted as "unknown"
METHODS = frozenset(milvus_pb2.DESCRIPTOR.services_by_name["MilvusService"].methods_by_name)
UNKNOWN = "unknown"


class GrpcMetrics(grpc.ServerInterceptor):
    """Records `vectorlog_grpc_requests_total{method, code}` (code: the Milvus status code of
    the response when it has a status, else the gRPC status code's name) and
    `vectorlog_grpc_request_seconds{method}` into `metrics.registry`, and Milvus's proxy
    metrics of each MilvusService call (milvus_metrics.py); one per registry."""

    def __init__(self, metrics: Metrics) -> None:
        self.milvus: ProxyMetrics = metrics.milvus
        self.requests = Counter(
            "vectorlog_grpc_requests",
            "gRPC requests by method and code (Milvus status code, else gRPC code name)",
            ["method", "code"],
            registry=metrics.registry,
        )
        self.seconds = Histogram(
            "vectorlog_grpc_request_seconds",
            "gRPC request latency by method",
            ["method"],
            registry=metrics.registry,
        )

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """Returns the method's handler, its unary-unary behaviour timed and counted (an RPC
        no handler serves is counted as method "unknown", UNIMPLEMENTED)."""
        handler = continuation(handler_call_details)
        method = method_label(handler_call_details.method)
        if handler is None:
            self.requests.labels(UNKNOWN, grpc.StatusCode.UNIMPLEMENTED.name).inc()
            return None
        if handler.unary_unary is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            self._timed(method, handler.unary_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _timed(self, method: str, behaviour: Callable[[Any, Any], Any]) -> Callable[..., Any]:
        def timed(request: Any, context: grpc.ServicerContext) -> Any:
            started, code = time.perf_counter(), grpc.StatusCode.UNKNOWN.name
            try:
                response = behaviour(request, context)
                code = response_code(response, context)
                return response
            except Exception:
                code = grpc_code(context, grpc.StatusCode.UNKNOWN)
                raise
            finally:
                seconds = time.perf_counter() - started
                self.requests.labels(method, code).inc()
                self.seconds.labels(method).observe(seconds)
                if method != UNKNOWN:
                    vectors = grpc_vectors(method, request) if code == "0" else 0
                    self.milvus.observe(method, code == "0", seconds, vectors)

        return timed


def metering(app: Any) -> GrpcMetrics:
    """Returns the interceptor recording into the registry of `app` (rest_app's Starlette app),
    so its /metrics shows gRPC's requests too."""
    return GrpcMetrics(app.state.api.metrics)


def method_label(full: str | None) -> str:
    """Returns the RPC's name ("/milvus.proto.milvus.MilvusService/Search" -> "Search"), or
    "unknown" for a method MilvusService does not have (bounded label values)."""
    name = (full or "").rpartition("/")[2]
    return name if name in METHODS else UNKNOWN


def response_code(response: Any, context: grpc.ServicerContext) -> str:
    """Returns the Milvus status code of `response` (itself a Status, or one with a `status`
    field): its merr `code`, else its legacy `error_code`; else the gRPC code's name."""
    status = response
    if not isinstance(response, common_pb2.Status):
        fields = getattr(getattr(response, "DESCRIPTOR", None), "fields_by_name", {})
        if "status" not in fields:
            return grpc_code(context, grpc.StatusCode.OK)
        status = response.status
    return str(status.code or status.error_code)


def grpc_code(context: grpc.ServicerContext, default: grpc.StatusCode) -> str:
    """Returns the name of the gRPC code the handler set on `context` (`default` if none)."""
    code = getattr(context, "code", lambda: None)()
    return code.name if isinstance(code, grpc.StatusCode) else default.name
