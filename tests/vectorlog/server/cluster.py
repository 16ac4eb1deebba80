"""The cluster behind the server tests: one fresh in-process Client per log backend."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from vectorlog import Client

SETTINGS: dict[str, Any] = {"tick_interval_ms": 50, "read_timeout_s": 20.0}


def cluster_client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, prefix: str
) -> Client:
    """Returns a Client of a fresh cluster on the backend `request.param` names ("embedded"
    or "kafka", the session's test broker); the caller closes it."""
    tmp = tmp_path_factory.mktemp(prefix)
    if request.param == "embedded":
        return Client(str(tmp / "db"), **SETTINGS)
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    cluster = f"c{uuid.uuid4().hex[:10]}"
    return Client(f"kafka://{bootstrap}", cluster=cluster, data_dir=str(tmp / "state"), **SETTINGS)
