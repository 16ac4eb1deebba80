"""Every method of Milvus's gRPC service answers promptly (issue 26): each RPC of the
MilvusService descriptor pymilvus ships, called with an empty request on a served cluster,
answers with a response (a Milvus status, success or error) or a definite gRPC code
(UNIMPLEMENTED for one without a status field), never UNKNOWN (pymilvus retries UNKNOWN
with backoff: a call seemingly hangs) and never slower than a hang would be."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from google.protobuf.message_factory import GetMessageClass
from pymilvus.grpc_gen import milvus_pb2

from tests.vectorlog.server.conftest import Served

SERVICE = milvus_pb2.DESCRIPTOR.services_by_name["MilvusService"]
HANG = 1.0  # seconds: an empty request answered slower than this is taken for a hang


def call(channel: grpc.Channel, method: Any) -> tuple[grpc.StatusCode, float]:
    """Calls `method` with its empty request; returns the gRPC code and the seconds taken."""
    request, response = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
    path = f"/{SERVICE.full_name}/{method.name}"
    if method.server_streaming:
        stub: Any = channel.unary_stream(path, request.SerializeToString, response.FromString)
    else:
        stub = channel.unary_unary(path, request.SerializeToString, response.FromString)
    start = time.monotonic()
    try:
        answer = stub(request(), timeout=10)
        if method.server_streaming:
            list(answer)
        code = grpc.StatusCode.OK
    except grpc.RpcError as err:
        code = err.code()
    return code, time.monotonic() - start


def test_every_method_answers_promptly_and_never_unknown(served: Served) -> None:
    unary = [m for m in SERVICE.methods if not m.client_streaming]
    assert len(unary) > 100  # the whole service, not a few
    slow, unknown = {}, {}
    with grpc.insecure_channel(served.address) as channel:
        for method in unary:
            code, took = call(channel, method)
            if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED):
                unknown[method.name] = code.name
            if took > HANG:
                slow[method.name] = round(took, 2)
    assert not unknown, f"answered UNKNOWN or hung: {unknown}"
    assert not slow, f"slower than {HANG} s: {slow}"


@pytest.mark.parametrize("rpc", ["AlterCollectionSchema", "GetReplicateInfo"])
def test_an_rpc_without_a_status_field_answers_its_own_error_field(
    served: Served, rpc: str
) -> None:
    method = SERVICE.methods_by_name[rpc]
    request, response = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
    with grpc.insecure_channel(served.address) as channel:
        stub = channel.unary_unary(
            f"/{SERVICE.full_name}/{rpc}", request.SerializeToString, response.FromString
        )
        try:
            answer = stub(request(), timeout=10)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNIMPLEMENTED, err
            return
    slot = next(
        f.name
        for f in answer.DESCRIPTOR.fields
        if f.message_type and f.message_type.name == "Status"
    )
    assert getattr(answer, slot).code == 10
