"""The REST v2 test fixture: Milvus's REST API (rest_app) over a real cluster per log backend,
called through Starlette's TestClient (httpx); module-scoped, tests use their own names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support import log_params
from tests.vectorlog.server.cluster import cluster_client
from vectorlog import Client
from vectorlog.server.rest_app import rest_app


@dataclass
class Rest:
    """The cluster's Client and an HTTP client of the REST app over it."""

    client: Client
    http: TestClient

    def call(self, endpoint: str, **body: Any) -> dict[str, Any]:
        """POSTs `body` to /v2/vectordb/`endpoint`; returns the envelope (HTTP 200 asserted)."""
        response = self.http.post(f"/v2/vectordb/{endpoint}", json=body)
        assert response.status_code == 200, response.text
        envelope: dict[str, Any] = response.json()
        return envelope

    def ok(self, endpoint: str, **body: Any) -> Any:
        """Calls `endpoint`, asserts Milvus's success code 0; returns the envelope's data."""
        envelope = self.call(endpoint, **body)
        assert envelope["code"] == 0, envelope
        return envelope["data"]


def unique(prefix: str) -> str:
    """A collection name no other test of the module uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def rest_fixture(token: str | None = None) -> Any:
    """Returns a module-scoped `rest` fixture over a fresh cluster on each backend (with
    `token`, the app requires it)."""

    @pytest.fixture(scope="module", params=log_params())
    def rest(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Rest]:
        client = cluster_client(request, tmp_path_factory, "rest")
        try:
            with TestClient(rest_app(client, token)) as http:
                yield Rest(client, http)
        finally:
            client.close()

    return rest
