"""Where each RPC of the asyncio gRPC server runs (grpc_loop.py): the short ones inline on the
event loop, as one Python call with no thread hand-off (a search the one-call path answers,
describing a collection, its load state, the version, ...); everything that can wait (an
insert until the log made it durable, a flush, a load, an index build, an import, a read
waiting for its consistency level) on the executor's threads, so the loop never waits on
it. The servicer's handlers stay synchronous; a CallContext gives them the sync
ServicerContext calls they make (abort, metadata, peer, deadline) over the aio one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

import grpc
from google.protobuf.message_factory import GetMessageClass

from vectorlog.core.errors import VectorlogError
from vectorlog.core.inline import running_inline
from vectorlog.server.grpc_rpc import SERVICE

#: the RPCs answered inline when the cluster is in this process: reads of the in-memory meta,
#: the query coordinator's state and the oracle, none waiting on the log or a peer
INLINE = frozenset(
    {
        "Connect",
        "GetVersion",
        "DescribeCollection",
        "HasCollection",
        "ShowCollections",
        "HasPartition",
        "ShowPartitions",
        "GetLoadState",
        "GetLoadingProgress",
        "ListDatabases",
        "DescribeAlias",
        "ListAliases",
    }
)
#: the RPCs first tried inline by another method of the servicer (its response, or None
#: where it would wait), then, if that declined, answered by their handler on the executor
TRIED_INLINE = {"Search": "search_now"}

Handler = Callable[[Any, Any], Any]
AsyncHandler = Callable[[Any, Any], Awaitable[Any]]


class Abort(VectorlogError):  # noqa: N818 (an abort, not an error: it carries the call's status)
    """A handler's `context.abort(code, details)`, raised out of the handler and sent by the
    loop (the aio context's abort is a coroutine). Rooted in VectorlogError as every product
    exception is (the inline first try at Search, which declines on any VectorlogError, leaves
    the call to the executor path, which aborts the same way)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class CallContext:
    """The calls of grpc.ServicerContext vectorlog's handlers make, over an aio call's
    context: `abort` raises Abort (the loop sends it), the rest reads the call."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context

    def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        """Raises Abort: the call ends with `code` and `details`."""
        raise Abort(code, details)

    def invocation_metadata(self) -> Any:
        return self._context.invocation_metadata()

    def peer(self) -> str:
        return str(self._context.peer())

    def time_remaining(self) -> float | None:
        return self._context.time_remaining()

    def code(self) -> Any:
        return self._context.code()


def method_handlers(
    servicer: Any, executor: Executor, inline: bool
) -> dict[str, grpc.RpcMethodHandler]:
    """Returns the method handler of each MilvusService RPC by name, over `servicer`'s sync
    handlers: a unary RPC's a coroutine (those in INLINE called on the loop when `inline`,
    the cluster being in this process; those in TRIED_INLINE tried there first; all else
    run on `executor`), its request refused as the thread-pool server does when it cannot
    be decoded; a streaming RPC's (none is served) as it is, on gRPC's thread pool."""
    handlers = {}
    for rpc in SERVICE.methods:
        method = getattr(servicer, rpc.name)
        decode = GetMessageClass(rpc.input_type).FromString
        encode = GetMessageClass(rpc.output_type).SerializeToString
        if rpc.client_streaming or rpc.server_streaming:
            handlers[rpc.name] = grpc.stream_stream_rpc_method_handler(method, decode, encode)
            continue
        if inline and rpc.name in INLINE:
            run = on_loop(method)
        elif inline and rpc.name in TRIED_INLINE:
            run = tried_on_loop(getattr(servicer, TRIED_INLINE[rpc.name]), method, executor)
        else:
            run = on_executor(method, executor)
        handlers[rpc.name] = grpc.unary_unary_rpc_method_handler(
            decoded(run), _lenient(decode), encode
        )
    return handlers


class Undecodable:
    """A request that could not be decoded (its handler refuses it)."""


def _lenient(decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """Returns `decode`, an Undecodable for bytes it cannot decode (the asyncio server would
    answer UNKNOWN; the thread-pool server answers INTERNAL, as the handler then does)."""

    def decode_or_mark(raw: bytes) -> Any:
        try:
            return decode(raw)
        except Exception:
            return Undecodable()

    return decode_or_mark


def decoded(run: AsyncHandler) -> AsyncHandler:
    """Returns `run`, refusing an Undecodable request with INTERNAL as gRPC's thread-pool
    server does."""

    async def refuse_undecodable(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INTERNAL, "Exception deserializing request!")
        return await run(request, context)

    return refuse_undecodable


def on_loop(method: Handler) -> AsyncHandler:
    """Returns a coroutine handler calling `method` on the event loop."""

    async def run(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return method(request, CallContext(context))
        except Abort as abort:
            await context.abort(abort.code, abort.details)

    return run


def on_executor(method: Handler, executor: Executor) -> AsyncHandler:
    """Returns a coroutine handler running `method` on `executor`, the loop free meanwhile."""

    async def run(request: Any, context: grpc.aio.ServicerContext) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(executor, method, request, CallContext(context))
        except Abort as abort:
            await context.abort(abort.code, abort.details)

    return run


def tried_on_loop(now: Handler, method: Handler, executor: Executor) -> AsyncHandler:
    """Returns a coroutine handler answering with `now` on the loop when it answers (not
    None, and without waiting on another thread: core.inline), else with `method` on
    `executor`."""
    later = on_executor(method, executor)

    async def run(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            with running_inline():
                response = now(request, CallContext(context))
        except Abort as abort:
            await context.abort(abort.code, abort.details)
            raise  # not reached: the aio abort raises
        return response if response is not None else await later(request, context)

    return run
