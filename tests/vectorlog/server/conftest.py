"""A served cluster per log backend (module-scoped: the tests of a module share it and use
their own collection names) and an unmodified pymilvus MilvusClient connected to it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pymilvus import MilvusClient

from tests.support import log_params
from tests.vectorlog.server.cluster import cluster_client
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
    client = cluster_client(request, tmp_path_factory, "served")
    server = start_grpc(client, "127.0.0.1:0", max_workers=4)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    try:
        yield Served(client, server, milvus)
    finally:
        milvus.close()
        server.stop(grace=1.0)
        client.close()
