"""Scalar indexes over REST v2 (both backends): created with a collection or alone, described
with no metric, listed and dropped like vector indexes; a refused one gets Milvus's code."""

from __future__ import annotations

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

rest = rest_fixture()


def test_scalar_indexes_over_rest(rest: Rest) -> None:
    name = unique("scalar")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "v", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
            {"fieldName": "n", "dataType": "Int32"},
            {"fieldName": "j", "dataType": "JSON"},
        ]
    }
    indexes = [
        {"fieldName": "v", "metricType": "L2", "indexType": "FLAT"},
        {"fieldName": "n", "indexName": "n_idx", "indexType": "STL_SORT"},
    ]
    rest.ok("collections/create", collectionName=name, schema=schema, indexParams=indexes)
    json_index = {
        "fieldName": "j",
        "indexName": "j_b",
        "indexType": "INVERTED",
        "params": {"json_path": 'j["b"]', "json_cast_type": "varchar"},
    }
    rest.ok("indexes/create", collectionName=name, indexParams=[json_index])
    assert sorted(rest.ok("indexes/list", collectionName=name)) == ["j_b", "n_idx", "v"]
    (described,) = rest.ok("indexes/describe", collectionName=name, indexName="j_b")
    assert (described["indexType"], described["metricType"]) == ("INVERTED", "")
    assert described["params"] == {"json_path": 'j["b"]', "json_cast_type": "varchar"}
    bad = {"fieldName": "j", "indexName": "j_c", "indexType": "INVERTED", "params": {}}
    refused = rest.call("indexes/create", collectionName=name, indexParams=[bad])
    assert refused["code"] == 1101 and "json index must specify cast type" in refused["message"]
    rest.ok("indexes/drop", collectionName=name, indexName="n_idx")
    assert sorted(rest.ok("indexes/list", collectionName=name)) == ["j_b", "v"]
