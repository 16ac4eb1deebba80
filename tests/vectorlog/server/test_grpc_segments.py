"""Persistent segments over Milvus's gRPC protocol: pymilvus's list_persistent_segments lists a
collection's sealed and flushed segments (Milvus's default states) with their rows; growing
ones only when asked for, with their rows as the data node reports them (without a flush)."""

from __future__ import annotations

import uuid

from pymilvus import DataType, MilvusClient
from pymilvus.client.types import SegmentState

from tests.support import wait_until
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


def _growing_rows(m: MilvusClient, name: str) -> list[int]:
    return [s.num_rows for s in m.list_persistent_segments(name, states=[SegmentState.Growing])]


def test_a_growing_segments_rows_are_reported_without_a_flush(served: Served) -> None:
    """The data node reports its growing segments' rows to datacoord every second while they
    change (Milvus's data node: segment stats with its time tick), so list_persistent_segments
    of Growing segments says how many rows each holds before any flush; a flush then seals
    the segment with the same rows."""
    m, name = served.milvus, f"c_{uuid.uuid4().hex[:10]}"
    m.create_collection(name, dimension=2, consistency_level="Strong")
    m.insert(name, [{"id": i, "vector": [i, 1.0]} for i in range(120)])
    wait_until(lambda: _growing_rows(m, name) == [120], 30, "the growing segment's 120 rows")
    m.insert(name, [{"id": i, "vector": [i, 1.0]} for i in range(120, 150)])
    wait_until(lambda: _growing_rows(m, name) == [150], 30, "the growing segment's 150 rows")
    m.flush(name)
    segments = m.list_persistent_segments(name)
    assert [(seg.num_rows, seg.state.name) for seg in segments] == [(150, "Flushed")]
