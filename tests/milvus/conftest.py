"""Fixtures of the differential tests: the clients of tests/clients.py, the process cluster
a module's "cluster" pairs share (tests/milvus/cluster_pair.py), and the real Milvus 2.3.5
(infra/milvus_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.milvus_server import MilvusServer, MilvusUnavailable, ensure_venv
from tests.clients import (  # noqa: F401
    backend,
    client_args,
    open_client,
    shared_client,
    shared_clusters,
)
from tests.vectorlog.cluster.processes import ProcessCluster


@pytest.fixture(scope="module")
def process_cluster(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessCluster]:
    """One process cluster (a `vectorlog run` child per role, 2 proxies) on the test broker
    for the module's tests (starting its seven processes takes 20-40 s)."""
    made = ProcessCluster(kafka_bootstrap, tmp_path_factory.mktemp("diff-cluster"), proxies=2)
    try:
        made.start_all()
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def milvus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    """A Milvus 2.3.5 standalone on free ports; fails (never skips) if it cannot be had."""
    server, reason = None, ""
    try:
        server = MilvusServer(tmp_path_factory.mktemp("milvus"), ensure_venv())
        server.start()
    except MilvusUnavailable as exc:
        reason = str(exc)
    if server is None or server.proc is None:
        pytest.fail(f"the real Milvus 2.3.5 is required by this test: {reason}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


#: the "cluster" pairs `make test` runs (one cluster start, reads, writes and partitions, flush,
#: compaction and aliases); the others, and those of the other differential modules, are slow
CLUSTER_IN_MAKE_TEST = {
    "test_differential.py::test_reads[cluster-kafka-L2]",
    "test_differential.py::test_writes_and_partitions[cluster-kafka]",
    "test_differential.py::test_aliases_rename_load_flush_and_stats[cluster-kafka]",
}


@pytest.hookimpl(tryfirst=True)  # before `-m 'not slow'` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects the "cluster" pairs of the embedded backend (a process cluster runs on Kafka
    only: its pairs are collected once, with the kafka backend) and marks slow the cluster
    pairs not in CLUSTER_IN_MAKE_TEST."""
    dropped = [item for item in items if _pair_and_backend(item) == ("cluster", "embedded")]
    if dropped:
        gone = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in gone]
        config.hook.pytest_deselected(items=dropped)
    for item in items:
        in_make_test = item.nodeid.rsplit("/", 1)[-1] in CLUSTER_IN_MAKE_TEST
        if _pair_and_backend(item)[0] == "cluster" and not in_make_test:
            item.add_marker(pytest.mark.slow)


def _pair_and_backend(item: pytest.Item) -> tuple[object, object]:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return params.get("pair"), params.get("backend")
