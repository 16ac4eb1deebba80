"""Answering the short RPCs of gRPC's thread-pool server on its polling thread (issue 28).

The thread-pool server hands each call to a worker: the poller wakes the worker, the worker
asks for the request message and sleeps until the poller hands it over, and the poller then
wakes for the response's completion, every hand-off a futex wake, a context switch and a
GIL hand-over between two threads. A bare grpcio server answering fixed bytes after 100 µs of
Python took 406-539 µs a call that way against 349-367 µs answered on the poller (server CPU
288-354 vs 222-232 µs, context switches 13-22 vs 6 a call; load ~1). Through pymilvus
2.3.8 (benchmarks/wire_calls_ab, this tree with VECTORLOG_GRPC_POLLER_ANSWERS=0 against
without, both orders, load 2.8-3.4): one query per call 1.10-1.27 x the QPS, server CPU
0.79-0.85 x, context switches 33 -> 6 a call; has_collection server CPU 0.73-0.81 x.

`PollerExecutor` is the executor handed to `grpc.server`: a unary call of a method it
answers inline (the reads of grpc_inline.INLINE; Search, tried first) asks for its request
message on the poller, and the poller runs the handler once the message is there. Search
is tried only for a small request (a few query vectors); where its one-call path declines,
or would wait on another thread (a replica lock held elsewhere), the servicer raises
core.inline's `Declined` and the call goes to a worker, which answers it as before. All
else goes to the worker pool unchanged, and so does every call with a grpcio lacking the
internals used here, or a grpcio release they were not tested on (`supported`). The poller
answers one call at a time, so a call it receives right after answering one (QUEUED_S: it
was waiting, clients call faster than one thread answers) goes to the pool: many clients'
calls at once run on the workers side by side, as without the poller (4 clients of
one-query searches on this 2-core VM: 2,365-2,634 calls/s against 2,364-2,419 with the
pool alone; 3,940 all on the poller, which a many-core machine with slower searches would
lose). VECTORLOG_GRPC_POLLER_ANSWERS=0 leaves every call to the pool. An interceptor that
catches a handler's exceptions must let `Declined` through (grpc_observe's wrappers do).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from grpc import _server as _grpc_server  # written against grpcio 1.85: `_method` checks
from grpc._cython import cygrpc as _cygrpc  # the call's shape, else the call goes to the pool

from vectorlog.core.inline import Declined, running_inline
from vectorlog.server.grpc_inline import INLINE, TRIED_INLINE
from vectorlog.server.grpc_rpc import SERVICE

#: the largest Search request tried on the poller: a few query vectors (one GloVe-50d query
#: is ~230 bytes, one 1,024-d query 4 KB); a batch goes to a worker (it may take ms)
MAX_TRIED_BYTES = 16 * 1024
#: the most query vectors of a Search tried on the poller (0: the client did not say)
MAX_TRIED_NQ = 4
#: a call the poller receives sooner than this after answering one inline was waiting
#: behind it (clients call faster than one thread answers): it goes to the pool, so calls
#: of many clients at once run on the workers in parallel. Measured on this 2-core VM: the
#: next call of one client calling back to back arrives 301 µs (p5; pymilvus) or 176 µs
#: (raw gRPC) after the answer, one waiting behind it 19-21 µs after.
QUEUED_S = 60e-6


#: the internals of gRPC's thread-pool server the poller's answers use
_INTERNALS = (
    "_unary_response_in_pool",
    "_receive_message",
    "_call_behavior",
    "_serialize_response",
    "_status",
    "_EMPTY_FLAGS",
    "_RECEIVE_MESSAGE_TOKEN",
)


#: the grpcio releases (major, minor) the poller's answers were tested on: its internals
#: are private, and a release may change what they do without changing their names
TESTED_GRPCIO = frozenset({(1, 85)})


def supported(version: str = grpc.__version__) -> bool:
    """Returns whether this grpcio (`version`) is one the poller's answers were tested on
    and has what they use (else start_grpc leaves every call to gRPC's pool, as without
    them)."""
    release = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if release not in TESTED_GRPCIO:
        return False
    found = all(hasattr(_grpc_server, name) for name in _INTERNALS)
    needed = ("ReceiveMessageOperation", "install_context_from_request_call_event")
    return found and all(hasattr(_cygrpc, name) for name in (*needed, "uninstall_context"))


def _method_path(name: str) -> str:
    return f"/{SERVICE.full_name}/{name}"


#: the method paths answered on the poller: those always, and those tried (Search)
ANSWERED = frozenset(_method_path(name) for name in INLINE)
TRIED = frozenset(_method_path(name) for name in TRIED_INLINE)


#: the method of the call whose handler gRPC looked up (set in the call's own context)
_METHOD: contextvars.ContextVar[str] = contextvars.ContextVar("vectorlog_grpc_method")


class MethodNoting(grpc.ServerInterceptor):
    """The first interceptor of a server with a PollerExecutor: notes the called method in
    the call's context (gRPC runs the interceptors in it, and hands the executor its `run`;
    a registered method's call event does not name its method)."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """Returns the method's handler, the method noted."""
        _METHOD.set(handler_call_details.method)
        return continuation(handler_call_details)


class PollerExecutor(futures.Executor):
    """The executor of gRPC's thread-pool server: the calls it answers inline (see the
    module) on the poller, every other one on `pool`."""

    def __init__(self, pool: futures.ThreadPoolExecutor) -> None:
        self.pool = pool
        #: when the poller last finished answering a call (perf_counter seconds)
        self.answered_at = -1.0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        """Answers a call inline on the poller (fn: the call's context's run, args
        `_unary_response_in_pool`'s) when its method is one answered here; else submits to
        the pool."""
        method = None if kwargs else _method(fn, args)
        if method is None or time.perf_counter() - self.answered_at < QUEUED_S:
            return self.pool.submit(fn, *args, **kwargs)
        done: futures.Future[Any] = futures.Future()
        _InlineCall(self, fn, args, done, method in TRIED).start()
        return done

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait, cancel_futures=cancel_futures)


def _method(run: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """Returns the method of a unary call gRPC submits (`run`: its context's run; args:
    `_unary_response_in_pool`, rpc_event, state, behaviour, request thunk, deserializer,
    serializer) when it is one answered on the poller; else None."""
    if len(args) != 7:
        return None
    if args[0] is not getattr(_grpc_server, "_unary_response_in_pool", None):
        return None
    context = getattr(run, "__self__", None)
    if not isinstance(context, contextvars.Context):
        return None
    method = context.get(_METHOD, None)
    return method if method in ANSWERED or method in TRIED else None


class _InlineCall:
    """One call answered on the poller: its request message asked for, then its handler
    run when the message is there (the poller runs the tag's callbacks)."""

    def __init__(
        self,
        executor: PollerExecutor,
        run: Callable[..., Any],
        args: tuple[Any, ...],
        done: futures.Future[Any],
        tried: bool,
    ) -> None:
        self.executor, self.run, self.args, self.done, self.tried = executor, run, args, done, tried
        _, self.event, self.state, _, _, self.decode, _ = args

    def start(self) -> None:
        """Asks for the request message (gRPC holds the call's condition here, as its own
        request thunk does when it asks)."""
        received = _grpc_server._receive_message(self.state, self.event.call, self.decode)

        def tag(event: Any) -> tuple[Any, tuple[Callable[[], None], ...]]:
            finished, callbacks = received(event)
            return finished, (*callbacks, self.answer)

        self.event.call.start_server_batch(
            (_cygrpc.ReceiveMessageOperation(_grpc_server._EMPTY_FLAGS),), tag
        )
        self.state.due.add(_grpc_server._RECEIVE_MESSAGE_TOKEN)

    def answer(self) -> None:
        """Runs the handler on the poller with the request received; a missing request
        (closed, cancelled or undecodable: gRPC's thunk says so), a large Search or a
        declined one goes to the pool."""
        request = self._take()
        if request is None or (self.tried and not _small(request)):
            self._to_pool(request)
            return
        with running_inline() if self.tried else contextlib.nullcontext():
            answered = self._respond(request)
        if answered:
            self.executor.answered_at = time.perf_counter()
            self.done.set_result(None)
        else:
            self._to_pool(request)

    def _respond(self, request: Any) -> bool:
        """Answers the call as gRPC's `_unary_response_in_pool` does (the handler called,
        its response serialized and sent with the status), unless the handler declined;
        returns whether it answered."""
        _, event, state, behaviour, _, decode, encode = self.args
        declined = False

        def tried(request: Any, context: Any) -> Any:
            nonlocal declined
            try:
                return behaviour(request, context)
            except Declined:
                declined = True
                return None

        _cygrpc.install_context_from_request_call_event(event)
        try:
            response, proceed = _grpc_server._call_behavior(event, state, tried, request, decode)
            if declined:
                return False
            if proceed:
                serialized = _grpc_server._serialize_response(event, state, response, encode)
                if serialized is not None:
                    _grpc_server._status(event, state, serialized)
            return True
        finally:
            _cygrpc.uninstall_context()

    def _take(self) -> Any:
        with self.state.condition:
            request, self.state.request = self.state.request, None
        return request

    def _to_pool(self, request: Any) -> None:
        """Submits the call to the pool: with `request`, else with gRPC's own request
        thunk (it answers a closed or cancelled call as it always does)."""
        args = self.args if request is None else (*self.args[:4], lambda: request, *self.args[5:])
        worker = self.executor.pool.submit(self.run, *args)
        worker.add_done_callback(lambda _finished: self.done.set_result(None))


def _small(request: Any) -> bool:
    """Returns whether a Search request is small enough to try on the poller."""
    nq = int(getattr(request, "nq", 0) or 0)
    return nq <= MAX_TRIED_NQ and len(getattr(request, "placeholder_group", b"")) <= MAX_TRIED_BYTES
