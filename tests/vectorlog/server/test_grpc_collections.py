"""Milvus's gRPC protocol, DDL side: an unmodified pymilvus MilvusClient creates, describes,
lists and drops collections, partitions, aliases and indexes on a served vectorlog cluster,
and gets Milvus's error codes."""

from __future__ import annotations

import uuid

import grpc
import pytest
from pymilvus import DataType, MilvusClient, MilvusException
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.vectorlog.server.conftest import Served
from vectorlog.server.grpc_service import MILVUS_VERSION


def unique(prefix: str = "c") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def full_schema() -> object:
    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=16)
    s.add_field("emb", DataType.FLOAT_VECTOR, dim=3)
    s.add_field("year", DataType.INT16)
    s.add_field("tags", DataType.ARRAY, element_type=DataType.INT64, max_capacity=4)
    return s


def test_connect_reports_the_milvus_protocol_version(served: Served) -> None:
    assert served.milvus.get_server_version() == MILVUS_VERSION


def test_quick_setup_collection_is_listed_described_loaded_and_dropped(served: Served) -> None:
    m, name = served.milvus, unique()
    m.create_collection(name, dimension=4, consistency_level="Strong")
    assert m.has_collection(name) and name in m.list_collections()
    d = m.describe_collection(name)
    assert [f["name"] for f in d["fields"]] == ["id", "vector"]
    assert d["fields"][1]["params"] == {"dim": 4} and d["enable_dynamic_field"] is True
    assert m.get_load_state(name)["state"].name == "Loaded"
    assert m.list_indexes(name) == ["vector"]
    assert m.describe_index(name, "vector")["metric_type"] == "COSINE"
    m.drop_collection(name)
    assert not m.has_collection(name) and name not in m.list_collections()


def test_full_schema_with_index_params(served: Served) -> None:
    m, name = served.milvus, unique()
    index_params = MilvusClient.prepare_index_params()
    index_params.add_index("emb", index_type="HNSW", metric_type="L2", params={"M": 8})
    m.create_collection(
        name, schema=full_schema(), index_params=index_params, consistency_level="Strong"
    )
    fields = {f["name"]: f for f in m.describe_collection(name)["fields"]}
    assert fields["pk"]["type"] == DataType.VARCHAR and fields["pk"]["is_primary"]
    assert fields["pk"]["params"]["max_length"] == 16
    assert fields["year"]["type"] == DataType.INT16
    assert fields["tags"]["element_type"] == DataType.INT64
    assert fields["tags"]["params"]["max_capacity"] == 4
    m.insert(
        name,
        [{"pk": f"k{i}", "emb": [float(i), 1.0, 0.0], "year": i, "tags": [i]} for i in range(4)],
    )
    hits = m.search(name, [[2.1, 1.0, 0.0]], limit=2, output_fields=["tags"])
    assert [(h["pk"], h["entity"]["tags"]) for h in hits[0]] == [("k2", [2]), ("k3", [3])]
    assert [r["pk"] for r in m.get(name, ids=["k1", "k9"])] == ["k1"]
    index = m.describe_index(name, "emb")
    assert (index["index_type"], index["metric_type"], index["params"]) == ("HNSW", "L2", {"M": 8})
    assert served.client.describe_index(name, "emb")["params"] == {"M": 8}


def test_partitions(served: Served) -> None:
    m, name = served.milvus, unique()
    m.create_collection(name, dimension=2, consistency_level="Strong")
    m.create_partition(name, "p1")
    assert m.has_partition(name, "p1") and not m.has_partition(name, "p2")
    assert m.list_partitions(name) == ["_default", "p1"]
    m.insert(name, [{"id": 1, "vector": [1.0, 0.0]}], partition_name="p1")
    m.insert(name, [{"id": 2, "vector": [0.0, 1.0]}])
    assert [r["id"] for r in m.query(name, "id > 0", partition_names=["p1"])] == [1]
    m.release_partitions(name, ["p1"])
    m.drop_partition(name, "p1")
    assert m.list_partitions(name) == ["_default"]


def test_aliases(served: Served) -> None:
    m, a, b, alias = served.milvus, unique(), unique(), unique("al")
    m.create_collection(a, dimension=2, consistency_level="Strong")
    m.create_collection(b, dimension=2, consistency_level="Strong")
    m.create_alias(a, alias)
    assert m.describe_alias(alias)["collection_name"] == a
    assert m.list_aliases(a)["aliases"] == [alias]
    m.insert(b, [{"id": 7, "vector": [1.0, 0.0]}])
    m.alter_alias(b, alias)
    assert [r["id"] for r in m.query(alias, "id > 0")] == [7]
    m.drop_alias(alias)
    assert m.list_aliases(b)["aliases"] == []


def test_missing_things_raise_milvus_error_codes(served: Served) -> None:
    m = served.milvus
    with pytest.raises(MilvusException) as exc:
        m.describe_collection("no_such_collection")
    assert exc.value.code == 100 and "no_such_collection" in exc.value.message
    with pytest.raises(MilvusException) as exc:
        m.query("no_such_collection", "id > 0")
    assert exc.value.code == 100
    with pytest.raises(MilvusException) as exc:
        m.describe_alias("no_such_alias")
    assert exc.value.code == 1600
    name = unique()
    m.create_collection(name, dimension=2, consistency_level="Strong")
    with pytest.raises(MilvusException) as exc:
        m.create_partition(name, "bad name!")
    assert exc.value.code == 1100
    assert m.describe_index(name, "no_such_index") is None  # pymilvus's answer to code 700


def test_rename_load_release_and_loading_progress(served: Served) -> None:
    m, old, new = served.milvus, unique(), unique()
    m.create_collection(old, dimension=2, consistency_level="Strong")
    m.rename_collection(old, new)
    assert m.has_collection(new) and not m.has_collection(old)
    m.release_collection(new)
    assert m.get_load_state(new)["state"].name == "NotLoad"
    m.load_collection(new)
    assert m.get_load_state(new)["state"].name == "Loaded"
    with pytest.raises(MilvusException) as exc:
        m.load_collection(old)
    assert exc.value.code == 100


def test_alloc_timestamp_is_fresh_and_increasing(served: Served) -> None:
    with grpc.insecure_channel(served.address) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        first = stub.AllocTimestamp(milvus_pb2.AllocTimestampRequest())
        second = stub.AllocTimestamp(milvus_pb2.AllocTimestampRequest())
    assert first.status.code == 0 and 0 < first.timestamp < second.timestamp


def test_consistency_level_is_the_collections_as_milvus(served: Served) -> None:
    """pymilvus creates Bounded collections unless told otherwise (Milvus's default); the level
    is stored and described, and a level that is not one is refused."""
    m, plain, session = served.milvus, unique("plain"), unique("session")
    m.create_collection(plain, dimension=2)
    m.create_collection(session, dimension=2, consistency_level="Session")
    assert m.describe_collection(plain)["consistency_level"] == 2  # Bounded
    assert m.describe_collection(session)["consistency_level"] == 1
    assert served.client.describe_collection(plain)["consistency_level"] == 2
    assert m.describe_collection(plain)["properties"] == {}
    m.insert(session, [{"id": 1, "vector": [1.0, 0.0]}])
    assert m.get(session, [1], output_fields=["id"]) == [{"id": 1}]  # Session: its own write
