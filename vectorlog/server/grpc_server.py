"""Starting and stopping the Milvus gRPC server over an in-process Client."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from pymilvus.grpc_gen import milvus_pb2_grpc

from vectorlog.core.errors import InvalidArgument
from vectorlog.runners.standalone import Standalone
from vectorlog.sdk.client import Client
from vectorlog.server.grpc_access import UserAuth
from vectorlog.server.grpc_auth import TokenAuth
from vectorlog.server.grpc_loop import LoopServer
from vectorlog.server.grpc_poller import MethodNoting, PollerExecutor, supported
from vectorlog.server.grpc_service import MilvusServicer
from vectorlog.server.tls import TlsFiles

#: the largest request or response (Milvus's default proxy grpc limits are 64 MiB in, out)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: the environment variable choosing the gRPC server (`server_kind`)
SERVER_ENV = "VECTORLOG_GRPC_SERVER"
SERVER_KINDS = ("aio", "threads")
#: the thread-pool server until the asyncio one is measured faster through pymilvus on a
#: quiet machine (benchmarks/wire_calls_ab.py: under load it used more CPU per call)
DEFAULT_KIND = "threads"
#: the environment variable turning off answering short RPCs on the thread-pool server's
#: polling thread (grpc_poller.py; "0": every call on a worker, as gRPC does)
POLLER_ENV = "VECTORLOG_GRPC_POLLER_ANSWERS"


class _Running(Protocol):
    def stop(self, grace: float | None) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


@dataclass
class GrpcServer:
    """A running gRPC server: `port` is the bound port (useful with address "host:0")."""

    server: _Running
    port: int

    def stop(self, grace: float = 5.0) -> None:
        """Stops accepting RPCs, lets running ones finish for up to `grace` seconds, and
        returns once the server stopped."""
        self.server.stop(grace)

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the server stops (or `timeout`); returns whether it stopped."""
        return self.server.wait(timeout)


class _PoolServer:
    """gRPC's thread-pool server (`grpc.server`) as a _Running."""

    def __init__(self, server: grpc.Server) -> None:
        self.server = server

    def stop(self, grace: float | None) -> None:
        self.server.stop(grace).wait()

    def wait(self, timeout: float | None = None) -> bool:
        return not self.server.wait_for_termination(timeout)  # it answers "timed out"


def start_grpc(
    client: Client,
    address: str = "127.0.0.1:19530",
    max_workers: int = 8,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    token: str | None = None,
    tls: TlsFiles | None = None,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    authorization: bool = False,
    kind: str | None = None,
) -> GrpcServer:
    """Starts serving Milvus's MilvusService for `client` on `address` ("host:port", port 0
    picks a free one) with `max_workers` threads; a request or response over
    `max_message_bytes` fails with gRPC's RESOURCE_EXHAUSTED. With `token` every RPC needs it
    (grpc_auth.TokenAuth); with `authorization` (instead of a token) every RPC needs a
    user's `user:password` and the privilege it calls for (grpc_access, Milvus's
    common.security.authorizationEnabled); with `tls` the port speaks TLS only.
    `interceptors` run first, in order, before the token check (they see refused calls
    too). `kind`: the server (`server_kind`). Returns the running
    server. Raises InvalidArgument if the address cannot be bound
    or a TLS file cannot be read, or for both a token and authorization."""
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
        # pymilvus pings every 10 s, also while idle: accept it as Milvus's server does
        # (keepalive EnforcementPolicy MinTime 5 s, PermitWithoutStream), instead of
        # answering GOAWAY "too_many_pings" and dropping the client's connection
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
        ("grpc.http2.max_ping_strikes", 0),
    ]
    if token and authorization:
        raise InvalidArgument("a token and authorization exclude each other: users log in")
    chain = list(interceptors)
    if token:
        chain.append(TokenAuth(token))
    elif authorization:
        chain.append(UserAuth(client))
    pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="vectorlog-grpc")
    servicer = MilvusServicer(client, authorization)
    inline = isinstance(client.cluster, Standalone)  # no peer to wait for inline
    if server_kind(kind) == "threads":
        if inline and _poller_answers():  # the method noted before any other interceptor
            executor, chain = PollerExecutor(pool), [MethodNoting(), *chain]
            return _start_pool(servicer, executor, options, chain, address, tls)
        return _start_pool(servicer, pool, options, chain, address, tls)
    loop = LoopServer(pool)
    try:
        port = loop.start(servicer, inline, options, chain, lambda s: _bind(s, address, tls))
    except RuntimeError as exc:
        raise InvalidArgument(f"cannot bind the gRPC server to {address!r}: {exc}") from None
    if port == 0:
        loop.stop(0)
        raise InvalidArgument(f"cannot bind the gRPC server to {address!r}")
    return GrpcServer(loop, port)


def server_kind(kind: str | None) -> str:
    """Returns the server to run: `kind`, else VECTORLOG_GRPC_SERVER, else DEFAULT_KIND:
    "threads" is gRPC's thread-pool server, "aio" the asyncio one (grpc_loop.py). Raises
    InvalidArgument for another name."""
    name = (kind or os.environ.get(SERVER_ENV) or DEFAULT_KIND).strip().lower()
    if name not in SERVER_KINDS:
        raise InvalidArgument(
            f"{SERVER_ENV} must be one of {', '.join(SERVER_KINDS)}, not {name!r}"
        )
    return name


def _poller_answers() -> bool:
    """Returns whether the thread-pool server answers short RPCs on its polling thread
    (VECTORLOG_GRPC_POLLER_ANSWERS, default on; "0", "false", "no", "off": not; nor with a
    grpcio lacking what it uses)."""
    value = os.environ.get(POLLER_ENV, "1").strip().lower()
    return value not in ("0", "false", "no", "off") and supported()


def _start_pool(
    servicer: MilvusServicer,
    pool: futures.Executor,
    options: list[tuple[str, Any]],
    chain: list[grpc.ServerInterceptor],
    address: str,
    tls: TlsFiles | None,
) -> GrpcServer:
    """Starts gRPC's thread-pool server; returns it. Raises InvalidArgument as start_grpc."""
    server = grpc.server(pool, options=options, interceptors=chain)
    milvus_pb2_grpc.add_MilvusServiceServicer_to_server(servicer, server)
    try:
        port = _bind(server, address, tls)
    except RuntimeError as exc:
        raise InvalidArgument(f"cannot bind the gRPC server to {address!r}: {exc}") from None
    if port == 0:
        raise InvalidArgument(f"cannot bind the gRPC server to {address!r}")
    server.start()
    return GrpcServer(_PoolServer(server), port)


def _bind(server: Any, address: str, tls: TlsFiles | None) -> int:
    """Adds the listening port (TLS with `tls`); returns its number (0 if it failed). Raises
    RuntimeError (grpc) if it cannot be bound, InvalidArgument if a TLS file is unreadable."""
    if tls is None:
        return int(server.add_insecure_port(address))
    credentials = grpc.ssl_server_credentials([tls.read()])
    return int(server.add_secure_port(address, credentials))
