"""The asyncio gRPC server (VECTORLOG_GRPC_SERVER=aio, grpc_loop.py) through an unmodified
pymilvus: a call that waits (a flush held in the data node's write) runs off the event loop,
so searches, describes and inserts are answered meanwhile; stopping the server lets a call in
flight finish within the grace and refuses new ones; refused and failed calls keep their
codes. The thread-pool server is held to the same behaviour."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.support import log_params, wait_until
from tests.vectorlog.server.cluster import cluster_client
from vectorlog import Client
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.faults import PAUSE_ENV, PAUSE_GO
from vectorlog.server.grpc_server import start_grpc

HELD = "datanode.write.before_files"
#: the longest a call the test expects an answer to may take (a stalled loop never answers)
ANSWER_S = 60.0


@pytest.fixture(params=log_params())
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Client]:
    c = cluster_client(request, tmp_path_factory, "loop")
    try:
        yield c
    finally:
        c.close()


def _collection(milvus: MilvusClient, name: str) -> np.ndarray:
    """Creates `name` (id, 8-d vector), inserts 200 rows; returns their vectors."""
    milvus.create_collection(name, dimension=8, consistency_level="Bounded")
    rows = np.random.default_rng(7).random((200, 8), dtype=np.float32)
    milvus.insert(name, [{"id": i, "vector": v.tolist()} for i, v in enumerate(rows)])
    return rows


@pytest.mark.parametrize("kind", ["aio", "threads"])
def test_calls_are_answered_while_a_flush_waits(
    client: Client, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A flush held before the data node writes its files blocks only its own call: a
    search, a describe and an insert through the same server answer meanwhile, and the
    flush answers once the data node goes on."""
    server = start_grpc(client, "127.0.0.1:0", max_workers=4, kind=kind)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    try:
        rows = _collection(milvus, "held")
        monkeypatch.setenv(PAUSE_ENV, f"{HELD}={tmp_path}")
        with ThreadPoolExecutor(1) as pool:
            flushing = pool.submit(milvus.flush, "held", timeout=300)
            try:
                wait_until(lambda: any(tmp_path.glob(f"{HELD}.*")), 120, "the flush held")
                hits = milvus.search(
                    "held",
                    [rows[3].tolist()],
                    limit=1,
                    timeout=ANSWER_S,
                    consistency_level="Strong",
                )
                described = milvus.describe_collection("held", timeout=ANSWER_S)
                inserted = milvus.insert(
                    "held", [{"id": 500, "vector": rows[0].tolist()}], timeout=ANSWER_S
                )
                assert not flushing.done()  # still held: the others answered meanwhile
            finally:
                (tmp_path / PAUSE_GO).write_text("")
            flushing.result(timeout=300)
        assert hits[0][0]["id"] == 3
        assert described["collection_name"] == "held"
        assert inserted["insert_count"] == 1
    finally:
        milvus.close()
        server.stop(grace=1.0)


@pytest.mark.parametrize("kind", ["aio", "threads"])
def test_stop_lets_a_call_in_flight_finish_and_refuses_new_ones(
    client: Client, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Stopping with a grace while a flush is held: the flush, released during the grace,
    answers successfully; a call begun after the stop is refused (UNAVAILABLE)."""
    server = start_grpc(client, "127.0.0.1:0", max_workers=4, kind=kind)
    address = f"127.0.0.1:{server.port}"
    milvus = MilvusClient(f"http://{address}")
    channel = grpc.insecure_channel(address)
    stub = milvus_pb2_grpc.MilvusServiceStub(channel)
    try:
        _collection(milvus, "drained")
        monkeypatch.setenv(PAUSE_ENV, f"{HELD}={tmp_path}")
        request = milvus_pb2.FlushRequest(collection_names=["drained"])
        with ThreadPoolExecutor(2) as pool:
            flushing = pool.submit(stub.Flush, request, timeout=300)
            wait_until(lambda: any(tmp_path.glob(f"{HELD}.*")), 120, "the flush held")
            stopping = pool.submit(server.stop, 120.0)
            wait_until(lambda: _refused(address), 60, "new calls refused once stopping")
            (tmp_path / PAUSE_GO).write_text("")
            flushed = flushing.result(timeout=300)  # answered, not cancelled
            stopping.result(timeout=300)
        assert flushed.status.code == 0 and list(flushed.coll_segIDs["drained"].data)
        assert server.wait(0)
    finally:
        (tmp_path / PAUSE_GO).write_text("")
        channel.close()
        milvus.close()
        server.stop(grace=0)


def _refused(address: str) -> bool:
    """Returns whether a new connection's call is refused (the server takes no new calls)."""
    with grpc.insecure_channel(address) as channel:
        try:
            stub = milvus_pb2_grpc.MilvusServiceStub(channel)
            stub.GetVersion(milvus_pb2.GetVersionRequest(), timeout=5)
        except grpc.RpcError as exc:
            return exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return False


def test_the_loop_server_keeps_the_token_check_and_error_codes(client: Client):
    """On the asyncio server a call without the token is refused with UNAUTHENTICATED and
    does nothing; with it, a search of a missing collection answers Milvus's code 100,
    searched both on the loop's first try and (with a filter) on the executor."""
    token = "root:Milvus"
    server = start_grpc(client, "127.0.0.1:0", token=token, kind="aio")
    url = f"http://127.0.0.1:{server.port}"
    try:
        with pytest.raises(MilvusException) as refused:
            MilvusClient(url, token="root:wrong", timeout=ANSWER_S, dedicated=True)
        cause = refused.value.__cause__
        assert isinstance(cause, grpc.RpcError)
        assert cause.code() == grpc.StatusCode.UNAUTHENTICATED
        milvus = MilvusClient(url, token=token, timeout=ANSWER_S)
        rows = _collection(milvus, "guarded")
        for expr in ("", "id >= 0"):
            with pytest.raises(MilvusException) as missing:
                milvus.search("nothing_here", [rows[0].tolist()], filter=expr, limit=1)
            assert missing.value.code == 100
        got = milvus.search(
            "guarded", [rows[5].tolist()], filter="id >= 0", limit=1, consistency_level="Strong"
        )
        assert got[0][0]["id"] == 5
        milvus.close()
    finally:
        server.stop(grace=1.0)


def test_an_unknown_server_kind_is_refused(client: Client):
    with pytest.raises(InvalidArgument, match="VECTORLOG_GRPC_SERVER"):
        start_grpc(client, "127.0.0.1:0", kind="fibers")


def test_a_server_stopped_twice_stops_once(client: Client):
    server = start_grpc(client, "127.0.0.1:0", kind="aio")
    server.stop(grace=0)
    server.stop(grace=0)
    assert server.wait(0)
