"""Prometheus metrics of `vectorlog serve` (both backends): consumer lag per processor appears
while a processor is behind and goes to 0 once it caught up; gRPC requests counted per method
and Milvus code, with latencies, in the registry the REST app exposes at /metrics (also
through `vectorlog serve`); with a token /metrics needs it too, and the dead letters it
counts are read incrementally."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pymilvus import MilvusClient, MilvusException
from starlette.testclient import TestClient

from tests.support import log_params, unused_port, wait_until
from tests.vectorlog.server.cluster import cluster_client
from tests.vectorlog.server.rest_support import unique
from vectorlog import Client
from vectorlog.sdk import probes
from vectorlog.server.grpc_metrics import metering
from vectorlog.server.grpc_server import GrpcServer, start_grpc
from vectorlog.server.rest_app import rest_app
from vectorlog.server.rest_metrics import DeadLetterCount
from vectorlog.streams.log.base import Append

DIM = 4
#: the processors whose positions follow the log continuously (rootcoord replays `ddl`
#: lazily, at its next DDL: its own reservations keep it behind meanwhile)
FOLLOWERS = ("datacoord", "datanode", "indexnode", "querynode")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Metered:
    """A cluster served over gRPC with the metrics interceptor, and the REST app's /metrics."""

    client: Client
    http: TestClient
    server: GrpcServer
    milvus: MilvusClient


def scrape(http: TestClient) -> Samples:
    """Returns {(sample name, sorted labels): value} of GET /metrics."""
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def metered_cluster(client: Client) -> tuple[TestClient, GrpcServer]:
    """Returns the REST app's HTTP client and a gRPC server sharing its metrics registry."""
    app = rest_app(client)
    interceptor = metering(app)
    return TestClient(app), start_grpc(client, "127.0.0.1:0", interceptors=[interceptor])


@pytest.fixture(scope="module", params=log_params())
def metered(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Metered]:
    client = cluster_client(request, tmp_path_factory, "metrics")
    http, server = metered_cluster(client)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    try:
        yield Metered(client, http, server, milvus)
    finally:
        milvus.close()
        server.stop(grace=1.0)
        http.close()
        client.close()


def lags(samples: Samples) -> dict[tuple[str, str, str], float]:
    """Returns {(processor, topic, partition): lag} of the vectorlog_consumer_lag samples."""
    out = {}
    for (name, labels), value in samples.items():
        if name == "vectorlog_consumer_lag":
            d = dict(labels)
            out[(d["processor"], d["topic"], d["partition"])] = value
    return out


def insert_some(client: Client, name: str, batches: int = 10) -> None:
    """Creates collection `name` and inserts `batches` small batches, one call each."""
    client.create_collection(name, dimension=DIM)
    rng = np.random.default_rng(7)
    for b in range(batches):
        rows = [{"id": b * 10 + i, "vector": rng.random(DIM).tolist()} for i in range(10)]
        client.insert(name, rows)


def test_consumer_lag_goes_to_zero_once_caught_up(metered: Metered) -> None:
    insert_some(metered.client, unique("lag"))
    topics = metered.client.cluster.topics
    seen = lags(scrape(metered.http))
    for processor, topic in (("querynode", topics.dml), ("datanode", topics.dml)):
        partitions = {p for (who, t, p) in seen if (who, t) == (processor, topic)}
        assert partitions == {str(p) for p in range(topics.dml_partitions)}, seen
    assert ("rootcoord", topics.ddl, "0") in seen
    assert {(who, t) for who, t, _ in seen} >= {
        ("datacoord", topics.coord),
        ("indexnode", topics.ddl),
        ("indexnode", topics.coord),
        ("querynode", topics.coord),
        ("datanode", topics.coord),
    }

    def caught_up() -> bool:
        now = lags(scrape(metered.http))
        return all(v == 0 for (who, _, _), v in now.items() if who in FOLLOWERS)

    wait_until(caught_up, 60, "every processor's consumer lag at 0", interval=0.2)


@pytest.fixture(params=log_params())
def lagging(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Client, TestClient]]:
    """A fresh cluster whose data node is stopped (it falls behind dml), and its /metrics."""
    client = cluster_client(request, tmp_path_factory, "lagging")
    try:
        client.cluster.datanode.stop()
        with TestClient(rest_app(client)) as http:
            yield client, http
    finally:
        client.close()


def test_consumer_lag_appears_while_a_processor_is_behind(
    lagging: tuple[Client, TestClient],
) -> None:
    client, http = lagging
    insert_some(client, unique("behind"))
    dml = client.cluster.topics.dml
    seen = lags(scrape(http))
    behind = {p: v for (who, t, p), v in seen.items() if (who, t) == ("datanode", dml)}
    assert sum(behind.values()) > 0, seen


def test_grpc_requests_counted_per_method_and_code(metered: Metered) -> None:
    name = unique("grpc")
    metered.milvus.create_collection(name, dimension=DIM)
    for _ in range(3):
        assert name in metered.milvus.list_collections()
    with pytest.raises(MilvusException):
        metered.milvus.describe_collection(unique("missing"))
    with grpc.insecure_channel(f"127.0.0.1:{metered.server.port}") as channel:
        nothing = channel.unary_unary("/milvus.proto.milvus.MilvusService/NoSuchRpc")
        with pytest.raises(grpc.RpcError) as failed:
            nothing(b"", timeout=10)
        assert failed.value.code() == grpc.StatusCode.UNIMPLEMENTED
    samples = scrape(metered.http)

    def count(method: str, code: str) -> float:
        labels = (("code", code), ("method", method))
        return samples.get(("vectorlog_grpc_requests_total", labels), 0.0)

    assert count("ShowCollections", "0") >= 3
    assert count("CreateCollection", "0") >= 1
    assert count("DescribeCollection", "100") >= 1  # merr CollectionNotFound
    assert count("unknown", "UNIMPLEMENTED") >= 1
    timed = samples[("vectorlog_grpc_request_seconds_count", (("method", "ShowCollections"),))]
    assert timed >= 3


def test_serve_exposes_grpc_requests_at_rest_metrics(tmp_path: Path) -> None:
    # serve's wiring (one registry for both protocols), not a log behaviour: embedded only
    grpc_port, rest_port = unused_port(), unused_port()
    args = ["--dir", str(tmp_path / "db"), "--port", str(grpc_port), "--rest-port", str(rest_port)]
    errors = tmp_path / "serve.err"
    with errors.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "vectorlog.cli", "serve", *args], stderr=err)
    url = f"http://127.0.0.1:{rest_port}"
    try:
        wait_until(lambda: proc.poll() is not None or healthy(url), 90, "serve's /healthz")
        assert proc.poll() is None, errors.read_text()
        milvus = MilvusClient(f"http://127.0.0.1:{grpc_port}")
        assert milvus.list_collections() == []
        milvus.close()
        text = httpx.get(f"{url}/metrics", timeout=30).text
        assert 'vectorlog_grpc_requests_total{code="0",method="ShowCollections"} 1.0' in text
        assert 'vectorlog_consumer_lag{partition="0",processor="datacoord"' in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, errors.read_text()


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(params=log_params())
def guarded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Client, TestClient]]:
    """A fresh cluster whose REST app (and so /metrics) requires TOKEN."""
    client = cluster_client(request, tmp_path_factory, "guarded")
    try:
        with TestClient(rest_app(client, TOKEN)) as http:
            yield client, http
    finally:
        client.close()


TOKEN = "root:Milvus"


def test_metrics_need_the_token_and_count_dead_letters(
    guarded: tuple[Client, TestClient],
) -> None:
    client, http = guarded
    for headers in ({}, {"Authorization": "Bearer root:wrong"}, {"Authorization": TOKEN}):
        refused = http.get("/metrics", headers=headers)
        assert refused.status_code == 401 and "vectorlog_" not in refused.text
    assert http.get("/healthz").status_code == 200
    auth = {"Authorization": f"Bearer {TOKEN}"}
    client.create_collection("c", dimension=2)
    partition = probes.pchannels(client, "c")[0]

    def dead_letters() -> float:
        response = http.get("/metrics", headers=auth)
        assert response.status_code == 200
        assert "vectorlog_consumer_lag" in response.text
        families = text_string_to_metric_families(response.text)
        return next(f.samples[0].value for f in families if f.name == "vectorlog_dead_letters")

    for n in (1, 2):  # the query node and the data node each write a letter of a record
        client.cluster.log.append(client.cluster.topics.dml, [Append(partition, b"\x00junk")])
        wait_until(partial(counted, dead_letters, 2.0 * n), 60, f"{2 * n} dead letters")


def counted(count: Callable[[], float], want: float) -> bool:
    return count() == want


def test_the_console_keeps_the_newest_dead_letters_and_counts_them_all(
    guarded: tuple[Client, TestClient],
) -> None:
    """A flood of bad records cannot grow the server's memory by their previews: the
    summaries kept are the newest `keep`, the count covers every letter."""
    client, _ = guarded
    client.create_collection("flood", dimension=2)
    partition = probes.pchannels(client, "flood")[0]
    letters = DeadLetterCount(client.cluster.log, client.cluster.topics.dlq, every_s=0, keep=3)
    before = letters.count()
    for i in range(4):  # the query node and the data node each write a letter of a record
        junk = Append(partition, b"\x00junk-" + str(i).encode())
        client.cluster.log.append(client.cluster.topics.dml, [junk])
    wait_until(lambda: letters.count() == before + 8, 60, f"{before + 8} dead letters")
    total, newest = letters.page(0, 100)
    assert total == before + 8 and len(newest) == 3
    assert letters.page(3, 100) == (total, [])
