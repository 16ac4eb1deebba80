"""`vectorlog serve`: one process serving Milvus's gRPC protocol (port 19530, as Milvus) and
REST v2 (the next port, 19531: Milvus 2.4 multiplexes both on 19530, which Python's grpcio
and uvicorn cannot share) over one cluster, until SIGTERM or SIGINT; then it closes it."""

from __future__ import annotations

import contextlib
import inspect
import ipaddress
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn

from vectorlog.client import Client
from vectorlog.errors import InvalidArgument
from vectorlog.server.rest_app import rest_app

#: the variable holding the token when --token is not given ("user:password" or an API key)
TOKEN_ENV = "VECTORLOG_TOKEN"
GRPC_PORT = 19530  # Milvus's port


@dataclass(frozen=True)
class ServeOptions:
    """What to serve and where: `uri` as Client's (None: VECTORLOG_LOG), `settings` Config
    overrides, `rest_port` None = `port` + 1, `token` None = open (localhost only)."""

    uri: str | None = None
    settings: tuple[tuple[str, Any], ...] = ()
    host: str = "127.0.0.1"
    port: int = GRPC_PORT
    rest_port: int | None = None
    token: str | None = None


def check_open(host: str, token: str | None) -> None:
    """Raises InvalidArgument if `host` is not a loopback address and there is no token:
    without a token vectorlog serves only this machine."""
    if token:
        return
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidArgument(
            f"serving {host!r} without a token is refused: pass --token or set {TOKEN_ENV}"
        )


class _Rest(uvicorn.Server):
    """uvicorn, with SIGTERM/SIGINT ending the serve loop without re-raising the signal
    afterwards (uvicorn's default), so the process can close the cluster and exit 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        def stop(sig: int, frame: FrameType | None) -> None:
            self.should_exit = True

        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def serve(options: ServeOptions) -> int:
    """Serves until SIGTERM/SIGINT, then stops both servers and closes the cluster; returns
    the exit code (0). Raises InvalidArgument (open host without a token, bad address)."""
    token = options.token or os.environ.get(TOKEN_ENV) or None
    check_open(options.host, token)
    rest_port = options.port + 1 if options.rest_port is None else options.rest_port
    client = Client(options.uri, **dict(options.settings))
    grpc_server = None
    try:
        grpc_server = _start_grpc(client, options.host, options.port, token)
        config = uvicorn.Config(
            rest_app(client, token),
            host=options.host,
            port=rest_port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=5,
        )
        print(
            f"vectorlog serve: gRPC on {options.host}:{options.port}, "
            f"REST v2 on http://{options.host}:{rest_port}",
            file=sys.stderr,
            flush=True,
        )
        _Rest(config).run()
    finally:
        if grpc_server is not None:
            grpc_server.stop(grace=2.0)
        client.close()
    return 0


def _start_grpc(client: Client, host: str, port: int, token: str | None) -> Any:
    """Starts the gRPC server (vectorlog/server/grpc_server.py); returns it. HOOK: its token
    check is passed on when start_grpc takes `token`; until then, with a token, gRPC is
    bound to localhost only so it is never open where REST asks for a token."""
    from vectorlog.server.grpc_server import start_grpc

    if token and "token" in inspect.signature(start_grpc).parameters:
        auth: dict[str, Any] = {"token": token}
        return start_grpc(client, f"{host}:{port}", **auth)
    if token:
        print("vectorlog serve: gRPC has no token check yet: bound to 127.0.0.1", file=sys.stderr)
        host = "127.0.0.1"
    return start_grpc(client, f"{host}:{port}")
