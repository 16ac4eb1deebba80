"""The asyncio gRPC server (grpc.aio) on an event loop thread of its own, started and stopped
from any thread: a call reaches its handler with no hand-off between gRPC's threads (the
thread-pool server's poller passes each request to a worker and its response back), and
short handlers answer on the loop itself (grpc_inline.py); the rest run on the executor."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc

from vectorlog.server.grpc_inline import method_handlers
from vectorlog.server.grpc_observe import LoopInterceptor
from vectorlog.server.grpc_rpc import SERVICE

T = TypeVar("T")
#: adds the listening port to a server; returns its number (0: not bound)
Bind = Callable[[Any], int]


class LoopServer:
    """A grpc.aio server serving MilvusService on a daemon thread's event loop; `port` is
    its bound port once `start` returned."""

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        self.executor = executor
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._loop = asyncio.new_event_loop()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vectorlog-grpc-loop", daemon=True)
        self._thread.start()

    def start(
        self,
        servicer: Any,
        inline: bool,
        options: Sequence[tuple[str, Any]],
        interceptors: Sequence[grpc.ServerInterceptor],
        bind: Bind,
    ) -> int:
        """Serves `servicer`'s RPCs (grpc_inline.method_handlers: inline on the loop if
        `inline`) behind `interceptors`, on the port `bind` adds; returns the port. On
        failure (RuntimeError of gRPC's bind, whatever `bind` raises) the loop is stopped
        and the error raised."""
        try:
            self.port = self._call(self._start(servicer, inline, options, interceptors, bind))
        except BaseException:
            self.stop(0)
            raise
        return self.port

    async def _start(
        self,
        servicer: Any,
        inline: bool,
        options: Sequence[tuple[str, Any]],
        interceptors: Sequence[grpc.ServerInterceptor],
        bind: Bind,
    ) -> int:
        self._server = grpc.aio.server(
            migration_thread_pool=self.executor,
            options=list(options),
            interceptors=[LoopInterceptor(i) for i in interceptors],
        )
        handlers = method_handlers(servicer, self.executor, inline)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
        )
        self._server.add_registered_method_handlers(SERVICE.full_name, handlers)
        port = bind(self._server)
        if port:
            await self._server.start()
        return port

    def stop(self, grace: float | None) -> None:
        """Stops accepting RPCs, lets running ones finish for up to `grace` seconds (then
        cancels them), stops the loop and the executor's idle threads; returns once
        stopped. Safe to call more than once."""
        if self._stopped.is_set():
            return
        if self._server is not None:
            self._call(self._server.stop(grace))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self.executor.shutdown(wait=False)
        self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the server stopped (or `timeout`); returns whether it stopped."""
        return self._stopped.wait(timeout)

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs `coroutine` on the loop; returns its result (raises its exception)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()
