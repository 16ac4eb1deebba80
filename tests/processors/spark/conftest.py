"""One SparkSession for the whole test session (starting the JVM takes seconds): the Spark data
node jobs of the Clients opened by the tests find it running and reuse it, never stop it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.clients import backend, client_args, open_client  # noqa: F401


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 (infra/ensure_java.sh)")
    from vectorlog.processors.spark.datanode_job import build_session

    session = build_session()
    yield session
    session.stop()
