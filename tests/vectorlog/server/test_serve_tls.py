"""`vectorlog serve --token --tls-cert --tls-key` as a subprocess (both backends): both ports
speak TLS and ask for the token (pymilvus over https, httpx trusting the CA); a missing TLS
file or TLS without a token on an open host is refused before the cluster is opened."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trustme
from pymilvus import MilvusClient, MilvusException

from tests.support import log_params, unused_port, wait_until
from tests.vectorlog.server.test_serve import _where
from tests.vectorlog.server.test_tls import write_pems

TOKEN = "root:Milvus"
SERVE = [sys.executable, "-m", "vectorlog.cli", "serve"]


def _healthy(url: str, verify: ssl.SSLContext) -> bool:
    try:
        return httpx.get(f"{url}/healthz", verify=verify, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _without_serve_env() -> dict[str, str]:
    hidden = {"VECTORLOG_TOKEN", "VECTORLOG_TLS_CERT", "VECTORLOG_TLS_KEY"}
    return {k: v for k, v in os.environ.items() if k not in hidden}


@pytest.mark.parametrize("backend", log_params())
def test_serve_with_token_and_tls(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    ca = trustme.CA()
    tls, ca_pem = write_pems(ca, tmp_path)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    grpc_port, rest_port = unused_port(), unused_port()
    where, _ = _where(request, tmp_path, backend)
    env = {**_without_serve_env(), "VECTORLOG_DATA_DIR": str(tmp_path / "state")}
    env["VECTORLOG_TLS_KEY"] = str(tls.key)  # the key from the environment, the rest as options
    args = ["--port", str(grpc_port), "--rest-port", str(rest_port), "--token", TOKEN]
    errors = tmp_path / "serve.err"
    with errors.open("w") as err:
        proc = subprocess.Popen(
            [*SERVE, *where, *args, "--tls-cert", str(tls.cert)], env=env, stderr=err
        )
    url = f"https://127.0.0.1:{rest_port}"
    try:
        wait_until(lambda: proc.poll() is not None or _healthy(url, trusting), 90, "/healthz")
        assert proc.poll() is None, errors.read_text()
        list_url = f"{url}/v2/vectordb/collections/list"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        listed = httpx.post(list_url, json={}, headers=auth, verify=trusting, timeout=30)
        assert listed.json() == {"code": 0, "data": [], "cost": 0}
        uri = f"https://127.0.0.1:{grpc_port}"
        pem = str(ca_pem)
        with pytest.raises(MilvusException):  # TLS but no token
            MilvusClient(uri, server_pem_path=pem, timeout=10, dedicated=True)
        milvus = MilvusClient(uri, token=TOKEN, server_pem_path=pem, timeout=10, dedicated=True)
        try:
            milvus.create_collection("served_tls", dimension=2)
            assert milvus.list_collections() == ["served_tls"]
        finally:
            milvus.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, errors.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--tls-cert", "{missing}", "--tls-key", "{key}", "--token", TOKEN], "{missing}"),
        (["--tls-cert", "{cert}", "--tls-key", "{key}", "--host", "0.0.0.0"], "token"),
    ],
    ids=["missing-cert", "tls-without-token-on-an-open-host"],
)
def test_serve_refuses_before_opening_the_cluster(
    tmp_path: Path, extra: list[str], named: str
) -> None:
    tls, _ = write_pems(trustme.CA(), tmp_path)
    paths = {"missing": str(tmp_path / "nope.pem"), "cert": str(tls.cert), "key": str(tls.key)}
    done = subprocess.run(
        [*SERVE, "--dir", str(tmp_path / "db"), "--port", str(unused_port())]
        + [arg.format(**paths) for arg in extra],
        env=_without_serve_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert named.format(**paths) in done.stderr
    assert not (tmp_path / "db").exists()
