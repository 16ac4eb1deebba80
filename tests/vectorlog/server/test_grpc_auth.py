"""gRPC token auth (both backends): pymilvus with the right token (or user= and password=)
works; without it or with a wrong one MilvusClient fails to connect as against Milvus, every
RPC is refused with UNAUTHENTICATED and Milvus's message, and nothing is done."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc
import pytest
from pymilvus import DataType, MilvusClient, MilvusException
from pymilvus.client.prepare import Prepare
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.support import log_params
from tests.vectorlog.server.cluster import cluster_client
from tests.vectorlog.server.rest_support import unique
from vectorlog import Client
from vectorlog.server import grpc_auth
from vectorlog.server.grpc_server import GrpcServer, start_grpc

TOKEN = "root:Milvus"
API_KEY = "an-api-key-without-colon"


class Recorder(grpc.ServerInterceptor):
    """An extra interceptor (as the metrics one): records every method it sees."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        self.methods.append(handler_call_details.method.rpartition("/")[2])
        return continuation(handler_call_details)


@dataclass
class Guarded:
    client: Client
    server: GrpcServer
    recorder: Recorder

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def stub(self) -> tuple[grpc.Channel, milvus_pb2_grpc.MilvusServiceStub]:
        channel = grpc.insecure_channel(f"127.0.0.1:{self.server.port}")
        return channel, milvus_pb2_grpc.MilvusServiceStub(channel)


@pytest.fixture(scope="module", params=log_params())
def guarded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Guarded]:
    client = cluster_client(request, tmp_path_factory, "auth")
    recorder = Recorder()
    server = start_grpc(client, "127.0.0.1:0", max_workers=4, token=TOKEN, interceptors=[recorder])
    try:
        yield Guarded(client, server, recorder)
    finally:
        server.stop(grace=1.0)
        client.close()


def _authorization(credential: str) -> list[tuple[str, str]]:
    return [("authorization", base64.b64encode(credential.encode()).decode())]


def test_the_right_token_works(guarded: Guarded) -> None:
    name = unique("tok")
    milvus = MilvusClient(guarded.uri, token=TOKEN, dedicated=True)
    try:
        milvus.create_collection(name, dimension=2, consistency_level="Strong")
        milvus.insert(name, [{"id": 1, "vector": [0.1, 0.2]}])
        got = milvus.get(name, ids=[1], output_fields=["id"])
        assert [row["id"] for row in got] == [1]
    finally:
        milvus.close()
    assert guarded.client.has_collection(name)


def test_user_and_password_work(guarded: Guarded) -> None:
    user, password = TOKEN.split(":")
    milvus = MilvusClient(guarded.uri, user=user, password=password, dedicated=True)
    try:
        assert isinstance(milvus.list_collections(), list)
    finally:
        milvus.close()


@pytest.mark.parametrize(
    "credentials",
    [{}, {"token": "root:wrong"}, {"user": "root", "password": "wrong"}, {"token": API_KEY}],
    ids=["none", "wrong-token", "wrong-password", "api-key"],
)
def test_pymilvus_without_the_token_cannot_connect(
    guarded: Guarded, credentials: dict[str, str]
) -> None:
    with pytest.raises(MilvusException) as failed:
        MilvusClient(guarded.uri, timeout=10, dedicated=True, **credentials)
    assert failed.value.code == 2  # CONNECT_FAILED, pymilvus's answer to Milvus's refusal
    cause = failed.value.__cause__
    assert isinstance(cause, grpc.RpcError)
    assert cause.code() == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ([], grpc_auth.MISSING),
        ([("authorization", "not base64!")], grpc_auth.BAD_FORMAT),
        (_authorization("root:wrong"), grpc_auth.WRONG),
        (_authorization(API_KEY), grpc_auth.WRONG_KEY),
        ([("authorization", TOKEN)], grpc_auth.BAD_FORMAT),  # not base64-encoded
    ],
    ids=["missing", "not-base64", "wrong-password", "wrong-key", "plain"],
)
def test_every_rpc_is_refused_and_does_nothing(
    guarded: Guarded, metadata: list[tuple[str, str]], message: str
) -> None:
    kept = unique("kept")
    guarded.client.create_collection(kept, dimension=2)
    name = unique("refused")
    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    channel, stub = guarded.stub()
    calls: list[tuple[Callable[..., object], object]] = [
        (stub.Connect, milvus_pb2.ConnectRequest()),
        (stub.CreateCollection, Prepare.create_collection_request(name, schema)),
        (stub.DropCollection, milvus_pb2.DropCollectionRequest(collection_name=kept)),
    ]
    with channel:
        for call, request in calls:
            with pytest.raises(grpc.RpcError) as refused:
                call(request, metadata=metadata, timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert refused.value.details() == message
    assert not guarded.client.has_collection(name)
    assert guarded.client.has_collection(kept)
    assert {"Connect", "CreateCollection", "DropCollection"} <= set(guarded.recorder.methods)


def test_the_right_token_on_a_raw_call(guarded: Guarded) -> None:
    channel, stub = guarded.stub()
    with channel:
        reply = stub.ShowCollections(
            milvus_pb2.ShowCollectionsRequest(), metadata=_authorization(TOKEN), timeout=10
        )
    assert reply.status.code == 0


def test_token_matches_in_constant_time_terms() -> None:
    assert grpc_auth.token_matches(b"root:Milvus", TOKEN)
    assert grpc_auth.token_matches("root:Milvus", TOKEN)
    assert not grpc_auth.token_matches(b"root:Milvu", TOKEN)
    assert not grpc_auth.token_matches(b"", TOKEN)
