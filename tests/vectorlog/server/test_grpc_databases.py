"""Databases over Milvus's protocols (issue 26): vectorlog has Milvus's "default" database
only. It is listed and described as Milvus does; creating another is refused as not
supported (merr 10); every call naming another database (pymilvus's `db_name`, sent as the
`dbname` metadata, a request's db_name, REST's dbName) is refused with Milvus's "database
not found" (merr 800) and writes nothing."""

from __future__ import annotations

import uuid

import grpc
import pytest
from pymilvus import MilvusClient
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.server.rest_support import Rest, rest_fixture

NOT_FOUND = "database not found[database=tenant_a]"
rest = rest_fixture()


@pytest.fixture
def name(served: Served) -> str:
    """A collection of the default database with one row."""
    name = f"db_{uuid.uuid4().hex[:8]}"
    served.milvus.create_collection(name, dimension=2, consistency_level="Strong")
    served.milvus.insert(name, [{"id": 1, "vector": [1.0, 0.0]}])
    return name


def count(served: Served, name: str) -> int:
    rows = served.milvus.query(name, output_fields=["count(*)"])
    return int(rows[0]["count(*)"])


def test_the_default_database_is_listed_and_described(served: Served) -> None:
    assert served.milvus.list_databases() == ["default"]
    assert served.milvus.describe_database("default")["name"] == "default"


def test_another_database_cannot_be_created_described_or_used(served: Served, name: str) -> None:
    with pytest.raises(MilvusException) as err:
        served.milvus.create_database("tenant_a")
    assert err.value.code == 10 and "not supported" in err.value.message
    with pytest.raises(MilvusException) as err:
        served.milvus.describe_database("tenant_a")
    assert (err.value.code, err.value.message) == (800, NOT_FOUND)
    with pytest.raises(MilvusException) as err:
        served.milvus.drop_database("default")
    assert "can not drop default database" in err.value.message
    assert served.milvus.list_databases() == ["default"]


def test_calls_naming_another_database_are_refused_and_write_nothing(
    served: Served, name: str
) -> None:
    tenant = MilvusClient(f"http://{served.address}", db_name="tenant_a")
    try:
        for call in (
            lambda: tenant.insert(name, [{"id": 2, "vector": [0.0, 1.0]}]),
            lambda: tenant.query(name, output_fields=["count(*)"]),
            lambda: tenant.create_collection(f"{name}_x", dimension=2),
            lambda: tenant.list_collections(),
            lambda: tenant.search(name, [[1.0, 0.0]], limit=1),
        ):
            with pytest.raises(MilvusException) as err:
                call()
            assert (err.value.code, err.value.message) == (800, NOT_FOUND)
    finally:
        tenant.close()
    served.milvus.use_database("default")
    assert count(served, name) == 1
    assert f"{name}_x" not in served.milvus.list_collections()


def test_a_request_db_name_is_refused_too(served: Served, name: str) -> None:
    with grpc.insecure_channel(served.address) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        res = stub.HasCollection(
            milvus_pb2.HasCollectionRequest(db_name="tenant_a", collection_name=name)
        )
        assert (res.status.code, res.status.reason) == (800, NOT_FOUND)
        res = stub.HasCollection(
            milvus_pb2.HasCollectionRequest(db_name="default", collection_name=name)
        )
        assert res.status.code == 0 and res.value


def test_rest_db_name_other_than_default_is_refused(rest: Rest) -> None:
    envelope = rest.call("collections/list", dbName="tenant_a")
    assert (envelope["code"], envelope["message"]) == (800, NOT_FOUND)
    body = {"collectionName": "never", "dimension": 2, "dbName": "tenant_a"}
    assert rest.call("collections/create", **body)["code"] == 800
    assert "never" not in rest.ok("collections/list")
