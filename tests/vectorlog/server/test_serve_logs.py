"""`vectorlog serve`'s logs (a real subprocess, embedded data dir, with a token): lifecycle
lines, one access line per gRPC call and per HTTP request (method or path, code, latency),
never the token nor a vector; a failed request logged with its error; `--log-format json`
gives one JSON object a line. The access log is off unless `--access-log` (Milvus's
proxy.accessLog.enable is off by default)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from pymilvus import MilvusClient, MilvusException

from tests.support import unused_port, wait_until
from tests.vectorlog.server.test_serve import _healthy
from vectorlog.core.errors import InvalidArgument
from vectorlog.server.logs import causes

TOKEN = "root:S3cretMilvus"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
VECTOR = [0.7182818, 0.3141592]


@contextmanager
def serving(
    tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[tuple[MilvusClient, str, Path]]:
    """Runs `vectorlog serve` with `options` (and `env` added to the environment); yields a
    pymilvus client of it, its REST URL and the file its stderr goes to (complete once the
    block ends: SIGTERM, exit 0)."""
    port, rest = unused_port(), unused_port()
    stderr = tmp_path / "serve.err"
    argv = ["serve", "--dir", str(tmp_path / "db"), "--port", str(port)]
    argv += ["--rest-port", str(rest), "--token", TOKEN, *options]
    with stderr.open("w") as err:
        environ = {**os.environ, **(env or {})}
        proc = subprocess.Popen(
            [sys.executable, "-m", "vectorlog.cli", *argv], stderr=err, env=environ
        )
    url = f"http://127.0.0.1:{rest}"
    try:
        wait_until(lambda: proc.poll() is not None or _healthy(url), 120, "serve's /healthz")
        assert proc.poll() is None, stderr.read_text()
        milvus = MilvusClient(f"http://127.0.0.1:{port}", token=TOKEN)
        try:
            yield milvus, url, stderr
        finally:
            milvus.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, stderr.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _calls(milvus: MilvusClient, url: str) -> None:
    """An insert and a search carrying VECTOR, a failing call each way, a /metrics scrape."""
    milvus.create_collection("logged", dimension=2)
    milvus.insert("logged", [{"id": 1, "vector": VECTOR}])
    milvus.search("logged", [VECTOR], limit=1)
    with pytest.raises(MilvusException):
        milvus.describe_collection("absent")
    body = {"collectionName": "absent"}
    answer = httpx.post(f"{url}/v2/vectordb/collections/describe", json=body, headers=AUTH)
    assert answer.json()["code"] == 100
    assert httpx.get(f"{url}/metrics", headers=AUTH).status_code == 200


def test_access_lines_errors_and_lifecycle_without_secrets(tmp_path: Path):
    with serving(tmp_path, "--log-level", "info", "--access-log") as (milvus, url, stderr):
        _calls(milvus, url)
    text = stderr.read_text()
    access = [
        line.split("vectorlog.access: ", 1)[1]
        for line in text.splitlines()
        if "vectorlog.access: " in line
    ]
    assert any(re.fullmatch(r"grpc Insert code=0 \d+\.\dms peer=\S+", a) for a in access), access
    assert any(re.fullmatch(r"grpc Search code=0 \d+\.\dms peer=\S+", a) for a in access)
    assert any(a.startswith("grpc DescribeCollection code=100 ") for a in access)
    rest = r"http POST /v2/vectordb/collections/describe 200 code=100 \d+\.\dms client=127\.0\.0\.1"
    assert any(re.fullmatch(rest, a) for a in access), access
    assert any(re.fullmatch(r"http GET /metrics 200 \d+\.\dms client=\S+", a) for a in access)
    assert (
        "gRPC DescribeCollection refused: CollectionNotFound: "
        "can't find collection[database=default][collection=absent]" in text
    )
    assert "REST collections/describe refused: CollectionNotFound" in text
    assert "GIL switch interval 5 ms" in text  # Python's, without the setting
    assert "gRPC on 127.0.0.1" in text and "stopped; the cluster is closed" in text
    assert TOKEN not in text and "S3cret" not in text
    assert "0.718" not in text and "0.314" not in text  # no vector payloads


def test_json_format_and_the_access_log_turned_on_by_the_environment(tmp_path: Path):
    """VECTORLOG_ACCESS_LOG=1 as --access-log; VECTORLOG_GIL_SWITCH_INTERVAL_MS applied and
    logged. (No access line without either: tests/vectorlog/server/test_serve.py's serve.)"""
    env = {"VECTORLOG_ACCESS_LOG": "1", "VECTORLOG_GIL_SWITCH_INTERVAL_MS": "0.5"}
    with serving(tmp_path, "--log-format", "json", env=env) as (milvus, url, stderr):
        _calls(milvus, url)
    records = [json.loads(line) for line in stderr.read_text().splitlines()]
    assert {"time", "level", "logger", "message"} <= set(records[0])
    assert any(
        r["logger"] == "vectorlog.access" and r["message"].startswith("grpc Search code=0 ")
        for r in records
    )
    assert any(r["message"] == "GIL switch interval 0.5 ms" for r in records)


def test_a_logged_error_names_its_causes():
    try:
        try:
            raise OSError("disk gone")
        except OSError as exc:
            raise InvalidArgument("cannot read\nthe file") from exc
    except InvalidArgument as exc:
        assert causes(exc) == "InvalidArgument: cannot read the file <- OSError: disk gone"
