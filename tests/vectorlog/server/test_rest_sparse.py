"""REST v2 with a SparseFloatVector field (issue 27): declared in a full create without a dim,
rows as JSON objects {"index": value}, searched with a sparse query, returned as objects."""

from __future__ import annotations

from typing import Any

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

rest = rest_fixture()

SCHEMA = {
    "fields": [
        {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
        {"fieldName": "sv", "dataType": "SparseFloatVector"},
    ]
}


def test_sparse_rows_over_rest(rest: Rest) -> None:
    name = unique("sparse")
    index = [{"fieldName": "sv", "indexType": "SPARSE_WAND", "metricType": "IP"}]
    params = {"consistencyLevel": "Strong"}
    rest.ok("collections/create", collectionName=name, schema=SCHEMA, indexParams=index,
            params=params)  # fmt: skip
    fields = rest.ok("collections/describe", collectionName=name)["fields"]
    assert fields[1]["type"] == "SparseFloatVector" and fields[1]["params"] == []
    rows = [{"id": 1, "sv": {"1": 0.5, "7": 1.0}}, {"id": 2, "sv": {"3": 2.0}}]
    assert rest.ok("entities/insert", collectionName=name, data=rows)["insertCount"] == 2
    hits = rest.ok("entities/search", collectionName=name, data=[{"7": 2.0}], annsField="sv",
                   limit=5, outputFields=["sv"])  # fmt: skip
    assert hits == [{"id": 1, "sv": {"1": 0.5, "7": 1.0}, "distance": 2.0}]


def test_a_negative_sparse_index_is_refused_over_rest(rest: Rest) -> None:
    name = unique("sparse_bad")
    rest.ok("collections/create", collectionName=name, schema=SCHEMA)
    out = rest.call("entities/insert", collectionName=name, data=[{"id": 1, "sv": {"-3": 1.0}}])
    assert out["code"] != 0
    assert "sparse vector index must be positive and less than 2^32-1: -3" in out["message"]


def test_full_text_search_over_rest(rest: Rest) -> None:
    name = unique("fts")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "text", "dataType": "VarChar",
             "elementTypeParams": {"max_length": 100, "enable_analyzer": True}},
            {"fieldName": "sparse", "dataType": "SparseFloatVector"},
        ],
        "functions": [{"name": "bm25", "type": "BM25", "inputFieldNames": ["text"],
                       "outputFieldNames": ["sparse"]}],
    }  # fmt: skip
    index = [{"fieldName": "sparse", "indexType": "SPARSE_INVERTED_INDEX", "metricType": "BM25"}]
    rest.ok("collections/create", collectionName=name, schema=schema, indexParams=index,
            params={"consistencyLevel": "Strong"})  # fmt: skip
    rows = [{"id": 1, "text": "a quick fox"}, {"id": 2, "text": "a lazy dog"}]
    rows.append({"id": 3, "text": "quick quick dogs"})
    assert rest.ok("entities/insert", collectionName=name, data=rows)["insertCount"] == 3
    hits = rest.ok("entities/search", collectionName=name, data=["quick fox"], annsField="sparse",
                   limit=5, outputFields=["text"])  # fmt: skip
    assert [h["id"] for h in hits] == [1, 3]
    assert hits[0]["distance"] > hits[1]["distance"] > 0


def test_binary_and_float16_vectors_over_rest_come_back_as_base64(rest: Rest) -> None:
    name = unique("packed")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "h", "dataType": "Float16Vector", "elementTypeParams": {"dim": 2}},
            {"fieldName": "b", "dataType": "BinaryVector", "elementTypeParams": {"dim": 8}},
        ]
    }
    index = [
        {"fieldName": "h", "indexType": "FLAT", "metricType": "L2"},
        {"fieldName": "b", "indexType": "BIN_FLAT", "metricType": "HAMMING"},
    ]
    rest.ok("collections/create", collectionName=name, schema=schema, indexParams=index,
            params={"consistencyLevel": "Strong"})  # fmt: skip
    rows = [{"id": 1, "h": [1.0, 2.0], "b": [129]}]  # Milvus's forms: numbers, byte values
    rows.append({"id": 2, "h": "ADwAQA==", "b": "gQ=="})  # or base64 text of the bytes
    assert rest.ok("entities/insert", collectionName=name, data=rows)["insertCount"] == 2
    got = rest.ok("entities/query", collectionName=name, filter="id > 0", outputFields=["h", "b"])
    assert got == [{"id": i, "h": "ADwAQA==", "b": "gQ=="} for i in (1, 2)]  # 1, 2; 10000001
    for field, data in (("b", [[129]]), ("b", ["gQ=="]), ("h", ["ADwAQA=="]), ("h", [[1, 2]])):
        hits = rest.ok("entities/search", collectionName=name, data=data, annsField=field,
                       limit=2)  # fmt: skip
        assert [h["distance"] for h in hits] == [0.0, 0.0]


def test_sparse_rows_as_indices_and_values_and_bfloat16_as_numbers_over_rest(rest: Rest) -> None:
    name = unique("forms")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "sv", "dataType": "SparseFloatVector"},
            {"fieldName": "bf", "dataType": "BFloat16Vector", "elementTypeParams": {"dim": 2}},
        ]
    }
    index = [
        {"fieldName": "sv", "indexType": "SPARSE_INVERTED_INDEX", "metricType": "IP"},
        {"fieldName": "bf", "indexType": "FLAT", "metricType": "L2"},
    ]
    rest.ok("collections/create", collectionName=name, schema=schema, indexParams=index,
            params={"consistencyLevel": "Strong"})  # fmt: skip
    rows = [{"id": 1, "sv": {"indices": [7, 1], "values": [1.0, 0.5]}, "bf": [1.0, 2.0]}]
    assert rest.ok("entities/insert", collectionName=name, data=rows)["insertCount"] == 1
    got = rest.ok("entities/query", collectionName=name, filter="id > 0", outputFields=["*"])
    assert got == [{"id": 1, "sv": {"1": 0.5, "7": 1.0}, "bf": "gD8AQA=="}]  # bf16 1, 2
    query = [{"indices": [7], "values": [2.0]}]
    hits = rest.ok("entities/search", collectionName=name, data=query, annsField="sv", limit=1)
    assert hits == [{"id": 1, "distance": 2.0}]
    hits = rest.ok("entities/search", collectionName=name, data=["gD8AQA=="], annsField="bf",
                   limit=1)  # fmt: skip
    assert hits == [{"id": 1, "distance": 0.0}]
    subs = [
        {"data": query, "annsField": "sv", "limit": 1},
        {"data": ["gD8AQA=="], "annsField": "bf", "limit": 1},
    ]
    rerank = {"strategy": "rrf", "params": {"k": 60}}
    hits = rest.ok("entities/hybrid_search", collectionName=name, search=subs, rerank=rerank,
                   limit=1)  # fmt: skip
    assert [h["id"] for h in hits] == [1]


#: (a bad value, Milvus's code: 1804 for what its HTTP layer cannot convert, else 1100, words)
BAD: list[tuple[dict[str, Any], int, str]] = [
    ({"sv": {"indices": [3, 3], "values": [1, 2]}}, 1100, "unsorted or same indices"),
    ({"sv": {"-1": 1.0}}, 1100, "sparse vector index must be positive and less than 2^32-1: -1"),
    ({"b": [1, 2]}, 1804, "expected dim '8' for field 'b' with type 'BinaryVector', got dim '16'"),
    ({"h": [1.0, 70000.0]}, 1100, "float16 vector contain nan or infinity value."),
    ({"h": "@@"}, 1804, "is not base64 text"),
    (
        {"sparse": {"1": 1.0}},
        1804,
        "fail to deal the insert data, error: not allowed to provide input data for function "
        "output field: sparse",
    ),
]


def test_bad_values_of_the_new_types_are_refused_over_rest_and_nothing_is_written(
    rest: Rest,
) -> None:
    name = unique("bad")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "sv", "dataType": "SparseFloatVector"},
            {"fieldName": "h", "dataType": "Float16Vector", "elementTypeParams": {"dim": 2}},
            {"fieldName": "b", "dataType": "BinaryVector", "elementTypeParams": {"dim": 8}},
            {"fieldName": "text", "dataType": "VarChar",
             "elementTypeParams": {"max_length": 100, "enable_analyzer": True}},
            {"fieldName": "sparse", "dataType": "SparseFloatVector"},
        ],
        "functions": [{"name": "bm25", "type": "BM25", "inputFieldNames": ["text"],
                       "outputFieldNames": ["sparse"]}],
    }  # fmt: skip
    rest.ok("collections/create", collectionName=name, schema=schema,
            params={"consistencyLevel": "Strong"})  # fmt: skip
    good = {"id": 1, "sv": {"1": 1.0}, "h": [1.0, 2.0], "b": [1], "text": "a fox"}
    for change, code, message in BAD:
        out = rest.call("entities/insert", collectionName=name, data=[good, {**good, **change}])
        assert out["code"] == code and message in out["message"], (change, out)
    count = rest.ok("entities/query", collectionName=name, filter="", outputFields=["count(*)"])
    assert count == [{"count(*)": 0}]


def test_a_binary_dim_that_is_not_a_multiple_of_8_is_refused_over_rest(rest: Rest) -> None:
    name = unique("bin12")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "b", "dataType": "BinaryVector", "elementTypeParams": {"dim": 12}},
        ]
    }
    out = rest.call("collections/create", collectionName=name, schema=schema)
    assert out["code"] == 1100
    assert (
        "dimension of binary vector field b should be multiple of 8, but got 12" in out["message"]
    )
    assert rest.ok("collections/has", collectionName=name) == {"has": False}
