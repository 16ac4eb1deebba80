"""`RpcServer`: one gRPC server serving processors' services (RootCoordRpc, DataCoordService,
QueryNodeService, IndexNodeService) to other processes, each call decoded per methods.py and
forwarded to the implementation it wraps; a raised error travels back as errors.py says.
Given the cluster's name, it also answers Member.GetClusterName (methods.MEMBER, MEMBER_V2)
and, given its storage identity, Member v2's GetStorageIdentity.
`served` counts the calls per service and method (a process's /metrics shows them)."""

from __future__ import annotations

import hmac
import logging
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from vectorlog.core.errors import InvalidArgument
from vectorlog.processors.datacoord.service import DataCoordService
from vectorlog.processors.indexnode.service import IndexNodeService
from vectorlog.processors.querynode.service import QueryNodeService
from vectorlog.processors.rootcoord.service import RootCoordRpc
from vectorlog.rpc import wire
from vectorlog.rpc.errors import TOKEN_KEY, ClusterTokenRefused, status_of
from vectorlog.rpc.methods import (
    DATACOORD,
    DDLLEASE,
    INDEXNODE,
    LOADSTATE,
    LOGWRITES,
    MEMBER,
    MEMBER_V2,
    QUERYNODE,
    QUERYSHARD,
    ROOTCOORD,
    Method,
    Service,
)

log = logging.getLogger(__name__)
Handler = Callable[[bytes, grpc.ServicerContext], bytes]
#: gRPC messages up to 256 MiB (a search of many vectors, a large query result)
MAX_MESSAGE = 256 << 20
OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    # gRPC binds with SO_REUSEPORT by default: a second process on a served port would then
    # take a share of its new connections (another cluster's member answering this one's
    # calls); a port in use is refused at start instead, as the public server's
    ("grpc.so_reuseport", 0),
]


def _authorized(context: grpc.ServicerContext, token: str | None) -> bool:
    """Returns whether the call carries `token` (compared in constant time), or no token is
    asked for."""
    if token is None:
        return True
    given = dict(context.invocation_metadata()).get(TOKEN_KEY, "")
    return isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())


class Served:
    """Calls served, by (service, method), counted as they arrive."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, service: str, method: str) -> None:
        with self._lock:
            self._counts[(service, method)] += 1

    def counts(self) -> dict[tuple[str, str], int]:
        """Returns {(service, method): calls served so far}."""
        with self._lock:
            return dict(self._counts)


def _handler(
    service: Service, method: Method, target: Any, token: str | None, served: Served
) -> Handler:
    call = getattr(target, method.call, None)

    def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
        served.add(service.name, method.name)
        if call is None:  # e.g. a bare DataCoord, served without the leading datacoord's jobs
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{service.name}.{method.name}")
            raise AssertionError("abort returned")
        try:
            if not _authorized(context, token):
                raise ClusterTokenRefused(service.name)
            args = wire.decode_request(service.name, method, request)
            return wire.encode_response(service.name, method, call(**args))
        except Exception as exc:  # every failure goes back to the caller, typed
            if not isinstance(exc, InvalidArgument):
                log.debug("%s.%s failed: %r", service.name, method.name, exc)
            code, details, metadata = status_of(exc)
            context.set_trailing_metadata(metadata)
            context.abort(code, details)
            raise AssertionError("abort returned") from exc  # context.abort always raises

    return handle


def _generic(
    service: Service, target: Any, token: str | None, served: Served
) -> grpc.GenericRpcHandler:
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(_handler(service, m, target, token, served))
        for name, m in service.methods.items()
    }
    return grpc.method_handlers_generic_handler(service.name, handlers)


class _Member:
    """Member's implementation: the name of the cluster this process serves and the
    identity object of its storage root (None: it has none, or does not say)."""

    def __init__(self, cluster: str, identity: dict[str, Any] | None) -> None:
        self._cluster, self._identity = cluster, identity

    def cluster_name(self) -> str:
        return self._cluster

    def storage_identity(self) -> dict[str, Any] | None:
        return self._identity


class RpcServer:
    """A gRPC server for some of a process's services; `start` binds it and returns the port."""

    def __init__(
        self,
        address: str = "127.0.0.1:0",
        *,
        rootcoord: RootCoordRpc | None = None,
        datacoord: DataCoordService | None = None,
        querynode: QueryNodeService | None = None,
        indexnode: IndexNodeService | None = None,
        shards: Any = None,
        ddl_leases: Any = None,
        log_writes: Any = None,
        workers: int = 16,
        token: str | None = None,
        cluster: str | None = None,
        identity: dict[str, Any] | None = None,
    ) -> None:
        """`address`: host:port to listen on (port 0: any free port); `token`: the cluster's
        token every call must carry (None: none asked, for loopback only); `cluster`: the
        name Member.GetClusterName answers (None: Member is not served); `identity`: what
        Member v2's GetStorageIdentity answers (runners.identity's value of the storage
        root's identity object and where it was read; None: it answers None). Raises
        InvalidArgument without a service of a role to serve."""
        self._address = address
        self._server = grpc.server(ThreadPoolExecutor(workers), options=OPTIONS)
        served: list[tuple[Service, Any]] = [
            (ROOTCOORD, rootcoord),
            (LOADSTATE, rootcoord),  # its load and release requests
            (DATACOORD, datacoord),
            (QUERYNODE, querynode),
            (INDEXNODE, indexnode),
            (QUERYSHARD, shards),  # `read(op, pchannels, ts, timeout, args)`
            (DDLLEASE, ddl_leases),  # rootcoord's DdlFollowers: long polls, a thread each
            (LOGWRITES, log_writes),  # serve's embedded log, for its data node process
        ]
        self.served = Served()
        if not any(t is not None for _, t in served):
            raise InvalidArgument("an RpcServer needs at least one service to serve")
        if cluster is not None:
            member = _Member(cluster, identity)
            served += [(MEMBER, member), (MEMBER_V2, member)]
        handlers = [_generic(s, t, token, self.served) for s, t in served if t is not None]
        self._server.add_generic_rpc_handlers(handlers)
        self.port = 0

    def start(self) -> int:
        """Binds and starts serving; returns the port. Raises InvalidArgument if the address
        cannot be bound."""
        try:
            self.port = self._server.add_insecure_port(self._address)
        except RuntimeError as exc:
            raise InvalidArgument(f"cannot listen on {self._address}: {exc}") from None
        self._server.start()
        return self.port

    @property
    def address(self) -> str:
        """Returns host:port where it listens (after `start`)."""
        return f"{self._address.rpartition(':')[0]}:{self.port}"

    def stop(self, grace: float | None = 1.0) -> None:
        """Stops serving; calls in flight get `grace` seconds to finish."""
        self._server.stop(grace).wait()
