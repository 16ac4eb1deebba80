"""Client fixtures (registered by tests/vectorlog/conftest.py): a `vectorlog.Client` on each
log backend, reopened on the same cluster to simulate a restart; a `shared_client` in a
database of its own on a cluster its module shares; helpers to read the log.

Opening and closing a cluster costs 2-3 s, most of a typical test. A module whose tests need
only collections of their own overrides `client` with `shared_client`:

    @pytest.fixture
    def client(shared_client: Client) -> Client:
        return shared_client

Each of its tests then gets a fresh database on one cluster per backend that the module's tests
share (per xdist worker), dropped with its collections after the test; `log_events` and its
kin return only what was appended since the test began. A test that restarts, kills or reopens
the cluster, closes the client, reads cluster-wide state (users, databases, counters of every
collection) or needs settings of its own is marked `@pytest.mark.fresh_cluster` (or takes
`open_client`/`client_args`) and gets a cluster of its own, as before.
"""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import log_params
from vectorlog import Client
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.deadletter import DeadLetter
from vectorlog.streams.log.base import Append
from vectorlog.streams.scan import END_MARKER_SOURCE, read_to_end

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


#: where each shared client's test began on each topic it read ({topic: {partition: offset}})
_STARTS: weakref.WeakKeyDictionary[Client, dict[str, dict[int, int]]] = weakref.WeakKeyDictionary()
#: the settings of a test's own cluster that a shared cluster has too
FRESH_FIXTURES = ("open_client", "client_args")


class SharedClusters:
    """One cluster per backend, opened on first use and closed by `close`."""

    def __init__(self, request: pytest.FixtureRequest, tmp: pytest.TempPathFactory) -> None:
        self.request, self.tmp = request, tmp
        self.clients: dict[str, Client] = {}

    def get(self, backend: str) -> Client:
        """Returns the cluster's Client on `backend` (in the default database)."""
        if backend not in self.clients:
            args = cluster_args(backend, self.request, self.tmp.mktemp(f"shared-{backend}"))
            self.clients[backend] = Client(args.pop("uri"), **args)
        return self.clients[backend]

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


@pytest.fixture(scope="module")
def shared_clusters(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedClusters]:
    """The clusters a module's `shared_client`s share (xdist: one set per worker)."""
    clusters = SharedClusters(request, tmp_path_factory)
    yield clusters
    clusters.close()


@pytest.fixture
def shared_client(
    request: pytest.FixtureRequest, backend: str, shared_clusters: SharedClusters
) -> Iterator[Client]:
    """A Client in a database of its own on the module's cluster of `backend`, dropped with
    its collections after the test; a fresh cluster's for a test marked fresh_cluster or
    taking open_client/client_args."""
    if request.node.get_closest_marker("fresh_cluster") or any(
        f in request.fixturenames for f in FRESH_FIXTURES
    ):
        yield request.getfixturevalue("open_client")()
        return
    cluster = shared_clusters.get(backend)
    db = f"t{uuid.uuid4().hex[:12]}"
    cluster.create_database(db)
    client = cluster.in_database(db)
    mark_start(client)
    yield client
    drop_database(client)


def drop_database(client: Client) -> None:
    """Drops the client's database with its aliases and collections."""
    for alias in client.list_aliases()["aliases"]:
        client.drop_alias(alias)
    for name in client.list_collections():
        client.drop_collection(name)
    client.in_database("").drop_database(client.db)


def mark_start(client: Client) -> None:
    """Records where a shared client's test begins on the dml, ddl and coord topics (end
    markers, as read_to_end appends them)."""
    log, serde = client.cluster.log, EventSerde()
    marker = serde.encode(Event("TimeTick", 0, {"source": END_MARKER_SOURCE}))
    starts = _STARTS[client] = {}
    topics = client.cluster.topics
    for topic in (topics.dml, topics.ddl, topics.coord):
        ends = log.append(topic, [Append(p, marker) for p in range(log.partitions(topic))])
        starts[topic] = {p: end + 1 for p, end in enumerate(ends)}


def start_of_test(client: Client, topic: str) -> dict[int, int] | None:
    """Returns where a shared client's test began on `topic` (None: on a cluster of its own,
    from the beginning). Fails the test for a topic other than dml, ddl and coord on a shared
    one."""
    starts = _STARTS.get(client)
    if starts is None:
        return None
    if topic not in starts:
        pytest.fail(f"a test reading topic {topic!r} needs a cluster of its own (fresh_cluster)")
    return starts[topic]


def log_events(client: Client, topic: str | None = None) -> list[Event]:
    """Returns every event on a topic (default: dml) appended so far (on a shared cluster:
    since the test began)."""
    serde = EventSerde()
    name = topic or client.cluster.topics.dml
    start = start_of_test(client, name)
    return [serde.decode(r.value) for r in read_to_end(client.cluster.log, name, start=start)]


def own_letters(client: Client, letters: list[DeadLetter]) -> list[DeadLetter]:
    """Returns the dead letters of records appended since a shared client's test began (on a
    cluster of its own: all of them)."""
    out = []
    for letter in letters:
        start = start_of_test(client, letter.topic)
        if start is None or letter.offset >= start.get(letter.partition, 0):
            out.append(letter)
    return out


def data_events(client: Client) -> list[Event]:
    """Returns the RowsInserted and RowsDeleted events on the dml topic."""
    return [e for e in log_events(client) if e.type in ("RowsInserted", "RowsDeleted")]


def ddl_changes(client: Client) -> list[Event]:
    """Returns the DDL events that change meta (no ticks, markers or reservations)."""
    from vectorlog.processors.rootcoord.rootcoord import NOT_APPLIED

    return [e for e in log_events(client, client.cluster.topics.ddl) if e.type not in NOT_APPLIED]
