"""The TCP ports a cluster-mode process (or a `cluster up` supervisor's children) will bind,
checked free before anything starts, so that a port another program holds refuses the start
with one line naming the port and what it was for, instead of a process failing halfway
through its start (`vectorlog run`, `vectorlog cluster up`)."""

from __future__ import annotations

import socket
from collections.abc import Iterable

from vectorlog.core.errors import InvalidArgument, VectorlogError

#: the highest TCP port
MAX_PORT = 65535


class PortInUse(VectorlogError):
    """A port a process would bind is held by another program (or another of its ports)."""

    def __init__(self, port: int, role: str, host: str) -> None:
        super().__init__(
            f"port {port} ({role}) is already in use on {host}: stop what holds it or "
            "choose other ports"
        )
        self.port, self.role, self.host = port, role, host


def in_use(host: str, port: int) -> bool:
    """Returns True if `port` cannot be bound on `host` now as a server binds it
    (SO_REUSEADDR: a connection in TIME_WAIT does not count, a listener or a connection
    bound to it does)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError:
            return True
    return False


def check_free(ports: Iterable[tuple[int, str]], host: str = "127.0.0.1") -> None:
    """Checks `ports`, pairs of (port, what it is for), before anything binds them (port 0:
    any free port, not checked). Raises InvalidArgument for a port outside 0..65535 or given
    twice, PortInUse for the first one held by another program."""
    seen: dict[int, str] = {}
    for port, role in ports:
        if not 0 <= port <= MAX_PORT:
            raise InvalidArgument(f"port {port} ({role}) is outside 0..{MAX_PORT}")
        if port and port in seen:
            raise InvalidArgument(f"port {port} is both {seen[port]} and {role}")
        seen[port] = role
    for port, role in seen.items():
        if port and in_use(host, port):
            raise PortInUse(port, role, host)


def free_port(avoid: Iterable[int] = ()) -> int:
    """Returns a TCP port free now on 127.0.0.1 and not in `avoid`."""
    skip = set(avoid)
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in skip:
            return port
