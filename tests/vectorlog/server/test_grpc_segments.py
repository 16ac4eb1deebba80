"""Persistent segments over Milvus's gRPC protocol: pymilvus's list_persistent_segments lists a
collection's sealed and flushed segments (Milvus's default states) with their rows; growing
ones only when asked for."""

from __future__ import annotations

import uuid

from pymilvus import DataType, MilvusClient
from pymilvus.client.types import SegmentState

from tests.vectorlog.server.conftest import Served


def test_list_persistent_segments_lists_the_flushed_segments(
    served: Served,
) -> None:
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    m.create_collection(name, schema=s, consistency_level="Strong")
    m.insert(name, [{"id": i, "v": [i, 1.0]} for i in range(120)])
    assert m.list_persistent_segments(name) == []  # growing rows only
    m.flush(name)
    segments = m.list_persistent_segments(name)
    assert [(seg.num_rows, seg.state.name) for seg in segments] == [(120, "Flushed")]
    m.insert(name, [{"id": 500, "v": [0.5, 1.0]}])
    growing = m.list_persistent_segments(name, states=[SegmentState.Growing])
    assert [seg.state.name for seg in growing] == ["Growing"]
