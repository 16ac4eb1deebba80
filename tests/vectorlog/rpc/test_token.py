"""The cluster's token on the processes' RPCs: a server given one answers only calls that
carry it (compared in constant time), refusing the rest with ClusterTokenRefused before the
service is called; every client sends its token with every call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.processors.fakes import FakeQueryNode, FakeRootCoord
from vectorlog.core.model import quick_schema
from vectorlog.rpc.errors import ClusterTokenRefused
from vectorlog.rpc.querynode_client import QueryNodeClient
from vectorlog.rpc.rootcoord_client import RootCoordClient
from vectorlog.rpc.server import RpcServer

TOKEN = "s3cret-cluster"


@pytest.fixture
def address() -> Iterator[str]:
    server = RpcServer(rootcoord=FakeRootCoord(), querynode=FakeQueryNode(tsafe_ts=42), token=TOKEN)
    server.start()
    yield server.address
    server.stop(0)


@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN + "x"], ids=repr)
def test_a_call_without_the_clusters_token_is_refused(address: str, token: str | None):
    client = QueryNodeClient(address, token=token)
    with pytest.raises(ClusterTokenRefused, match="VECTORLOG_CLUSTER_TOKEN") as caught:
        client.tsafe([0])
    assert "\n" not in str(caught.value)
    client.close()


def test_a_refused_ddl_call_changes_nothing(address: str):
    stranger, member = RootCoordClient(address), RootCoordClient(address, token=TOKEN)
    member.create_collection("books", quick_schema(4), 1)
    with pytest.raises(ClusterTokenRefused):
        stranger.drop_collection("books")
    assert member.list_collections() == ["books"]
    stranger.close()
    member.close()


def test_a_call_with_the_token_is_answered(address: str):
    client = QueryNodeClient(address, token=TOKEN)
    assert client.tsafe([0]) == 42
    client.close()
