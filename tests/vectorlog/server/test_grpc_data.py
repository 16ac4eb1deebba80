"""Milvus's gRPC protocol, data side: an unmodified pymilvus MilvusClient inserts, upserts,
deletes, gets, queries, counts, searches and flushes on a served vectorlog cluster."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.grpc_gen import common_pb2, milvus_pb2, schema_pb2

from tests.vectorlog.server.conftest import Served


def unique(prefix: str = "c") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def every_type_schema() -> object:
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("flag", DataType.BOOL)
    s.add_field("i8", DataType.INT8)
    s.add_field("i16", DataType.INT16)
    s.add_field("i32", DataType.INT32)
    s.add_field("f", DataType.FLOAT)
    s.add_field("d", DataType.DOUBLE)
    s.add_field("title", DataType.VARCHAR, max_length=20)
    s.add_field("doc", DataType.JSON)
    s.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=3, max_length=5)
    return s


def typed_row(i: int) -> dict:
    return {
        "id": i,
        "vector": [float(i), 1.0],
        "flag": i % 2 == 0,
        "i8": -i,
        "i16": 300 + i,
        "i32": 70_000 + i,
        "f": 0.5 * i,
        "d": 1.25 * i,
        "title": f"t{i}",
        "doc": {"n": i, "xs": [i, "a"]},
        "tags": ["a", f"b{i}"],
        "extra": f"dyn{i}",  # a dynamic field
    }


def test_every_type_round_trips_through_insert_and_query(served: Served) -> None:
    m, name = served.milvus, unique()
    m.create_collection(name, schema=every_type_schema(), consistency_level="Strong")
    assert m.insert(name, [typed_row(i) for i in range(3)])["insert_count"] == 3
    rows = [dict(r) for r in m.query(name, "id >= 0", output_fields=["*"])]
    vectors = [r.pop("vector") for r in rows]
    expected = [typed_row(i) for i in range(3)]
    assert vectors == [pytest.approx(e.pop("vector"), rel=1e-6) for e in expected]
    assert rows == expected
    assert served.client.get(name, [1])[0]["extra"] == "dyn1"  # stored as vectorlog's own


def test_insert_upsert_delete_get_and_count(served: Served) -> None:
    m, name = served.milvus, unique()
    m.create_collection(name, dimension=2, consistency_level="Strong")
    res = m.insert(name, [{"id": i, "vector": [1.0, float(i)], "color": f"c{i}"} for i in range(6)])
    assert res["insert_count"] == 6 and list(res["ids"]) == list(range(6))
    assert m.query(name, output_fields=["count(*)"])[0]["count(*)"] == 6
    assert m.upsert(name, [{"id": 2, "vector": [0.0, 1.0], "color": "new"}])["upsert_count"] == 1
    assert m.delete(name, ids=[0, 1])["delete_count"] == 2
    assert m.delete(name, filter='color == "c5"')["delete_count"] == 1
    got = m.get(name, ids=[1, 2], output_fields=["color"])
    assert [(r["id"], r["color"]) for r in got] == [(2, "new")]
    assert m.query(name, output_fields=["count(*)"])[0]["count(*)"] == 3
    assert m.get_collection_stats(name)["row_count"] == 3
    rows = m.query(name, 'color like "c%"', output_fields=["color"], limit=1, offset=1)
    assert [(r["id"], r["color"]) for r in rows] == [(4, "c4")]


def test_search_with_filter_output_fields_and_params(served: Served) -> None:
    m, name = served.milvus, unique()
    index_params = MilvusClient.prepare_index_params()
    index_params.add_index("vector", index_type="FLAT", metric_type="L2")
    s = MilvusClient.create_schema(enable_dynamic_field=True)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("year", DataType.INT64)
    m.create_collection(name, schema=s, index_params=index_params, consistency_level="Strong")
    m.insert(name, [{"id": i, "vector": [float(i), 0.0], "year": 2000 + i} for i in range(10)])
    res = m.search(
        name,
        [[2.2, 0.0], [8.9, 0.0]],
        limit=3,
        filter="year != 2003",
        output_fields=["year"],
        search_params={"metric_type": "L2", "params": {}},
    )
    assert [[h["id"] for h in q] for q in res] == [[2, 1, 4], [9, 8, 7]]
    assert res[0][0]["entity"] == {"year": 2002}
    assert abs(res[0][0]["distance"] - 0.04) < 1e-4  # squared L2, as Milvus
    paged = m.search(name, [[0.0, 0.0]], limit=2, search_params={"offset": 1, "params": {}})
    assert [h["id"] for h in paged[0]] == [1, 2]


def keyed_schema() -> object:
    s = MilvusClient.create_schema(auto_id=False)
    s.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=8)
    s.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
    s.add_field("f", DataType.FLOAT)
    s.add_field("doc", DataType.JSON)
    s.add_field("tags", DataType.ARRAY, element_type=DataType.INT64, max_capacity=3)
    return s


def plain(hits: object, key: str) -> list[list[tuple]]:
    """Each query's hits as (primary key (under `key`), distance to 4 places, entity with
    vectors to 4 places)."""
    return [
        [
            (
                h[key],
                round(h["distance"], 4),
                {
                    k: [round(x, 4) for x in v] if k == "vector" else v
                    for k, v in dict(h["entity"]).items()
                },
            )
            for h in q
        ]
        for q in hits  # type: ignore[attr-defined]
    ]


def test_a_search_through_pymilvus_answers_exactly_what_the_client_does(served: Served) -> None:
    """The server builds the response from the result's arrays: same keys (strings), order
    (ties by key), distances, output fields and per-query counts as the in-process hits."""
    m, name = served.milvus, unique()
    m.create_collection(name, schema=keyed_schema(), consistency_level="Strong")
    rows = [
        {"pk": f"k{i:02d}", "vector": [float(i % 3), 1.0], "f": 0.5 * i, "doc": {"n": i},
         "tags": [i, i + 1]}
        for i in range(12)
    ]  # fmt: skip
    m.insert(name, rows)
    queries = [[0.0, 1.0], [2.0, 1.0], [7.0, 0.0]]
    fields = ["f", "doc", "tags", "vector"]
    for kwargs in (
        {},
        {"output_fields": fields},
        {"output_fields": fields, "offset": 2},
        {"output_fields": ["f"], "filter": "f > 4.6"},
        {"filter": "f > 100"},
    ):
        sent = dict(kwargs)
        if "offset" in sent:  # pymilvus sends it among the search params
            sent["search_params"] = {"offset": sent.pop("offset"), "params": {}}
        got = m.search(name, queries, limit=5, **sent)
        want = served.client.search(name, queries, limit=5, consistency_level="Strong", **kwargs)
        assert plain(got, "pk") == plain(want, "id"), kwargs  # pymilvus: the key's name
        assert [len(q) for q in got] == [len(q) for q in want]
    assert [len(q) for q in m.search(name, queries, limit=5, filter="f > 100")] == [0, 0, 0]


def test_flush_then_describe_index_counts_the_rows(served: Served) -> None:
    m, name = served.milvus, unique()
    m.create_collection(name, dimension=2, consistency_level="Strong")
    m.insert(name, [{"id": i, "vector": [1.0, float(i)]} for i in range(4)])
    m.flush(name)
    assert served.client.list_segments(name)
    assert all(s["state"] == "Flushed" for s in served.client.list_segments(name))
    assert m.describe_index(name, "vector")["total_rows"] == 4


def test_filter_params_reach_search_query_and_delete(served: Served) -> None:
    m, name = served.milvus, unique()
    m.create_collection(name, dimension=2, consistency_level="Strong")
    m.insert(name, [{"id": i, "vector": [1.0, float(i)], "tag": f"t{i % 2}"} for i in range(6)])
    rows = m.query(
        name, "id in {ids} and tag == {tag}", filter_params={"ids": [1, 2, 3], "tag": "t1"}
    )
    assert [r["id"] for r in rows] == [1, 3]
    hits = m.search(name, [[1.0, 0.0]], limit=5, filter="id > {low}", filter_params={"low": 3})
    assert sorted(h["id"] for h in hits[0]) == [4, 5]
    assert m.delete(name, filter="id <= {high}", filter_params={"high": 1})["delete_count"] == 2
    assert m.query(name, output_fields=["count(*)"])[0]["count(*)"] == 4


def test_concurrent_inserts_through_the_server_are_all_acknowledged(served: Served) -> None:
    m, name = served.milvus, unique()
    m.create_collection(name, dimension=2, consistency_level="Strong")

    def insert(batch: int) -> list[int]:
        rows = [{"id": batch * 10 + i, "vector": [1.0, float(i)]} for i in range(10)]
        return list(m.insert(name, rows)["ids"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = sorted(i for batch in pool.map(insert, range(8)) for i in batch)
    assert ids == list(range(80))
    assert m.query(name, output_fields=["count(*)"])[0]["count(*)"] == 80


def _raw_call(served: Served, method: str, request: object) -> bytes:
    """Returns the wire bytes of the server's answer to one MilvusService call."""
    with grpc.insecure_channel(served.address) as channel:
        call = channel.unary_unary(
            f"/milvus.proto.milvus.MilvusService/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=None,
        )
        return call(request)


def test_insert_and_delete_answer_milvus_mutation_results_byte_for_byte(served: Served) -> None:
    # the answer as the handler built it before its keys were filled in place (main 0a85658):
    # the status and IDs set (a delete's too: int_id without keys), succ_index 0..n-1
    name = unique("bytes")
    served.milvus.create_collection(name, dimension=2, consistency_level="Strong")
    request = milvus_pb2.InsertRequest(collection_name=name, num_rows=3)
    f = request.fields_data.add(type=schema_pb2.Int64, field_name="id")
    f.scalars.long_data.data.extend([7, 8, 9])
    f = request.fields_data.add(type=schema_pb2.FloatVector, field_name="vector")
    f.vectors.dim = 2
    f.vectors.float_vector.data.extend([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    raw = _raw_call(served, "Insert", request)
    got = milvus_pb2.MutationResult.FromString(raw)
    expected = milvus_pb2.MutationResult(
        status=common_pb2.Status(code=0, error_code=common_pb2.Success),
        IDs=schema_pb2.IDs(int_id=schema_pb2.LongArray(data=[7, 8, 9])),
        succ_index=[0, 1, 2],
        insert_cnt=3,
        timestamp=got.timestamp,
    )
    assert got.timestamp > 0 and raw == expected.SerializeToString()
    delete = milvus_pb2.DeleteRequest(collection_name=name, expr="id in [7]")
    raw = _raw_call(served, "Delete", delete)
    got = milvus_pb2.MutationResult.FromString(raw)
    expected = milvus_pb2.MutationResult(
        status=common_pb2.Status(code=0, error_code=common_pb2.Success),
        IDs=schema_pb2.IDs(int_id=schema_pb2.LongArray()),
        delete_cnt=1,
        timestamp=got.timestamp,
    )
    assert got.HasField("IDs") and raw == expected.SerializeToString()
