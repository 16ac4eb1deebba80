"""A served cluster per log backend (module-scoped: the tests of a module share it and use
their own collection names) and an unmodified pymilvus MilvusClient connected to it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pymilvus import MilvusClient

from tests.support import log_params
from vectorlog import Client
from vectorlog.server.grpc_server import GrpcServer, start_grpc


@dataclass
class Served:
    """The in-process Client behind the server, the server, and a pymilvus client of it."""

    client: Client
    server: GrpcServer
    milvus: MilvusClient

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture(scope="module", params=log_params())
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    settings: dict[str, Any] = {"tick_interval_ms": 50, "read_timeout_s": 20.0}
    tmp = tmp_path_factory.mktemp("served")
    if request.param == "embedded":
        client = Client(str(tmp / "db"), **settings)
    else:
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        cluster = f"c{uuid.uuid4().hex[:10]}"
        client = Client(
            f"kafka://{bootstrap}", cluster=cluster, data_dir=str(tmp / "state"), **settings
        )
    server = start_grpc(client, "127.0.0.1:0", max_workers=4)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    try:
        yield Served(client, server, milvus)
    finally:
        milvus.close()
        server.stop(grace=1.0)
        client.close()
