"""Shared fixtures: a session-wide Kafka-API broker and a `log` on each backend.

A test that takes `log` runs once per backend (ids `embedded`, `kafka`). To pick backends:
    @pytest.mark.parametrize("log", LOG_BACKENDS, indirect=True)   # or on_backends("kafka")
(`LOG_BACKENDS`, `on_backends`, `unique_topic` live in tests/support.py). The broker is
started only if a `kafka` test runs (see infra/broker.py for which one).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from tests.pymilvus_polls import quicken_pymilvus_polls
from tests.support import LOG_BACKENDS, log_params, on_backends, unique_topic  # noqa: F401
from vectorlog.streams.log.base import Log

ROOT = Path(__file__).resolve().parent.parent  # the checkout the executors import
#: the group of a module whose tests share a module-scoped fixture (see below)
MODULE_GROUP = "module:"
#: the last pytest-xdist known to ignore xdist_group on pytest 9.2 (pytest_configure)
XDIST = Version("3.8.0")

#: clusters opened by tests compact only when a test asks (Client.compact, or its own
#: compaction_interval_s): a background merge would make other tests' segment lists and
#: timings depend on when it ran (tests/vectorlog/test_compaction.py tests the policy)
os.environ.setdefault("VECTORLOG_COMPACTION_INTERVAL_S", "none")
#: the tests' JVMs (each xdist worker's Spark session, a child's, the standalone cluster's
#: daemons) live seconds to minutes: compiling with C1 only and collecting on one thread, they
#: spend less CPU of a 2-core machine than C2's compiler and parallel GC threads do (the Spark
#: data node's source and failed-batch tests, alternated under load: 16-19 s of JVM CPU, not
#: 28-33 s)
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config: pytest.Config) -> None:
    """Refuses `--dist loadgroup` where xdist would ignore the groups: pytest-xdist 3.8 marks
    a test's group by rewriting its node id, which pytest 9.2's structured ids ignore
    (pytest-dev/pytest-xdist#1386); every group was then dealt out test by test, process
    clusters started on several workers at once (pyproject.toml pins pytest below 9.2).
    Shortens pymilvus's fixed status polls in this process (tests/pymilvus_polls.py)."""
    quicken_pymilvus_polls()
    if config.getoption("dist", "no") != "loadgroup":
        return
    import xdist

    if Version(pytest.__version__) >= Version("9.2") and Version(xdist.__version__) <= XDIST:
        raise pytest.UsageError(
            f"--dist loadgroup ignores xdist_group with pytest {pytest.__version__} and"
            f" pytest-xdist {xdist.__version__}: install pyproject.toml's pytest (`make install`)"
        )


@pytest.hookimpl(tryfirst=True)  # before xdist's loadgroup reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup`, runs a module whose tests use a module-scoped fixture (a
    shared or served cluster, a module's process) on one xdist worker: dealt out one test at a
    time, each worker opened that fixture for its share of the module's tests (three opens
    instead of one on `make test`'s three workers). A test in a group of its own keeps it."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(MODULE_GROUP + item.nodeid.split("::")[0]))


def _uses_module_fixture(item: pytest.Item) -> bool:
    """Returns whether `item` uses a fixture of module scope (of its module or a conftest)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of a Kafka-API broker started once per session."""
    from infra.broker import running_broker

    with running_broker() as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def schema_registry_url() -> Iterator[str]:
    """URL of a Schema Registry speaking Confluent's REST API (tests/schema_registry.py),
    started once per session; `SCHEMA_REGISTRY_URL` names an external one instead."""
    import os

    from tests.schema_registry import SchemaRegistryServer

    external = os.environ.get("SCHEMA_REGISTRY_URL", "").strip()
    if external:
        yield external
        return
    with SchemaRegistryServer() as server:
        yield server.url


def open_log(backend: str, request: pytest.FixtureRequest, path: Path) -> Log:
    """Opens a fresh log of `backend`: EmbeddedLog in `path`, or KafkaLog on the test broker."""
    if backend == "embedded":
        from vectorlog.streams.log.embedded import EmbeddedLog

        return EmbeddedLog(path)
    if backend == "kafka":
        from vectorlog.streams.log.kafka import KafkaLog

        return KafkaLog(request.getfixturevalue("kafka_bootstrap"))
    raise ValueError(f"unknown log backend {backend!r}")


@pytest.fixture(params=log_params())
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Log]:
    """A `Log` on the backend named by the parameter, closed after the test."""
    opened = open_log(request.param, request, tmp_path / "log")
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One SparkSession for the whole test session (starting the JVM takes seconds): the Spark
    jobs of the Clients opened by the tests (data node, bulk insert) find it running and
    reuse it, never stop it."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 (infra/ensure_java.sh)")
    from vectorlog.engines.spark.datanode_job import build_session

    session = build_session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[Any]:
    """A real Spark standalone cluster for the session (infra/spark_cluster.py): a master and
    two 1-core workers from the pyspark wheel's launcher on loopback, whose executors import
    this checkout's vectorlog; every daemon's process group is killed at the end. A driver
    must run in a process of its own (one SparkContext per process, and tests share one)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 (infra/ensure_java.sh)")
    from infra.spark_cluster import SparkCluster

    cluster = SparkCluster(workers=2, cores=1, memory="1g", pythonpath=str(ROOT)).start()
    try:
        yield cluster
    finally:
        cluster.stop()
