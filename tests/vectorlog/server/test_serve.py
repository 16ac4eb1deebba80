"""`vectorlog serve` as a subprocess (both backends): it starts, answers /healthz and REST v2
calls (token from VECTORLOG_TOKEN), listens for gRPC, and SIGTERM stops it cleanly (exit 0,
cluster closed); an open host without a token is refused."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import log_params, unused_port, wait_until
from vectorlog import Client
from vectorlog.core.errors import InvalidArgument
from vectorlog.server.exposure import check_open

TOKEN = "root:Milvus"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _where(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> tuple[list[str], dict[str, Any]]:
    """Returns serve's arguments naming a fresh cluster, and Client's to reopen it."""
    if backend == "embedded":
        return ["--dir", str(tmp_path / "db")], {"uri": str(tmp_path / "db")}
    uri = f"kafka://{request.getfixturevalue('kafka_bootstrap')}"
    cluster = f"c{uuid.uuid4().hex[:10]}"
    reopen = {"uri": uri, "cluster": cluster, "data_dir": str(tmp_path / "state")}
    return ["--log", uri, "--cluster", cluster], reopen


@pytest.mark.parametrize("backend", log_params())
def test_serve_starts_answers_and_stops_on_sigterm(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    grpc_port, rest_port = unused_port(), unused_port()
    where, reopen = _where(request, tmp_path, backend)
    env = {k: v for k, v in os.environ.items() if k != "VECTORLOG_ACCESS_LOG"}
    env.update(VECTORLOG_DATA_DIR=str(tmp_path / "state"), VECTORLOG_TOKEN=TOKEN)
    args = ["--port", str(grpc_port), "--rest-port", str(rest_port)]
    errors = tmp_path / "serve.err"
    with errors.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vectorlog.cli", "serve", *where, *args], env=env, stderr=err
        )
    url = f"http://127.0.0.1:{rest_port}"
    try:
        wait_until(lambda: proc.poll() is not None or _healthy(url), 90, "serve's /healthz")
        assert proc.poll() is None, errors.read_text()
        body = {"collectionName": "served", "dimension": 2}
        create = f"{url}/v2/vectordb/collections/create"
        assert httpx.post(create, json=body, timeout=30).json()["code"] == 1800  # no token
        created = httpx.post(create, json=body, headers=AUTH, timeout=30)
        assert created.json()["code"] == 0
        listed = httpx.post(
            f"{url}/v2/vectordb/collections/list", json={}, headers=AUTH, timeout=30
        )
        assert listed.json()["data"] == ["served"]
        console = httpx.get(f"{url}/console", timeout=30)  # the web console, same token
        assert console.status_code == 200 and "console.js" in console.text
        data = f"{url}/console/api/collections"
        assert httpx.get(data, timeout=30).status_code == 401
        assert [c["name"] for c in httpx.get(data, headers=AUTH, timeout=30).json()] == ["served"]
        with socket.create_connection(("127.0.0.1", grpc_port), timeout=5):
            pass  # the gRPC server listens too
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, errors.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logged = errors.read_text()  # info lines, but no access line without --access-log
    assert "gRPC on 127.0.0.1" in logged and "vectorlog.access" not in logged, logged
    with Client(reopen.pop("uri"), **reopen) as client:  # closed cleanly: it opens again
        assert client.list_collections() == ["served"]


def test_serve_refuses_an_open_host_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VECTORLOG_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "vectorlog.cli", "serve", "--dir", str(tmp_path / "db")]
        + ["--host", "0.0.0.0", "--port", str(unused_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "token" in done.stderr
    assert not (tmp_path / "db").exists()  # refused before the cluster was opened


@pytest.mark.parametrize(
    ("host", "token", "refused"),
    [
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
        ("0.0.0.0", None, True),
        ("example.org", "", True),
        ("0.0.0.0", "user:pw", False),
    ],
)
def test_check_open(host: str, token: str | None, refused: bool) -> None:
    if refused:
        with pytest.raises(InvalidArgument, match="token"):
            check_open(host, token)
    else:
        check_open(host, token)
