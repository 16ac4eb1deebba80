"""Milvus's operations RPCs over gRPC, called as pymilvus calls them: CheckHealth and
GetComponentStates answer healthy, `flush_all` leaves every segment of the database Flushed,
`list_loaded_segments` lists the Flushed segments with their rows and index (during a
compaction's handoff, the compacted-from segments the query node still serves), GetIndexState
and GetIndexBuildProgress say how far an index is."""

from __future__ import annotations

import uuid

import grpc
import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.client.types import SegmentState
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import common_pb2, milvus_pb2, milvus_pb2_grpc

from tests.clients import ClientFactory
from tests.support import wait_until
from tests.vectorlog import test_compaction as compaction
from tests.vectorlog.server.conftest import Served
from tests.vectorlog.test_time_travel import caught_up
from vectorlog.server.grpc_server import start_grpc


def _stub(served: Served) -> tuple[grpc.Channel, milvus_pb2_grpc.MilvusServiceStub]:
    channel = grpc.insecure_channel(served.address)
    return channel, milvus_pb2_grpc.MilvusServiceStub(channel)


def _collection(m: MilvusClient, rows: int) -> str:
    name = f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("tag", DataType.INT64)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    m.create_collection(name, schema=s, consistency_level="Strong")
    m.insert(name, [{"id": i, "tag": i % 3, "v": [i, 1.0]} for i in range(rows)])
    return name


def test_check_health_and_component_states_say_healthy(served: Served) -> None:
    channel, stub = _stub(served)
    with channel:
        health = stub.CheckHealth(milvus_pb2.CheckHealthRequest(), timeout=10)
        states = stub.GetComponentStates(milvus_pb2.GetComponentStatesRequest(), timeout=10)
    assert (health.status.code, health.isHealthy, list(health.reasons)) == (0, True, [])
    assert (states.status.code, states.state.state_code) == (0, common_pb2.Healthy)


def test_flush_all_leaves_every_collection_flushed(served: Served) -> None:
    m = served.milvus
    names = [_collection(m, 50), _collection(m, 70)]
    m.flush_all(timeout=60)
    for name, rows in zip(names, (50, 70), strict=True):
        growing = m.list_persistent_segments(name, states=[SegmentState.Growing])
        flushed = m.list_persistent_segments(name)
        assert growing == []
        assert [(s.num_rows, s.state.name) for s in flushed] == [(rows, "Flushed")]


def test_get_flush_all_state_refuses_a_zero_ts(served: Served) -> None:
    channel, stub = _stub(served)
    with channel:
        answer = stub.GetFlushAllState(milvus_pb2.GetFlushAllStateRequest(), timeout=10)
    assert answer.status.code != 0 and "flush_all_ts" in answer.status.reason


def test_list_loaded_segments_lists_the_flushed_ones_with_their_index(served: Served) -> None:
    m = served.milvus
    name = _collection(m, 120)
    m.flush(name)
    m.insert(name, [{"id": 1000, "tag": 0, "v": [0.5, 1.0]}])  # growing: not listed
    loaded = m.list_loaded_segments(name)
    assert [(s.num_rows, s.collection_name) for s in loaded] == [(120, name)]
    params = m.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2", index_name="vix")
    m.create_index(name, params)
    _wait_finished(served, name, "vix")
    infos = _query_segment_info(served, name)
    assert [(i.num_rows, i.state, i.index_name) for i in infos] == [(120, common_pb2.Sealed, "vix")]


def test_list_loaded_segments_lists_the_compacted_from_segments_until_the_merged_index_loads(
    open_client: ClientFactory,
) -> None:
    """Milvus lists the segments its query nodes serve: during a handoff, the compacted-from
    segments (with their indexes), not the merged ones datacoord lists Flushed."""
    client = open_client(**compaction.SETTINGS)
    compaction.build(client)
    compaction.handed_off(client)
    olds = compaction.served(client)
    indexnode = client.cluster.indexnode
    assert indexnode is not None
    indexnode.stop()  # no index of the merged segments is built: they serve nothing yet
    client.compact("c", wait=True)
    caught_up(client)
    assert compaction.served(client) == olds
    server = start_grpc(client, "127.0.0.1:0", max_workers=2)
    milvus = MilvusClient(f"http://127.0.0.1:{server.port}")
    try:
        loaded = milvus.list_loaded_segments("c")
    finally:
        milvus.close()
        server.stop(grace=1.0)
    assert sorted(s.segment_id for s in loaded) == sorted(olds)
    assert sum(s.num_rows for s in loaded) == 200 + 10  # 10 upserted: both versions held
    assert {s.index_name for s in loaded} == {"vector"}


def _query_segment_info(served: Served, name: str) -> list[milvus_pb2.QuerySegmentInfo]:
    channel, stub = _stub(served)
    with channel:
        req = milvus_pb2.GetQuerySegmentInfoRequest(collectionName=name)
        answer = stub.GetQuerySegmentInfo(req, timeout=10)
    assert answer.status.code == 0, answer.status.reason
    return list(answer.infos)


def _wait_finished(served: Served, name: str, index: str) -> milvus_pb2.GetIndexStateResponse:
    channel, stub = _stub(served)
    req = milvus_pb2.GetIndexStateRequest(collection_name=name, index_name=index)
    with channel:
        wait_until(
            lambda: stub.GetIndexState(req, timeout=10).state == common_pb2.Finished,
            60,
            f"index {index} Finished",
        )
        return stub.GetIndexState(req, timeout=10)


def test_index_state_and_build_progress_follow_describe_index(served: Served) -> None:
    m = served.milvus
    name = _collection(m, 80)
    m.flush(name)
    params = m.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2", index_name="vix")
    m.create_index(name, params)
    state = _wait_finished(served, name, "vix")
    assert (state.status.code, state.fail_reason) == (0, "")
    channel, stub = _stub(served)
    with channel:  # by field name, with the index unnamed: the field's only index
        req = milvus_pb2.GetIndexBuildProgressRequest(collection_name=name, field_name="v")
        progress = stub.GetIndexBuildProgress(req, timeout=10)
    assert (progress.status.code, progress.indexed_rows, progress.total_rows) == (0, 80, 80)


def test_index_state_needs_a_name_when_there_are_several(served: Served) -> None:
    m = served.milvus
    name = _collection(m, 10)
    params = m.prepare_index_params()
    params.add_index("v", index_type="FLAT", metric_type="L2", index_name="vix")
    params.add_index("tag", index_type="INVERTED", index_name="tix")
    m.create_index(name, params)
    channel, stub = _stub(served)
    with channel:
        req = milvus_pb2.GetIndexStateRequest(collection_name=name)
        answer = stub.GetIndexState(req, timeout=10)
        missing = stub.GetIndexState(
            milvus_pb2.GetIndexStateRequest(collection_name=name, index_name="nope"), timeout=10
        )
    assert answer.status.code != 0 and "tix" in answer.status.reason
    assert missing.status.code != 0 and "nope" in missing.status.reason


def test_list_loaded_segments_of_a_missing_collection_is_refused(served: Served) -> None:
    with pytest.raises(MilvusException, match="nope_nothing"):
        served.milvus.list_loaded_segments("nope_nothing")
