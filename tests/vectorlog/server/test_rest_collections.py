"""REST v2 collections, partitions, indexes and aliases over a real cluster (both backends),
and the Milvus Kafka Connect sink's exchange (has, get_load_state, describe, upsert)."""

from __future__ import annotations

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

rest = rest_fixture()


def test_kafka_connect_sink_exchange(rest: Rest) -> None:
    """The calls and bodies of the Milvus sink's MilvusRestClient (dbName "default")."""
    name = unique("sink")
    strong = {"consistencyLevel": "Strong"}
    rest.ok("collections/create", collectionName=name, dimension=3, metricType="L2", params=strong)
    base = {"dbName": "default", "collectionName": name}
    assert rest.ok("collections/has", **base) == {"has": True}
    state = rest.ok("collections/get_load_state", **base)
    assert state["loadState"] == "LoadStateLoaded"
    described = rest.ok("collections/describe", **base)
    assert described["collectionName"] == name and described["load"] == "LoadStateLoaded"
    fields = {f["name"]: f for f in described["fields"]}
    assert fields["id"]["primaryKey"] and fields["id"]["type"] == "Int64"
    assert {"key": "dim", "value": "3"} in fields["vector"]["params"]
    assert described["indexes"] == [
        {"fieldName": "vector", "indexName": "vector", "metricType": "L2"}
    ]
    rows = [{"id": i, "vector": [float(i), 0.0, 1.0], "tag": f"t{i}"} for i in range(4)]
    assert rest.ok("entities/upsert", **base, data=rows)["upsertCount"] == 4
    rows[1]["tag"] = "replaced"
    rest.ok("entities/upsert", **base, data=rows[1:2])
    got = rest.ok("entities/get", collectionName=name, id=1, outputFields=["tag"])
    assert got == [{"id": 1, "tag": "replaced"}]
    assert rest.ok("collections/get_stats", collectionName=name) == {"rowCount": 4}
    missing = rest.ok("collections/has", dbName="default", collectionName=unique("none"))
    assert missing == {"has": False}


def test_create_quick_with_params(rest: Rest) -> None:
    name = unique("quick")
    params = {"max_length": "32", "shardsNum": 2, "enableDynamicField": "false"}
    body = {"idType": "VarChar", "autoId": False, "primaryFieldName": "key"}
    rest.ok("collections/create", collectionName=name, dimension=2, params=params, **body)
    d = rest.ok("collections/describe", collectionName=name)
    assert d["shardsNum"] == 2 and d["enableDynamicField"] is False
    key = next(f for f in d["fields"] if f["name"] == "key")
    assert key["type"] == "VarChar" and {"key": "max_length", "value": "32"} in key["params"]
    rows = [{"key": "a", "vector": [1.0, 0.0]}]
    assert rest.ok("entities/insert", collectionName=name, data=rows)["insertIds"] == ["a"]
    extra = [{"key": "b", "vector": [1.0, 0.0], "other": 1}]  # no dynamic field
    assert rest.call("entities/insert", collectionName=name, data=extra)["code"] == 1100


def test_create_full_schema_with_index(rest: Rest) -> None:
    name = unique("full")
    schema = {
        "autoId": True,
        "enableDynamicField": False,
        "fields": [
            {"fieldName": "pk", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "emb", "dataType": "FloatVector", "elementTypeParams": {"dim": "4"}},
            {"fieldName": "title", "dataType": "VarChar", "elementTypeParams": {"max_length": 64}},
            {
                "fieldName": "tags",
                "dataType": "Array",
                "elementDataType": "Int32",
                "elementTypeParams": {"max_capacity": 8},
            },
        ],
    }
    index = {"fieldName": "emb", "metricType": "IP", "params": {"index_type": "HNSW", "M": 8}}
    rest.ok("collections/create", collectionName=name, schema=schema, indexParams=[index])
    d = rest.ok("collections/describe", collectionName=name)
    assert d["autoId"] is True and d["enableDynamicField"] is False
    types = {f["name"]: f["type"] for f in d["fields"]}
    assert types == {"pk": "Int64", "emb": "FloatVector", "title": "VarChar", "tags": "Array"}
    assert next(f for f in d["fields"] if f["name"] == "tags")["elementType"] == "Int32"
    ix = rest.ok("indexes/describe", collectionName=name, indexName="emb")
    assert ix[0]["indexType"] == "HNSW" and ix[0]["metricType"] == "IP"
    row = {"emb": [1.0, 0.0, 0.0, 0.0], "title": "a", "tags": [1, 2]}
    ids = rest.ok("entities/insert", collectionName=name, data=[row])["insertIds"]
    assert len(ids) == 1 and isinstance(ids[0], int)
    rest.ok("collections/flush", collectionName=name)
    assert rest.ok("collections/get_stats", collectionName=name) == {"rowCount": 1}


def test_indexes_create_list_drop(rest: Rest) -> None:
    name = unique("ix")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "v", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
        ]
    }
    rest.ok("collections/create", collectionName=name, schema=schema)
    assert rest.ok("indexes/list", collectionName=name) == []
    params = [{"fieldName": "v", "indexName": "v_ix", "metricType": "L2", "indexType": "FLAT"}]
    rest.ok("indexes/create", collectionName=name, indexParams=params)
    assert rest.ok("indexes/list", collectionName=name) == ["v_ix"]
    rest.ok("indexes/drop", collectionName=name, indexName="v_ix")
    assert rest.ok("indexes/list", collectionName=name) == []
    gone = rest.call("indexes/describe", collectionName=name, indexName="v_ix")
    assert gone["code"] == 700  # merr IndexNotFound


def test_rename_drop_load_release(rest: Rest) -> None:
    old, new = unique("old"), unique("new")
    rest.ok("collections/create", collectionName=old, dimension=2)
    assert old in rest.ok("collections/list")
    rest.ok("collections/load", collectionName=old)
    rest.ok("collections/release", collectionName=old)
    rest.ok("collections/rename", collectionName=old, newCollectionName=new)
    names = rest.ok("collections/list")
    assert new in names and old not in names
    rest.ok("collections/drop", collectionName=new)
    assert rest.ok("collections/has", collectionName=new) == {"has": False}
    assert rest.call("collections/describe", collectionName=new)["code"] == 100
    assert rest.call("collections/get_load_state", collectionName=new)["code"] == 100


def test_partitions_and_aliases(rest: Rest) -> None:
    name, other, alias = unique("p"), unique("q"), unique("al")
    rest.ok("collections/create", collectionName=name, dimension=2)
    rest.ok("collections/create", collectionName=other, dimension=2)
    rest.ok("partitions/create", collectionName=name, partitionName="p1")
    assert rest.ok("partitions/list", collectionName=name) == ["_default", "p1"]
    assert rest.ok("partitions/has", collectionName=name, partitionName="p1") == {"has": True}
    rest.ok("partitions/load", collectionName=name, partitionNames=["_default", "p1"])
    rest.ok("partitions/release", collectionName=name, partitionNames=["p1"])
    refused = rest.call("partitions/load", collectionName=name, partitionNames=["p9"])
    assert refused["code"] == 200  # merr PartitionNotFound
    rest.ok("partitions/drop", collectionName=name, partitionName="p1")
    assert rest.ok("partitions/has", collectionName=name, partitionName="p1") == {"has": False}
    rest.ok("aliases/create", collectionName=name, aliasName=alias)
    assert rest.ok("aliases/list", collectionName=name) == [alias]
    described = rest.ok("aliases/describe", aliasName=alias)
    assert described["collectionName"] == name
    rest.ok("aliases/alter", collectionName=other, aliasName=alias)
    assert rest.ok("aliases/describe", aliasName=alias)["collectionName"] == other
    rest.ok("aliases/drop", aliasName=alias)
    assert rest.call("aliases/describe", aliasName=alias)["code"] == 1600  # AliasNotFound


def test_consistency_level_defaults_to_bounded_as_milvus(rest: Rest) -> None:
    """Milvus's REST v2 creates Bounded collections unless told otherwise; reads that name no
    level use the collection's."""
    plain, strong = unique("plain"), unique("strong")
    rest.ok("collections/create", collectionName=plain, dimension=2)
    rest.ok("collections/create", collectionName=strong, dimension=2, consistencyLevel="strong")
    assert rest.ok("collections/describe", collectionName=plain)["consistencyLevel"] == "Bounded"
    assert rest.ok("collections/describe", collectionName=strong)["consistencyLevel"] == "Strong"
    assert rest.client.describe_collection(plain)["consistency_level"] == 2
    bad = {"consistencyLevel": "Sometimes"}
    assert (
        rest.call("collections/create", collectionName=unique("x"), dimension=2, params=bad)["code"]
        == 1100
    )
