"""Bad input over Milvus's gRPC protocol: malformed requests, garbage bytes and RPCs vectorlog
does not serve get a Milvus-style error status (never a crash or a hung call), and nothing is
written to the log."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import pytest
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc, schema_pb2

from tests.clients import data_events, ddl_changes
from tests.vectorlog.server.conftest import Served
from vectorlog.core.errors import InvalidArgument
from vectorlog.server.grpc_server import start_grpc

SERVICE = "/milvus.proto.milvus.MilvusService/"


@pytest.fixture
def stub(served: Served) -> Iterator[milvus_pb2_grpc.MilvusServiceStub]:
    with grpc.insecure_channel(served.address) as channel:
        yield milvus_pb2_grpc.MilvusServiceStub(channel)


@pytest.fixture
def name(served: Served) -> str:
    n = f"c_{uuid.uuid4().hex[:10]}"
    served.milvus.create_collection(n, dimension=2, consistency_level="Strong")
    return n


def vector_column(floats: list[float], dim: int = 2) -> schema_pb2.FieldData:
    fd = schema_pb2.FieldData(type=schema_pb2.FloatVector, field_name="vector")
    fd.vectors.dim = dim
    fd.vectors.float_vector.data.extend(floats)
    return fd


def id_column(ids: list[int]) -> schema_pb2.FieldData:
    fd = schema_pb2.FieldData(type=schema_pb2.Int64, field_name="id")
    fd.scalars.long_data.data.extend(ids)
    return fd


def test_a_malformed_schema_is_refused_and_creates_nothing(served: Served, stub) -> None:
    before = len(ddl_changes(served.client))
    req = milvus_pb2.CreateCollectionRequest(collection_name="garbled", schema=b"\xff\xff\x00")
    status = stub.CreateCollection(req)
    assert status.code == 1100 and "schema" in status.reason
    assert not served.client.has_collection("garbled")
    assert len(ddl_changes(served.client)) == before


@pytest.mark.parametrize(
    "columns, num_rows, says",
    [
        (  # num_rows disagrees (Milvus's message)
            [id_column([1, 2]), vector_column([1.0, 2.0, 3.0, 4.0])],
            3,
            "the num_rows (2) of field (id) is not equal to passed num_rows (3)",
        ),
        (  # columns of different lengths
            [id_column([1, 2, 3]), vector_column([1.0, 2.0, 3.0, 4.0])],
            3,
            "the num_rows (2) of field (vector) is not equal to passed num_rows (3)",
        ),
        (  # another dim: its rows are counted by it
            [id_column([1, 2]), vector_column([1.0, 2.0, 3.0, 4.0], dim=4)],
            2,
            "the num_rows (1) of field (vector) is not equal to passed num_rows (2)",
        ),
        (  # vector floats that do not fill whole rows (Milvus's message)
            [id_column([1, 2]), vector_column([1.0, 2.0, 3.0], dim=2)],
            2,
            "the length(3) of float data should divide the dim(2)",
        ),
        ([id_column([1, 2])], 2, "missing field"),  # no vector column
        (  # a key repeated out of order: the first repeat named
            [id_column([5, 3, 9, 3]), vector_column([1.0] * 8)],
            4,
            "row 3: primary key 'id' value 3 repeats",
        ),
    ],
    ids=["num_rows", "lengths", "dim", "ragged", "missing-field", "repeated-key"],
)
def test_a_malformed_insert_is_refused_and_writes_nothing(
    served: Served, stub, name: str, columns: list, num_rows: int, says: str
) -> None:
    before = len(data_events(served.client))
    req = milvus_pb2.InsertRequest(collection_name=name, fields_data=columns, num_rows=num_rows)
    res = stub.Insert(req)
    assert res.status.code == 1100 and says in res.status.reason, res.status
    assert len(data_events(served.client)) == before
    assert served.client.query(name, output_fields=["count(*)"])[0]["count(*)"] == 0


def test_distinct_keys_out_of_order_are_inserted_and_answered_in_their_order(
    served: Served, stub, name: str
) -> None:
    keys = [7, -2, 2**62, 0, 5]
    req = milvus_pb2.InsertRequest(
        collection_name=name,
        fields_data=[id_column(keys), vector_column([0.5] * 10)],
        num_rows=5,
    )
    res = stub.Insert(req)
    assert res.status.code == 0, res.status
    assert list(res.IDs.int_id.data) == keys and res.insert_cnt == 5
    assert list(res.succ_index) == [0, 1, 2, 3, 4]
    got = served.client.query(name, filter="id >= -10", output_fields=["id"])
    assert sorted(r["id"] for r in got) == sorted(keys)


def meta_column(docs: list[bytes]) -> schema_pb2.FieldData:
    fd = schema_pb2.FieldData(type=schema_pb2.JSON, field_name="$meta", is_dynamic=True)
    fd.scalars.json_data.data.extend(docs)
    return fd


@pytest.mark.parametrize(
    "doc",
    [b'{"k": "\\udc00"}', b'{"\\udc00": 1}', b'{"k": {"n": ["a", "\\ud800"]}}'],
    ids=["value", "key", "nested"],
)
def test_json_holding_a_lone_surrogate_is_refused_and_writes_nothing(
    served: Served, stub, name: str, doc: bytes
) -> None:
    before = len(data_events(served.client))
    columns = [id_column([1]), vector_column([1.0, 2.0]), meta_column([doc])]
    res = stub.Insert(
        milvus_pb2.InsertRequest(collection_name=name, fields_data=columns, num_rows=1)
    )
    assert res.status.code == 1100 and "lone surrogate" in res.status.reason, res.status
    assert "$meta" in res.status.reason
    assert len(data_events(served.client)) == before


def test_garbage_bytes_get_a_grpc_error_and_the_server_keeps_serving(
    served: Served, stub, name: str
) -> None:
    before = len(data_events(served.client))
    with grpc.insecure_channel(served.address) as channel:
        raw = channel.unary_unary(SERVICE + "Insert")  # bytes in, bytes out
        with pytest.raises(grpc.RpcError) as exc:
            raw(b"\x0a\xff\xff\xff\xff\xff", timeout=10)
    assert exc.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    assert len(data_events(served.client)) == before
    assert stub.HasCollection(milvus_pb2.HasCollectionRequest(collection_name=name)).value


def test_a_garbled_search_vector_is_refused(stub, name: str) -> None:
    req = milvus_pb2.SearchRequest(collection_name=name, placeholder_group=b"\x01\x02", nq=1)
    assert stub.Search(req).status.code == 1100


@pytest.mark.parametrize("raw", [b"\x00\x00\x80?\x00\x00", b""], ids=["6 bytes", "empty"])
def test_one_search_vector_not_of_float32_bytes_is_refused(stub, name: str, raw: bytes) -> None:
    ph = common_pb2.PlaceholderValue(tag="$0", type=common_pb2.PlaceholderType.FloatVector)
    ph.values.append(raw)
    group = common_pb2.PlaceholderGroup(placeholders=[ph]).SerializeToString()
    req = milvus_pb2.SearchRequest(collection_name=name, placeholder_group=group, nq=1)
    res = stub.Search(req)
    assert res.status.code == 1100
    assert "float32 bytes" in res.status.reason


def test_rpcs_vectorlog_does_not_serve_answer_unimplemented(stub) -> None:
    assert (
        stub.CreateResourceGroup(milvus_pb2.CreateResourceGroupRequest(resource_group="x")).code
        == 10
    )
    res = stub.ListResourceGroups(milvus_pb2.ListResourceGroupsRequest())
    assert res.status.code == 10 and "ListResourceGroups" in res.status.reason


def test_an_unknown_rpc_gets_grpc_unimplemented(served: Served) -> None:
    with grpc.insecure_channel(served.address) as channel, pytest.raises(grpc.RpcError) as exc:
        channel.unary_unary(SERVICE + "NoSuchRpc")(b"", timeout=10)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_an_oversized_request_is_refused_and_writes_nothing(served: Served, name: str) -> None:
    small = start_grpc(served.client, "127.0.0.1:0", max_workers=1, max_message_bytes=4096)
    try:
        before = len(data_events(served.client))
        ids = list(range(1000))
        columns = [id_column(ids), vector_column([1.0] * 2000)]
        req = milvus_pb2.InsertRequest(collection_name=name, fields_data=columns, num_rows=1000)
        channel = grpc.insecure_channel(f"127.0.0.1:{small.port}")
        with channel, pytest.raises(grpc.RpcError) as exc:
            milvus_pb2_grpc.MilvusServiceStub(channel).Insert(req, timeout=10)
        assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert len(data_events(served.client)) == before
    finally:
        small.stop(grace=1.0)


def test_a_busy_address_is_refused(served: Served) -> None:
    with pytest.raises(InvalidArgument, match="cannot bind"):
        start_grpc(served.client, served.address, max_workers=1)


def test_a_stopped_server_refuses_calls_and_the_cluster_stays_usable(served: Served) -> None:
    extra = start_grpc(served.client, "127.0.0.1:0", max_workers=1)
    address = f"127.0.0.1:{extra.port}"
    with grpc.insecure_channel(address) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        assert stub.GetVersion(milvus_pb2.GetVersionRequest()).status.code == 0
    extra.stop(grace=1.0)
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as exc:
        milvus_pb2_grpc.MilvusServiceStub(channel).GetVersion(
            milvus_pb2.GetVersionRequest(), timeout=2
        )
    assert exc.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert served.milvus.get_server_version()  # the module's server still serves
