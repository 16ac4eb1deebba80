"""`vectorlog serve`: one process serving Milvus's gRPC protocol (port 19530, as Milvus) and
REST v2 (the next port, 19531: Milvus 2.4 multiplexes both on 19530, which Python's grpcio
and uvicorn cannot share) over one cluster, until SIGTERM or SIGINT; then it closes it. With
a token both protocols ask for it; with a certificate and key both speak TLS only."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn

from vectorlog.sdk.client import Client
from vectorlog.server.access_log import GrpcAccessLog
from vectorlog.server.exposure import TLS_CERT_ENV, TLS_KEY_ENV, TOKEN_ENV, check_open
from vectorlog.server.grpc_metrics import metering
from vectorlog.server.grpc_server import GrpcServer, start_grpc
from vectorlog.server.rest_app import rest_app
from vectorlog.server.tls import TlsFiles, tls_files

#: the environment variable that turns the access log on (as --access-log)
ACCESS_LOG_ENV = "VECTORLOG_ACCESS_LOG"
GRPC_PORT = 19530  # Milvus's port
#: how often the REST server's loop wakes to refresh its Date header and look at
#: `should_exit` (a signal wakes it at once); uvicorn's own loop wakes every 0.1 s, most of an
#: idle proxy process's Python time (py-spy --gil, issue 24)
REST_TICK_S = 1.0
log = logging.getLogger("vectorlog.serve")


@dataclass(frozen=True)
class ServeOptions:
    """What to serve and where: `uri` as Client's (None: VECTORLOG_LOG), `settings` Config
    overrides, `rest_port` None = `port` + 1, `token` None = open (localhost only),
    `tls_cert`/`tls_key` PEM files (None: plaintext); the last three default to VECTORLOG_*."""

    uri: str | None = None
    settings: tuple[tuple[str, Any], ...] = ()
    host: str = "127.0.0.1"
    port: int = GRPC_PORT
    rest_port: int | None = None
    token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    #: users, roles and privileges enforced (Milvus's common.security.authorizationEnabled)
    authorization: bool = False
    #: a line per call on `vectorlog.access` (Milvus's proxy.accessLog.enable, off by
    #: default as Milvus's: it costs the proxy about 8 % of its CPU per search); None:
    #: VECTORLOG_ACCESS_LOG
    access_log: bool | None = None


def access_logged(options: ServeOptions) -> bool:
    """Returns whether calls are logged: the option, else VECTORLOG_ACCESS_LOG (1/true)."""
    if options.access_log is not None:
        return options.access_log
    return os.environ.get(ACCESS_LOG_ENV, "").lower() in ("1", "true", "yes", "on")


class _Rest(uvicorn.Server):
    """uvicorn, with SIGTERM/SIGINT ending the serve loop without re-raising the signal
    afterwards (uvicorn's default), so the process can close the cluster and exit 0, and
    `ready` called once it listens. Its loop wakes every REST_TICK_S, not every 0.1 s; a
    signal ends the wait at once (`should_exit` set from elsewhere: at the next tick)."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.ready = ready
        self._exit: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        """uvicorn's loop, ticking every REST_TICK_S: `on_tick` counts 0.1 s ticks and
        refreshes the Date header every 10th, so it is handed a multiple of 10."""
        self._exit, self._loop = asyncio.Event(), asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864_000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), REST_TICK_S)
            should_exit = await self.on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.ready is not None:
            self.ready()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        def stop(sig: int, frame: FrameType | None) -> None:
            self.should_exit = True
            if self._loop is not None and self._exit is not None:
                self._loop.call_soon_threadsafe(self._exit.set)

        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def serve(options: ServeOptions) -> int:
    """Serves until SIGTERM/SIGINT, then stops both servers and closes the cluster; returns
    the exit code (0). Raises InvalidArgument before opening the cluster for an open host
    without a token or a missing, unreadable or mismatched TLS file; later for a bad address."""
    token = options.token or os.environ.get(TOKEN_ENV) or None
    check_open(options.host, token, options.authorization)
    tls = tls_files(
        options.tls_cert or os.environ.get(TLS_CERT_ENV) or None,
        options.tls_key or os.environ.get(TLS_KEY_ENV) or None,
    )
    log.info("opening the cluster at %s", options.uri or os.environ.get("VECTORLOG_LOG", "."))
    return serve_client(Client(options.uri, **dict(options.settings)), options, token, tls)


def serve_client(
    client: Client,
    options: ServeOptions,
    token: str | None,
    tls: TlsFiles | None,
    ready: Callable[[], None] | None = None,
) -> int:
    """Serves `client` (any Client: `vectorlog serve`'s, or a proxy process's attached one)
    on both ports until SIGTERM/SIGINT, then closes it; returns 0. `ready` is called once
    both ports accept calls. Raises InvalidArgument for an address that cannot be bound."""
    rest_port = options.port + 1 if options.rest_port is None else options.rest_port
    sys.setswitchinterval(client.cfg.gil_switch_interval_ms / 1000)
    log.info("GIL switch interval %g ms", client.cfg.gil_switch_interval_ms)
    grpc_server: GrpcServer | None = None
    try:
        logged = access_logged(options)
        config = rest_config(
            client, options.host, rest_port, token, tls, options.authorization, logged
        )
        # metrics into the REST app's registry (one /metrics), then the access log
        interceptors = [metering(config.app), *([GrpcAccessLog()] if logged else [])]
        address = f"{options.host}:{options.port}"
        grpc_server = start_grpc(
            client,
            address,
            token=token,
            tls=tls,
            interceptors=interceptors,
            authorization=options.authorization,
        )
        scheme = "https" if tls else "http"
        log.info(
            "gRPC%s on %s:%d, REST v2 on %s://%s:%d%s",
            " (TLS)" if tls else "",
            options.host,
            options.port,
            scheme,
            options.host,
            rest_port,
            _access(token, options.authorization),
        )
        _Rest(config, ready).run()
        log.info("stopping: finishing calls in flight")
    finally:
        if grpc_server is not None:
            grpc_server.stop(grace=2.0)
        client.close()
    log.info("stopped; the cluster is closed")
    return 0


def _access(token: str | None, authorization: bool) -> str:
    """Returns the log's note on who may call."""
    if authorization:
        return " (authorization: users log in, privileges enforced)"
    return "" if token else " (no token: this machine only)"


def rest_config(
    client: Client,
    host: str,
    port: int,
    token: str | None,
    tls: TlsFiles | None,
    authorization: bool = False,
    access_log: bool = True,
) -> uvicorn.Config:
    """Returns uvicorn's configuration of the REST app (HTTPS with `tls`; each request on
    `vectorlog.access` with `access_log`)."""
    return uvicorn.Config(
        rest_app(client, token, authorization=authorization, access_log=access_log),
        host=host,
        port=port,
        log_level=logging.getLogger().getEffectiveLevel(),
        log_config=None,  # the process's logging (server/logs.py), not uvicorn's own
        access_log=False,  # vectorlog.access logs each request (server/access_log.py)
        lifespan="off",
        timeout_graceful_shutdown=5,
        ssl_certfile=str(tls.cert) if tls else None,
        ssl_keyfile=str(tls.key) if tls else None,
    )
