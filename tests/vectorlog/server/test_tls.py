"""TLS (both backends): with a certificate and key, pymilvus over https:// trusting the CA and
httpx trusting it work (with the token), a plaintext or untrusting client fails; the TLS files
are checked before anything starts (missing, unreadable, mismatched: named in the error)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
import trustme
import uvicorn
from pymilvus import MilvusClient, MilvusException

from tests.support import log_params, wait_until
from tests.vectorlog.server.cluster import cluster_client
from tests.vectorlog.server.rest_support import unique
from vectorlog import Client
from vectorlog.core.errors import InvalidArgument
from vectorlog.server.grpc_server import GrpcServer, start_grpc
from vectorlog.server.serve import rest_config
from vectorlog.server.tls import TlsFiles, tls_files

TOKEN = "root:Milvus"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def write_pems(ca: trustme.CA, where: Path) -> tuple[TlsFiles, Path]:
    """Writes a server certificate for 127.0.0.1 and localhost signed by `ca` and the CA's
    certificate; returns the server's TLS files and the CA file."""
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_pem = where / "server.pem", where / "server.key", where / "ca.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    for extra in issued.cert_chain_pems[1:]:
        extra.write_to_path(str(cert), append=True)
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_pem))
    return TlsFiles(cert, key), ca_pem


@dataclass
class Secured:
    client: Client
    grpc: GrpcServer
    rest_port: int
    ca: trustme.CA
    ca_pem: Path

    def trusting(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


@pytest.fixture(scope="module", params=log_params())
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secured]:
    ca = trustme.CA()
    tls, ca_pem = write_pems(ca, tmp_path_factory.mktemp("pems"))
    client = cluster_client(request, tmp_path_factory, "tls")
    grpc_server = start_grpc(client, "127.0.0.1:0", max_workers=4, token=TOKEN, tls=tls)
    rest = uvicorn.Server(rest_config(client, "127.0.0.1", 0, TOKEN, tls))
    thread = threading.Thread(target=rest.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: rest.started or not thread.is_alive(), 60, "uvicorn over TLS")
        assert rest.started
        port = rest.servers[0].sockets[0].getsockname()[1]
        yield Secured(client, grpc_server, port, ca, ca_pem)
    finally:
        rest.should_exit = True
        thread.join(30)
        grpc_server.stop(grace=1.0)
        client.close()


def test_pymilvus_over_tls_with_the_token(secured: Secured) -> None:
    name = unique("tls")
    uri = f"https://127.0.0.1:{secured.grpc.port}"
    milvus = MilvusClient(
        uri, token=TOKEN, server_pem_path=str(secured.ca_pem), timeout=10, dedicated=True
    )
    try:
        milvus.create_collection(name, dimension=2, consistency_level="Strong")
        milvus.insert(name, [{"id": 7, "vector": [0.5, 0.5]}])
        assert [row["id"] for row in milvus.get(name, ids=[7], output_fields=["id"])] == [7]
    finally:
        milvus.close()
    assert secured.client.has_collection(name)


@pytest.mark.parametrize("scheme", ["http", "https"], ids=["plaintext", "untrusted-ca"])
def test_pymilvus_without_tls_or_the_ca_fails(secured: Secured, scheme: str) -> None:
    uri = f"{scheme}://127.0.0.1:{secured.grpc.port}"
    with pytest.raises(MilvusException) as failed:
        MilvusClient(uri, token=TOKEN, timeout=5, dedicated=True)
    cause = failed.value.__cause__
    assert isinstance(cause, grpc.RpcError), failed.value
    assert cause.code() == grpc.StatusCode.UNAVAILABLE  # no TLS handshake, not a refusal


def test_rest_over_tls(secured: Secured) -> None:
    url = f"https://127.0.0.1:{secured.rest_port}"
    name = unique("rest_tls")
    with httpx.Client(base_url=url, verify=secured.trusting(), timeout=30) as http:
        assert http.get("/healthz").status_code == 200
        body = {"collectionName": name, "dimension": 2}
        assert http.post("/v2/vectordb/collections/create", json=body).json()["code"] == 1800
        created = http.post("/v2/vectordb/collections/create", json=body, headers=AUTH)
        assert created.json()["code"] == 0
    assert secured.client.has_collection(name)


def test_rest_without_tls_or_the_ca_fails(secured: Secured) -> None:
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{secured.rest_port}/healthz", timeout=10)
    with pytest.raises(httpx.ConnectError):  # certificate verify failed
        httpx.get(f"https://127.0.0.1:{secured.rest_port}/healthz", timeout=10)


def test_tls_files_none_and_both(tmp_path: Path) -> None:
    tls, _ = write_pems(trustme.CA(), tmp_path)
    assert tls_files(None, None) is None
    assert tls_files(str(tls.cert), str(tls.key)) == tls


def test_tls_files_refuses_bad_files(tmp_path: Path) -> None:
    tls, ca_pem = write_pems(trustme.CA(), tmp_path)
    (tmp_path / "other").mkdir()
    other, _ = write_pems(trustme.CA(), tmp_path / "other")
    missing = tmp_path / "missing.pem"
    cases = [
        ((str(tls.cert), None), "--tls-cert without --tls-key"),
        ((None, str(tls.key)), "--tls-key without --tls-cert"),
        ((str(missing), str(tls.key)), str(missing)),
        ((str(tls.cert), str(tmp_path)), str(tmp_path)),  # a directory: unreadable
        ((str(tls.cert), str(other.key)), str(other.key)),  # not this certificate's key
        ((str(ca_pem), str(ca_pem)), str(ca_pem)),  # no private key at all
    ]
    for (cert, key), named in cases:
        with pytest.raises(InvalidArgument) as refused:
            tls_files(cert, key)
        assert named in str(refused.value)
