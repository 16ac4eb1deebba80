"""The implementations a service contract suite runs against, for `indirect=True`
parametrization: the test twin ("fake"), the real processor of a fresh cluster on each log
backend ("embedded", "kafka"), and the network client talking to an RpcServer that wraps the
real one of an embedded cluster ("network")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients import cluster_args
from tests.support import log_params
from vectorlog import Client
from vectorlog.rpc.server import RpcServer

#: every implementation of a service
ALL = ["fake", *log_params(), pytest.param("network", id="network")]
#: the real ones: in-process on each log backend, and over the network
REAL = [*log_params(), pytest.param("network", id="network")]
#: the in-process ones (constructs that never cross processes)
IN_PROCESS = ["fake", *log_params()]


def open_cluster(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Client:
    """Returns a Client of a fresh cluster for an implementation kind (network: embedded)."""
    backend = "embedded" if kind == "network" else kind
    args: dict[str, Any] = cluster_args(backend, request, tmp_path)
    return Client(args.pop("uri"), **args)


@contextlib.contextmanager
def served(**services: Any) -> Iterator[str]:
    """Serves the services (rootcoord=..., datacoord=..., querynode=...) on a free local
    port; yields its address."""
    server = RpcServer(**services)
    server.start()
    try:
        yield server.address
    finally:
        server.stop(0)


@contextlib.contextmanager
def real_or_remote(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, role: str, remote: Any
) -> Iterator[tuple[Client, Any]]:
    """Yields a fresh cluster's Client and its `role` service ("datacoord", ...): the real
    one, or for "network" a `remote(address)` client of a server wrapping the real one."""
    client = open_cluster(kind, request, tmp_path)
    try:
        real = getattr(client.cluster, role)
        if kind != "network":
            yield client, real
            return
        with served(**{role: real}) as address:
            service = remote(address)
            try:
                yield client, service
            finally:
                service.close()
    finally:
        client.close()
