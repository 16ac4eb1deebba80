"""Prometheus metrics of the gRPC server: a grpc.ServerInterceptor counting requests per method
and code and timing them, into the registry the REST app exposes at /metrics (rest_metrics)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from prometheus_client import Counter, Histogram
from pymilvus.grpc_gen import milvus_pb2

from vectorlog.server.grpc_observe import Done, observing
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
        #: per method: (the handler as served, it observed)
        self._observed: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}
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
        return self._observing(method, handler)

    def _observing(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """Returns `handler` observed for `method`: made once per method and handler (the
        servers hand the same handler to every call of a method; the interceptor runs per
        call, on the thread-pool server's polling thread)."""
        made = self._observed.get(method)
        if made is not None and made[0] is handler:
            return made[1]
        observed = observing(handler, self._recorder(method))
        self._observed[method] = (handler, observed)
        return observed

    def _recorder(self, method: str) -> Done:
        """Returns the callback recording one call of `method` answered with a code after
        some seconds (its label children looked up once per method and code)."""
        seconds = self.seconds.labels(method)
        counts: dict[str, Any] = {}
        milvus = self.milvus.function(method) if method != UNKNOWN else None

        def record(request: Any, context: Any, code: str, took: float) -> None:
            count = counts.get(code)
            if count is None:
                count = counts[code] = self.requests.labels(method, code)
            count.inc()
            seconds.observe(took)
            if milvus is not None:
                vectors = grpc_vectors(method, request) if code == "0" else 0
                milvus.observe(code == "0", took, vectors)

        return record


def metering(app: Any) -> GrpcMetrics:
    """Returns the interceptor recording into the registry of `app` (rest_app's Starlette app),
    so its /metrics shows gRPC's requests too."""
    return GrpcMetrics(app.state.api.metrics)


def method_label(full: str | None) -> str:
    """Returns the RPC's name ("/milvus.proto.milvus.MilvusService/Search" -> "Search"), or
    "unknown" for a method MilvusService does not have (bounded label values)."""
    name = (full or "").rpartition("/")[2]
    return name if name in METHODS else UNKNOWN
