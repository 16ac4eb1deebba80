"""FLOAT16_VECTOR, BFLOAT16_VECTOR and BINARY_VECTOR through an unmodified pymilvus against
`vectorlog serve` (issue 27): half rows as numpy float16 arrays (FieldData float16_vector
bytes), queries as float16 (a Float16Vector placeholder), binary rows and queries as bytes;
vectors returned as bytes."""

from __future__ import annotations

import numpy as np
from pymilvus import DataType

from tests.vectorlog.server.conftest import Served


def test_float16_vectors_over_grpc(served: Served):
    m = served.milvus
    schema = m.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT16_VECTOR, dim=4)
    index = m.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="L2")
    m.create_collection("half_grpc", schema=schema, index_params=index, consistency_level="Strong")
    x = np.asarray([[1, 2, 3, 4], [0.5, 0.25, 0.125, 1], [9, 9, 9, 9]], dtype=np.float16)
    assert m.insert("half_grpc", [{"id": i, "v": x[i]} for i in range(3)])["insert_count"] == 3
    hits = m.search("half_grpc", [x[1]], limit=2, output_fields=["v"])[0]
    assert [h["id"] for h in hits] == [1, 0]
    got = hits[0]["entity"]["v"]
    got = got[0] if isinstance(got, list) else got  # pymilvus may wrap byte vectors
    assert np.array_equal(np.frombuffer(got, dtype=np.float16), x[1])
    d = m.describe_collection("half_grpc")["fields"][1]
    assert d["type"] == DataType.FLOAT16_VECTOR and d["params"]["dim"] == 4


def test_binary_vectors_over_grpc(served: Served):
    m = served.milvus
    schema = m.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("b", DataType.BINARY_VECTOR, dim=16)
    index = m.prepare_index_params()
    index.add_index("b", index_type="BIN_FLAT", metric_type="HAMMING")
    m.create_collection("bin_grpc", schema=schema, index_params=index, consistency_level="Strong")
    rows = [{"id": 1, "b": b"\x0f\x00"}, {"id": 2, "b": b"\xff\xff"}, {"id": 3, "b": b"\x0f\x01"}]
    assert m.insert("bin_grpc", rows)["insert_count"] == 3
    hits = m.search("bin_grpc", [b"\x0f\x00"], limit=3, output_fields=["b"])[0]
    assert [(h["id"], h["distance"]) for h in hits] == [(1, 0.0), (3, 1.0), (2, 12.0)]
    got = hits[1]["entity"]["b"]
    assert (got[0] if isinstance(got, list) else got) == b"\x0f\x01"


def test_bad_half_and_binary_input_is_refused_over_grpc_and_nothing_written(served: Served):
    """Milvus's words: a float16 row beyond the type (infinite once converted by numpy), a
    binary dim that is not a multiple of 8."""
    import pytest
    from pymilvus import MilvusException

    m = served.milvus
    schema = m.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT16_VECTOR, dim=2)
    m.create_collection("half_bad", schema=schema, consistency_level="Strong")
    with np.errstate(over="ignore"):  # as a user's numpy, 7e4 becomes float16 infinity
        row = {"id": 1, "v": np.array([1.0, 7e4], np.float32).astype("<f2")}
    with pytest.raises(MilvusException, match="float16 vector contain nan or infinity value"):
        m.insert("half_bad", [row])
    assert m.query("half_bad", "", output_fields=["count(*)"])[0]["count(*)"] == 0
    schema = m.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("b", DataType.BINARY_VECTOR, dim=12)
    with pytest.raises(MilvusException, match="binary vector field b should be multiple of 8"):
        m.create_collection("bin_bad", schema=schema)
    assert not m.has_collection("bin_bad")
