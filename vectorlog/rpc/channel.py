"""`RpcChannel`: a client's connection to one server, calling methods of one service with a
deadline; it reconnects by itself (backoff 0.1-1 s) once the server is back.

A role run with standbys (rootcoord, datacoord: issue 23) is given as several addresses,
"HOST:PORT,HOST:PORT": a call goes to the one that answered last, and on to the next when it
was refused before anything was applied: the address is unreachable (a standby serves nothing
until it leads), or answers that it lost its lease or that its lease is not confirmed yet. It
goes round the addresses again, with a short backoff, until one answers or the call's
deadline passes, and then raises the most telling refusal (a process's answer before an
unreachable address), so the clients find the leader by themselves after a takeover. A call
whose outcome is unknown (its deadline passed, its connection was lost mid-call) is never
sent again: it raises at once, and the next call begins at the next address (a paused leader
accepts connections and answers nothing)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import grpc

from vectorlog.core.errors import (
    InvalidArgument,
    LeaseUnconfirmed,
    RootCoordFenced,
    ServiceUnavailable,
    VectorlogError,
)
from vectorlog.rpc import wire
from vectorlog.rpc.callers import Callers
from vectorlog.rpc.errors import TOKEN_KEY, error_of, never_sent
from vectorlog.rpc.methods import Service
from vectorlog.rpc.server import MAX_MESSAGE

#: seconds a call may take when its caller says nothing (one round trip, or a DDL)
DEFAULT_DEADLINE_S = 10.0
#: no call waits longer than this (a caller without a gRPC deadline of its own passes
#: grpcio's "no deadline", about 300 years, which grpcio's timer cannot hold)
MAX_DEADLINE_S = 7 * 24 * 3600.0
OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


#: a process's answers that it does not lead (yet, or any more): nothing was applied; the
#: first is the most telling when no address leads (the one about to lead says it)
NOT_LEADING: tuple[type[VectorlogError], ...] = (LeaseUnconfirmed, RootCoordFenced)
#: seconds between rounds of the addresses when none led: the first, and the most
BACKOFF_S, MAX_BACKOFF_S = 0.05, 0.5
#: seconds of its deadline a call must have left to try another address after a refusal:
#: an attempt given less would mostly time out, and its outcome be unknown where the
#: refusals already say why no address answered
MIN_ATTEMPT_S = 0.05


def _rank(error: VectorlogError) -> int:
    """Returns how telling a refusal is: a process's answer before an unreachable address."""
    kinds = (*NOT_LEADING, ServiceUnavailable)
    return next(len(kinds) - i for i, k in enumerate(kinds) if isinstance(error, k))


class RpcChannel:
    """Calls the methods of `service` at `address` ("host:port", or several separated by
    commas: the leader among them, see the module docstring)."""

    def __init__(
        self,
        service: Service,
        address: str,
        deadline_s: float = DEFAULT_DEADLINE_S,
        token: str | None = None,
    ) -> None:
        """`deadline_s`: how long a call waits for its answer (a call that waits on purpose,
        such as WaitTSafe, gets its own timeout on top); `token`: the cluster's token, sent
        with every call (None: none). Raises InvalidArgument for a deadline that is not
        positive or an empty address."""
        if not deadline_s > 0:
            raise InvalidArgument(f"an RPC deadline must be positive, not {deadline_s!r}")
        self.addresses = [a.strip() for a in address.split(",") if a.strip()]
        if not self.addresses:
            raise InvalidArgument(f"an RPC address must be HOST:PORT, not {address!r}")
        self.service, self.address, self.deadline_s = service, address, deadline_s
        self._channels = [grpc.insecure_channel(a, options=OPTIONS) for a in self.addresses]
        self._stubs: dict[tuple[int, str], Any] = {}
        self._lock = threading.Lock()
        self._metadata = ((TOKEN_KEY, token),) if token else None
        self._current = 0  # the index of the address that answered last
        self._callers = Callers(f"rpc-{service.name.rpartition('.')[2]}-{self.addresses[0]}")

    def _stub(self, at: int, method: str) -> Any:
        with self._lock:
            stub = self._stubs.get((at, method))
            if stub is None:
                stub = self._channels[at].unary_unary(self.service.path(method))
                self._stubs[(at, method)] = stub
            return stub

    def call(self, method: str, **args: Any) -> Any:
        """Calls `method` with `args` (every argument by name); returns its result.
        Raises the server's VectorlogError, ServiceUnavailable if the server was not reached
        or did not answer in time, InvalidArgument if an argument cannot be encoded. With
        several addresses, goes round them until one answers or the deadline passes (the
        module docstring)."""
        m = self.service.methods[method]
        request = wire.encode_request(self.service.name, m, args)
        deadline = self.deadline_s + (float(args[m.waits]) if m.waits else 0.0)
        end = time.monotonic() + min(deadline, MAX_DEADLINE_S)
        refusals: list[VectorlogError] = []
        backoff = BACKOFF_S
        while True:
            first, count = self._current, len(self.addresses)
            for at in [(first + k) % count for k in range(count)]:
                left = end - time.monotonic()
                if left <= MIN_ATTEMPT_S and refusals:
                    break
                response, error, may_retry = self._attempt(at, method, request, max(left, 1e-3))
                if error is None:
                    self._current = at
                    return wire.decode_response(self.service.name, m, response)
                if count == 1 or not may_retry:
                    if isinstance(error, ServiceUnavailable):  # the caller's retry goes on
                        self._current = (at + 1) % count
                    raise error
                refusals.append(error)
            left = end - time.monotonic()
            if left <= 0:
                raise max(reversed(refusals), key=_rank)  # the latest of the most telling
            time.sleep(min(backoff, left))
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def start(self, method: str, **args: Any) -> Callable[[], Any]:
        """Sends `method` with `args` (a channel of one address) and returns at once a
        function that waits for its result and returns it, raising as `call` does (no
        retry: its caller decides). The call is made on one of the channel's Callers
        threads (grpcio's future() would start a thread per call on an idle channel). Raises
        InvalidArgument if an argument cannot be encoded or the channel has several
        addresses."""
        if len(self.addresses) != 1:
            raise InvalidArgument(f"start() needs one address, not {self.address!r}")
        m = self.service.methods[method]
        request = wire.encode_request(self.service.name, m, args)
        deadline = self.deadline_s + (float(args[m.waits]) if m.waits else 0.0)
        stub, timeout = self._stub(0, method), min(deadline, MAX_DEADLINE_S)
        wait = self._callers.start(lambda: stub(request, timeout=timeout, metadata=self._metadata))

        def result() -> Any:
            try:
                response = wait()
            except grpc.RpcError as err:
                name = self.service.name.rpartition(".")[2].lower()
                raise error_of(err, name, self.addresses[0]) from None
            return wire.decode_response(self.service.name, m, response)

        return result

    def _attempt(
        self, at: int, method: str, request: bytes, timeout: float
    ) -> tuple[Any, VectorlogError | None, bool]:
        """Returns (the response, None, _) from the address `at`, or (None, the error,
        whether another address may be tried: this one was never reached, or its process
        answered that it does not lead; nothing was applied)."""
        try:
            stub = self._stub(at, method)
            return stub(request, timeout=timeout, metadata=self._metadata), None, False
        except grpc.RpcError as err:
            name = self.service.name.rpartition(".")[2].lower()
            error = error_of(err, name, self.addresses[at])
            unreached = isinstance(error, ServiceUnavailable) and never_sent(err)
            return None, error, unreached or isinstance(error, NOT_LEADING)

    def close(self) -> None:
        """Closes the connections; later calls fail."""
        self._callers.close()
        for channel in self._channels:
            channel.close()


class ServiceClient:
    """The base of a service's network client: a channel to the RpcServer at `address`
    serving `SERVICE`, its `address`, and `close`."""

    SERVICE: ClassVar[Service]

    def __init__(
        self, address: str, deadline_s: float = DEFAULT_DEADLINE_S, token: str | None = None
    ) -> None:
        """`token`: the cluster's token, sent with every call (None: none)."""
        self._rpc = RpcChannel(self.SERVICE, address, deadline_s, token)

    @property
    def address(self) -> str:
        return self._rpc.address

    def close(self) -> None:
        """Closes the connection; later calls fail."""
        self._rpc.close()
