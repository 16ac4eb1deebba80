"""Client fixtures (registered by tests/vectorlog/conftest.py): a `vectorlog.Client` on each
log backend, reopened on the same cluster to simulate a restart; helpers to read the log."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import log_params
from vectorlog import Client
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.scan import read_to_end

ClientFactory = Callable[..., Client]


@pytest.fixture(params=log_params())
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client_args(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The Client(...) arguments of one fresh cluster on the backend."""
    return cluster_args(backend, request, tmp_path)


def cluster_args(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Returns the Client(...) arguments of one fresh cluster on `backend` (the Kafka broker
    is the session's, started on first use)."""
    settings: dict[str, Any] = {"tick_interval_ms": 50, "read_timeout_s": 20.0}
    if backend == "embedded":
        return {"uri": str(tmp_path / "db"), **settings}
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    return {
        "uri": f"kafka://{bootstrap}",
        "cluster": f"c{uuid.uuid4().hex[:10]}",
        "data_dir": str(tmp_path / "state"),
        **settings,
    }


@pytest.fixture
def open_client(client_args: dict[str, Any]) -> Iterator[ClientFactory]:
    """Opens Clients on the same cluster (a second one after closing the first = a restart)."""
    opened: list[Client] = []

    def factory(**overrides: Any) -> Client:
        args = {**client_args, **overrides}
        c = Client(args.pop("uri"), **args)
        opened.append(c)
        return c

    yield factory
    for c in opened:
        with contextlib.suppress(Exception):  # a test may have closed it already
            c.close()


@pytest.fixture
def client(open_client: ClientFactory) -> Client:
    return open_client()


def log_events(client: Client, topic: str | None = None) -> list[Event]:
    """Returns every event on a topic (default: dml) appended so far."""
    serde = EventSerde()
    return [
        serde.decode(r.value)
        for r in read_to_end(client.cluster.log, topic or client.cluster.topics.dml)
    ]


def data_events(client: Client) -> list[Event]:
    """Returns the RowsInserted and RowsDeleted events on the dml topic."""
    return [e for e in log_events(client) if e.type in ("RowsInserted", "RowsDeleted")]


def ddl_changes(client: Client) -> list[Event]:
    """Returns the DDL events that change meta (no ticks, markers or reservations)."""
    from vectorlog.processors.rootcoord.rootcoord import NOT_APPLIED

    return [e for e in log_events(client, client.cluster.topics.ddl) if e.type not in NOT_APPLIED]
