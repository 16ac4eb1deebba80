"""SPARSE_FLOAT_VECTOR through an unmodified pymilvus against `vectorlog serve` (issue 27): the
schema without dim, inserts as dicts and scipy rows (gRPC SparseFloatArray), search with a
sparse query (SparseFloatVector placeholder), query returning {index: value}, Milvus's
messages for bad rows."""

from __future__ import annotations

import pytest
import scipy.sparse as sp
from pymilvus import DataType, MilvusException

from tests.vectorlog.server.conftest import Served

ROWS = [
    {"id": 1, "sv": {1: 0.5, 7: 1.0}},
    {"id": 2, "sv": {3: 2.0, 1: 0.25}},
    {"id": 3, "sv": sp.csr_matrix(([1.5], ([0], [7])), shape=(1, 10))},
    {"id": 4, "sv": {100: 1.0}},
]


def create(served: Served, name: str) -> None:
    schema = served.milvus.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
    index = served.milvus.prepare_index_params()
    index.add_index("sv", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    served.milvus.create_collection(
        name, schema=schema, index_params=index, consistency_level="Strong"
    )


def test_sparse_rows_are_inserted_searched_and_returned_over_grpc(served: Served):
    create(served, "sparse_grpc")
    assert served.milvus.insert("sparse_grpc", ROWS)["insert_count"] == 4
    field = served.milvus.describe_collection("sparse_grpc")["fields"][1]
    assert field["type"] == DataType.SPARSE_FLOAT_VECTOR and "dim" not in field["params"]
    hits = served.milvus.search(
        "sparse_grpc", [{7: 1.0, 1: 1.0}], limit=3, anns_field="sv", output_fields=["sv"]
    )[0]
    assert [h["id"] for h in hits] == [1, 3, 2]  # 1 and 3 tie at 1.5: smaller id first
    assert [h["distance"] for h in hits] == pytest.approx([1.5, 1.5, 0.25])
    assert hits[2]["entity"]["sv"] == {1: 0.25, 3: 2.0}
    got = served.milvus.query("sparse_grpc", "id in [3, 4]", output_fields=["sv"])
    assert sorted((r["id"], r["sv"]) for r in got) == [(3, {7: 1.5}), (4, {100: 1.0})]


def test_a_sparse_row_with_a_repeated_index_is_refused_and_nothing_written(served: Served):
    create(served, "sparse_bad")
    with pytest.raises(MilvusException, match="unsorted or same indices in sparse float vector"):
        served.milvus.insert("sparse_bad", [{"id": 9, "sv": [(2, 1.0), (2, 3.0)]}])
    assert served.milvus.query("sparse_bad", "id >= 0", output_fields=["id"]) == []


def test_full_text_search_over_grpc(served: Served):
    from pymilvus import Function, FunctionType

    m = served.milvus
    schema = m.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=100, enable_analyzer=True,
                     analyzer_params={"type": "english"})  # fmt: skip
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="bm25",
            function_type=FunctionType.BM25,
            input_field_names=["text"],
            output_field_names=["sparse"],
        )  # fmt: skip
    )
    index = m.prepare_index_params()
    index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    m.create_collection("fts_grpc", schema=schema, index_params=index, consistency_level="Strong")
    rows = [{"id": 1, "text": "running foxes"}, {"id": 2, "text": "a sleeping dog"}]
    assert m.insert("fts_grpc", rows)["insert_count"] == 2
    hits = m.search("fts_grpc", ["the fox runs"], anns_field="sparse", limit=5)[0]
    assert [h["id"] for h in hits] == [1] and hits[0]["distance"] > 0
    d = m.describe_collection("fts_grpc")
    assert [f["name"] for f in d["functions"]] == ["bm25"]
    text = next(f for f in d["fields"] if f["name"] == "text")
    assert text["params"]["enable_analyzer"] in (True, "true")


def test_raw_grpc_inserts_of_bad_sparse_rows_or_a_bm25_output_are_refused(served: Served):
    """What pymilvus refuses on the client, sent as raw FieldData: a BM25 output given, a
    sparse row with unsorted indices; refused with Milvus's code, nothing written."""
    import struct

    import grpc
    from pymilvus import Function, FunctionType
    from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc, schema_pb2

    m = served.milvus
    schema = m.create_schema()
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=100, enable_analyzer=True)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    fn = Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                  output_field_names=["sparse"])  # fmt: skip
    schema.add_function(fn)
    m.create_collection("fts_raw", schema=schema, consistency_level="Strong")
    ids = schema_pb2.FieldData(type=schema_pb2.Int64, field_name="id")
    ids.scalars.long_data.data.append(1)
    text = schema_pb2.FieldData(type=schema_pb2.VarChar, field_name="text")
    text.scalars.string_data.data.append("a quick fox")
    out = schema_pb2.FieldData(type=schema_pb2.SparseFloatVector, field_name="sparse")
    out.vectors.sparse_float_vector.contents.append(struct.pack("<If", 3, 1.0))
    create(served, "sparse_raw")
    sv = schema_pb2.FieldData(type=schema_pb2.SparseFloatVector, field_name="sv")
    sv.vectors.sparse_float_vector.contents.append(struct.pack("<IfIf", 7, 1.0, 2, 1.0))
    cases = [
        ("fts_raw", [ids, text, out], "'sparse' is the output of a BM25 function"),
        ("sparse_raw", [ids, sv], "unsorted or same indices in sparse float vector"),
    ]
    with grpc.insecure_channel(served.address) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        for name, columns, says in cases:
            req = milvus_pb2.InsertRequest(collection_name=name, fields_data=columns, num_rows=1)
            res = stub.Insert(req)
            assert res.status.code == 1100 and says in res.status.reason, res.status
            assert m.query(name, "", output_fields=["count(*)"])[0]["count(*)"] == 0
