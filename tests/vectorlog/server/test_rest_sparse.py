"""REST v2 with a SparseFloatVector field (issue 27): declared in a full create without a dim,
rows as JSON objects {"index": value}, searched with a sparse query, returned as objects."""

from __future__ import annotations

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
    rows = [{"id": 1, "h": [1.0, 2.0], "b": [1, 0, 0, 0, 0, 0, 0, 1]}]
    assert rest.ok("entities/insert", collectionName=name, data=rows)["insertCount"] == 1
    got = rest.ok("entities/query", collectionName=name, filter="id > 0", outputFields=["h", "b"])
    assert got == [{"id": 1, "h": "ADwAQA==", "b": "gQ=="}]  # float16 1, 2; bits 10000001
