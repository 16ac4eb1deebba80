"""`RpcChannel`: a client's connection to one server, calling methods of one service with a
deadline; it reconnects by itself (backoff 0.1-1 s) once the server is back.

A role run with standbys (rootcoord, datacoord: issue 23) is given as several addresses,
"HOST:PORT,HOST:PORT": a call goes to the one that answered last, and on to the next when it is
unreachable or answers that it lost its lease (a standby serves nothing until it leads), so
the clients find the leader by themselves after a takeover."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import grpc

from vectorlog.core.errors import InvalidArgument, RootCoordFenced, ServiceUnavailable
from vectorlog.rpc import wire
from vectorlog.rpc.errors import TOKEN_KEY, error_of
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


#: what makes a call go on to the next address: this one does not lead (or is not up)
FAILOVER = (ServiceUnavailable, RootCoordFenced)


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
        or did not answer in time, InvalidArgument if an argument cannot be encoded."""
        m = self.service.methods[method]
        request = wire.encode_request(self.service.name, m, args)
        deadline = self.deadline_s + (float(args[m.waits]) if m.waits else 0.0)
        deadline = min(deadline, MAX_DEADLINE_S)
        first, count = self._current, len(self.addresses)
        for k in range(count):
            at = (first + k) % count
            try:
                stub = self._stub(at, method)
                response = stub(request, timeout=deadline, metadata=self._metadata)
            except grpc.RpcError as err:
                name = self.service.name.rpartition(".")[2].lower()
                error = error_of(err, name, self.addresses[at])
                if k + 1 < count and isinstance(error, FAILOVER):
                    continue
                raise error from None
            self._current = at
            return wire.decode_response(self.service.name, m, response)
        raise AssertionError("unreachable: the last address raises or returns")

    def close(self) -> None:
        """Closes the connections; later calls fail."""
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
