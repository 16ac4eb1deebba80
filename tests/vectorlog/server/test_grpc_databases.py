"""Databases over Milvus's protocols (issue 26): create, list, describe, alter and drop
through an unmodified pymilvus (MilvusClient and ORM `db`), REST v2 /databases/*, and every
collection call in the database it names (pymilvus's `dbname` metadata, a request's
db_name, REST's dbName); the same name in two databases is two collections; Milvus's rules
and messages (default undroppable, a database with collections undroppable, an unknown
database merr 800), refused before anything is written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import pytest
from pymilvus import MilvusClient, connections, db
from pymilvus.exceptions import MilvusException
from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

from tests.vectorlog.server.conftest import Served
from tests.vectorlog.server.rest_support import Rest, rest_fixture

rest = rest_fixture()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class Tenant(MilvusClient):
    """A pymilvus client of a database, knowing its name."""

    db_name: str


@pytest.fixture
def tenant(served: Served) -> Iterator[Tenant]:
    """A pymilvus client of a fresh database (dropped with its collections afterwards)."""
    name = unique("tenant")
    served.milvus.create_database(name, properties={"team": "search"})
    client = Tenant(f"http://{served.address}", db_name=name)
    client.db_name = name
    yield client
    for collection in client.list_collections():
        client.drop_collection(collection)
    client.close()
    served.milvus.drop_database(name)


def refused(call: object) -> tuple[int, str]:
    with pytest.raises(MilvusException) as err:
        call()  # type: ignore[operator]
    return err.value.code, err.value.message


def test_databases_are_created_listed_described_altered_and_dropped(served: Served) -> None:
    name = unique("db")
    served.milvus.create_database(name, properties={"database.max.collections": 5})
    assert name in served.milvus.list_databases()
    assert served.milvus.list_databases()[0] == "default"
    assert served.milvus.describe_database(name) == {
        "name": name,
        "database.max.collections": "5",
    }
    served.milvus.alter_database_properties(name, {"team": "a"})
    served.milvus.drop_database_properties(name, ["database.max.collections"])
    assert served.milvus.describe_database(name) == {"name": name, "team": "a"}
    assert refused(lambda: served.milvus.create_database(name)) == (
        65535,
        f"database already exist: {name}",
    )
    served.milvus.drop_database(name)
    assert name not in served.milvus.list_databases()
    served.milvus.drop_database(name)  # a missing database: a no-op, as Milvus


def test_milvus_refusals_of_database_calls(served: Served) -> None:
    assert refused(lambda: served.milvus.describe_database("nope")) == (
        800,
        "database not found[database=nope]",
    )
    code, message = refused(lambda: served.milvus.drop_database("default"))
    assert (code, message) == (65535, "can not drop default database")
    code, message = refused(lambda: served.milvus.create_database("1bad"))
    assert code == 802 and message.endswith("invalid database name[database=1bad]")
    assert "1bad" not in served.milvus.list_databases()


def test_the_same_name_in_two_databases_is_two_collections(served: Served, tenant: Tenant) -> None:
    name = unique("docs")
    served.milvus.create_collection(name, dimension=2, consistency_level="Strong")
    tenant.create_collection(name, dimension=3, consistency_level="Strong")
    tenant.insert(name, [{"id": 7, "vector": [1.0, 0.0, 0.0]}])
    assert tenant.query(name, output_fields=["count(*)"])[0]["count(*)"] == 1
    assert served.milvus.query(name, output_fields=["count(*)"])[0]["count(*)"] == 0
    assert tenant.describe_collection(name)["fields"][1]["params"]["dim"] == 3
    assert served.milvus.describe_collection(name)["fields"][1]["params"]["dim"] == 2
    assert tenant.list_collections() == [name]
    hits = tenant.search(name, [[1.0, 0.0, 0.0]], limit=1)
    assert [h["id"] for h in hits[0]] == [7]
    served.milvus.drop_collection(name)
    assert tenant.has_collection(name)


def test_a_database_with_collections_is_not_dropped(served: Served, tenant: Tenant) -> None:
    name = unique("kept")
    tenant.create_collection(name, dimension=2)
    db_name = tenant.db_name
    code, message = refused(lambda: served.milvus.drop_database(db_name))
    assert (code, message) == (
        65535,
        f"database:{db_name} not empty, must drop all collections before drop database",
    )
    assert tenant.has_collection(name)


def test_calls_in_an_unknown_database_are_refused_and_write_nothing(served: Served) -> None:
    gone = MilvusClient(f"http://{served.address}", db_name="tenant_gone")
    not_found = (800, "database not found[database=tenant_gone]")
    try:
        assert refused(lambda: gone.create_collection("c", dimension=2)) == not_found
        assert refused(lambda: gone.list_collections()) == not_found
        assert refused(lambda: gone.insert("c", [{"id": 1, "vector": [1.0, 0.0]}])) == not_found
        assert refused(lambda: gone.search("c", [[1.0, 0.0]], limit=1)) == not_found
    finally:
        gone.close()
    with grpc.insecure_channel(served.address) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        res = stub.HasCollection(
            milvus_pb2.HasCollectionRequest(db_name="tenant_gone", collection_name="x")
        )
        assert (res.status.code, res.status.reason) == (
            800,
            "database not found[database=tenant_gone]",
        )
        res = stub.ShowCollections(
            milvus_pb2.ShowCollectionsRequest(), metadata=[("dbname", "tenant_gone")]
        )
        assert res.status.code == 800
    assert "tenant_gone" not in served.milvus.list_databases()


def test_a_request_db_name_addresses_its_database(served: Served, tenant: Tenant) -> None:
    name = unique("raw")
    tenant.create_collection(name, dimension=2)
    db_name = tenant.db_name
    with grpc.insecure_channel(served.address) as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        ask = milvus_pb2.HasCollectionRequest
        assert stub.HasCollection(ask(db_name=db_name, collection_name=name)).value
        assert not stub.HasCollection(ask(db_name="default", collection_name=name)).value
        described = stub.DescribeCollection(
            milvus_pb2.DescribeCollectionRequest(db_name=db_name, collection_name=name)
        )
        assert (described.status.code, described.db_name) == (0, db_name)


@pytest.mark.filterwarnings("ignore:.*ORM-style PyMilvus API")
def test_the_orm_db_module(served: Served) -> None:
    alias = unique("orm")
    host, port = served.address.split(":")
    connections.connect(alias, host=host, port=port)
    try:
        name = unique("ormdb")
        db.create_database(name, using=alias)
        assert name in db.list_database(using=alias)
        db.using_database(name, using=alias)
        db.drop_database(name, using=alias)
        assert name not in db.list_database(using=alias)
    finally:
        connections.disconnect(alias)


def test_rest_databases_and_db_name(rest: Rest) -> None:
    name = unique("restdb")
    rest.ok("databases/create", dbName=name, properties={"team": "a"})
    assert name in rest.ok("databases/list")
    described = rest.ok("databases/describe", dbName=name)
    assert described["dbName"] == name
    assert described["properties"] == [{"key": "team", "value": "a"}]
    rest.ok("collections/create", dbName=name, collectionName="c", dimension=2)
    assert rest.ok("collections/list", dbName=name) == ["c"]
    assert "c" not in rest.ok("collections/list")
    refusal = rest.call("databases/drop", dbName=name)
    assert refusal["code"] == 65535 and "not empty" in refusal["message"]
    gone = rest.call("collections/list", dbName="rest_gone")
    assert (gone["code"], gone["message"]) == (800, "database not found[database=rest_gone]")
    rest.ok("collections/drop", dbName=name, collectionName="c")
    rest.ok("databases/drop", dbName=name)
    assert name not in rest.ok("databases/list")
