"""Users, roles and privileges with `--authorization` (issue 26), through an unmodified
pymilvus and REST v2: root logs in with Milvus's default password; a user without the
privilege a call needs is refused with gRPC PERMISSION_DENIED and Milvus's message and
nothing is written; grants are per object and per database; a user may change its own
password; no password ever reaches the log in clear."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from pymilvus import MilvusClient, MilvusException
from starlette.testclient import TestClient

from tests.support import log_params
from tests.vectorlog.server.cluster import cluster_client
from vectorlog import Client
from vectorlog.schemas.serde import EventSerde
from vectorlog.server.grpc_server import GrpcServer, start_grpc
from vectorlog.server.rest_app import rest_app
from vectorlog.streams.scan import read_all

ROOT = "root:Milvus"


@dataclass
class Secured:
    client: Client
    server: GrpcServer
    root: MilvusClient

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def login(self, user: str, password: str) -> MilvusClient:
        return MilvusClient(self.uri, token=f"{user}:{password}")


@pytest.fixture(scope="module", params=log_params())
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secured]:
    client = cluster_client(request, tmp_path_factory, "rbac")
    server = start_grpc(client, "127.0.0.1:0", max_workers=4, authorization=True)
    root = MilvusClient(f"http://127.0.0.1:{server.port}", token=ROOT)
    try:
        yield Secured(client, server, root)
    finally:
        root.close()
        server.stop(grace=1.0)
        client.close()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def denied(call: Any) -> str:
    """Returns the details of the PERMISSION_DENIED `call` fails with."""
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    return str(err.value.details())


def count(client: MilvusClient, name: str) -> int:
    return int(client.query(name, output_fields=["count(*)"])[0]["count(*)"])


@pytest.fixture
def user(secured: Secured) -> Iterator[tuple[str, MilvusClient]]:
    """A fresh user with no role, logged in."""
    name = unique("u")
    secured.root.create_user(name, "secret123")
    client = secured.login(name, "secret123")
    yield name, client
    client.close()
    secured.root.drop_user(name)


def test_root_logs_in_with_milvus_default_password_and_others_do_not(secured: Secured):
    assert "root" in secured.root.list_users()
    with grpc.insecure_channel(secured.uri.removeprefix("http://")) as channel:
        call = channel.unary_unary("/milvus.proto.milvus.MilvusService/ShowCollections")
        wrong = base64.b64encode(b"root:wrong").decode()
        with pytest.raises(grpc.RpcError) as err:
            call(b"", metadata=[("authorization", wrong)])
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            call(b"")
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_user_without_the_privilege_is_refused_and_nothing_is_written(
    secured: Secured, user: tuple[str, MilvusClient]
):
    name, client = user
    docs = unique("docs")
    secured.root.create_collection(docs, dimension=2, consistency_level="Strong")
    message = denied(lambda: client.insert(docs, [{"id": 1, "vector": [1.0, 0.0]}]))
    assert message == f"PrivilegeInsert: permission deny to {name} in the `default` database"
    assert count(secured.root, docs) == 0
    assert "PrivilegeCreateCollection" in denied(
        lambda: client.create_collection(unique("x"), dimension=2)
    )
    assert client.list_collections() == []  # allowed, but it may see none of them
    role = unique("writer")
    secured.root.create_role(role)
    secured.root.grant_privilege(role, "Collection", "Insert", docs)
    secured.root.grant_role(name, role)
    client.insert(docs, [{"id": 1, "vector": [1.0, 0.0]}])
    assert count(secured.root, docs) == 1
    other = unique("other")
    secured.root.create_collection(other, dimension=2)
    denied(lambda: client.insert(other, [{"id": 1, "vector": [1.0, 0.0]}]))  # per object
    secured.root.revoke_privilege(role, "Collection", "Insert", docs)
    denied(lambda: client.insert(docs, [{"id": 2, "vector": [0.0, 1.0]}]))
    assert count(secured.root, docs) == 1
    secured.root.revoke_role(name, role)
    secured.root.drop_role(role)


def test_grants_hold_in_their_database_only(secured: Secured, user: tuple[str, MilvusClient]):
    name, client = user
    db = unique("db")
    secured.root.create_database(db)
    role = unique("reader")
    secured.root.create_role(role)
    secured.root.grant_privilege(role, "Global", "CreateCollection", "*", db_name=db)
    secured.root.grant_privilege(role, "Collection", "All", "*", db_name=db)  # index, load
    secured.root.grant_role(name, role)
    denied(lambda: client.create_collection(unique("d"), dimension=2))  # in default: no
    tenant = MilvusClient(secured.uri, token=f"{name}:secret123", db_name=db)
    made = unique("t")
    tenant.create_collection(made, dimension=2)
    assert made in MilvusClient(secured.uri, token=ROOT, db_name=db).list_collections()
    tenant.close()


def test_admin_members_may_do_anything(secured: Secured, user: tuple[str, MilvusClient]):
    name, client = user
    secured.root.grant_role(name, "admin")
    made = unique("admin")
    client.create_collection(made, dimension=2)
    client.create_role(unique("r"))
    assert made in secured.root.list_collections()


def test_a_user_changes_its_own_password_and_no_other(
    secured: Secured, user: tuple[str, MilvusClient]
):
    name, client = user
    bystander = unique("b")
    secured.root.create_user(bystander, "secret123")
    assert "PrivilegeUpdateUser" in denied(
        lambda: client.update_password(bystander, "secret123", "hijacked1")
    )
    client.update_password(name, "secret123", "changed12")
    assert secured.login(name, "changed12").describe_user(name)["user_name"] == name
    with pytest.raises(MilvusException):
        secured.root.update_password(name, "wrong-old", "changed34")
    secured.root.drop_user(bystander)


def test_milvus_refusals_of_rbac_calls(secured: Secured):
    role = unique("r")
    secured.root.create_role(role)
    with pytest.raises(MilvusException) as err:
        secured.root.grant_privilege(role, "Collection", "Fly", "*")
    assert "not found the privilege name[Fly]" in err.value.message
    assert secured.root.describe_role(role)["privileges"] == []
    with pytest.raises(MilvusException) as err:
        secured.root.drop_user("root")
    assert "root user cannot be deleted" in err.value.message
    with pytest.raises(MilvusException) as err:
        secured.root.drop_role("admin")
    assert "default role" in err.value.message


def test_no_password_reaches_the_log_in_clear(secured: Secured):
    name = unique("hidden")
    password = f"pw_{uuid.uuid4().hex}"
    secured.root.create_user(name, password)
    secured.root.update_password(name, password, password + "2")
    cluster = secured.client.cluster
    records = list(read_all(cluster.log, cluster.topics.ddl, idle=0.5))
    serde = EventSerde()
    assert password.encode() not in b"".join(r.value for r in records)
    events = [serde.decode(r.value) for r in records]
    mine = [e for e in events if isinstance(e.body, dict) and e.body.get("user_name") == name]
    assert [e.type for e in mine] == ["UserCreated", "UserPasswordUpdated"]
    assert all(e.body["password_hash"].startswith("pbkdf2_sha256$") for e in mine)


def test_rest_users_log_in_and_need_privileges(secured: Secured):
    name = unique("rest")
    secured.root.create_user(name, "secret123")
    docs = unique("rdocs")
    secured.root.create_collection(docs, dimension=2)
    with TestClient(rest_app(secured.client, authorization=True)) as http:

        def call(token: str, endpoint: str, **body: Any) -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {token}"}
            res = http.post(f"/v2/vectordb/{endpoint}", json=body, headers=headers)
            envelope: dict[str, Any] = res.json()
            return envelope

        assert call("root:wrong", "collections/list")["code"] == 1800
        refused = call(f"{name}:secret123", "entities/insert", collectionName=docs, data=[])
        assert refused["code"] == 65535
        assert refused["message"] == (
            f"PrivilegeInsert: permission deny to {name} in the `default` database"
        )
        role = unique("rrole")
        assert call(ROOT, "roles/create", roleName=role)["code"] == 0
        grant = {"roleName": role, "objectType": "Collection", "objectName": docs}
        assert call(ROOT, "roles/grant_privilege", privilege="Insert", **grant)["code"] == 0
        assert call(ROOT, "users/grant_role", userName=name, roleName=role)["code"] == 0
        row = {"id": 1, "vector": [1.0, 0.0]}
        inserted = call(f"{name}:secret123", "entities/insert", collectionName=docs, data=[row])
        assert inserted["code"] == 0
        assert call(ROOT, "users/describe", userName=name)["data"] == [role]


def test_the_console_and_metrics_answer_root_and_admins_only(
    secured: Secured, user: tuple[str, MilvusClient]
):
    """Both show every database, the dead letters and the log's events: a user with a role
    of its own may not see them, root and the admin role's members may."""
    name, _ = user
    with TestClient(rest_app(secured.client, authorization=True)) as http:

        def status(path: str, token: str) -> int:
            return http.get(path, headers={"Authorization": f"Bearer {token}"}).status_code

        paths = ("/console/api/collections", "/console/api/events", "/console/api/jobs")
        for path in (*paths, "/metrics"):
            assert status(path, f"{name}:secret123") == 401, path
            assert status(path, "root:wrong") == 401, path
            assert status(path, ROOT) == 200, path
        secured.root.grant_role(name, "admin")
        assert status("/console/api/collections", f"{name}:secret123") == 200


def test_a_user_lists_only_the_collections_it_has_a_privilege_on(
    secured: Secured, user: tuple[str, MilvusClient]
):
    """As Milvus's ShowCollections: names are filtered by the caller's grants (gRPC and
    REST); root sees every one."""
    name, client = user
    mine, other = unique("mine"), unique("other")
    for collection in (mine, other):
        secured.root.create_collection(collection, dimension=2)
    assert {mine, other} <= set(secured.root.list_collections())
    assert client.list_collections() == []
    role = unique("lister")
    secured.root.create_role(role)
    secured.root.grant_privilege(role, "Collection", "Query", mine)
    secured.root.grant_role(name, role)
    assert client.list_collections() == [mine]
    with TestClient(rest_app(secured.client, authorization=True)) as http:
        headers = {"Authorization": f"Bearer {name}:secret123"}
        listed = http.post("/v2/vectordb/collections/list", json={}, headers=headers).json()
    assert listed["data"] == [mine]


def test_a_granted_privilege_group_permits_what_it_holds_at_each_call(
    secured: Secured, user: tuple[str, MilvusClient]
):
    """grant_privilege_v2 of a custom group on one collection: the role may do what the
    group holds there and nowhere else; a privilege added to the group counts at once."""
    name, client = user
    docs, other = unique("gdocs"), unique("gother")
    for collection in (docs, other):
        secured.root.create_collection(collection, dimension=2, consistency_level="Strong")
    group, role = unique("grp"), unique("grole")
    secured.root.create_privilege_group(group)
    secured.root.add_privileges_to_group(group, ["Query", "Search"])
    secured.root.create_role(role)
    secured.root.grant_privilege_v2(role, group, docs, db_name="default")
    secured.root.grant_role(name, role)
    [held] = secured.root.describe_role(role)["privileges"]
    assert (held["object_type"], held["object_name"], held["db_name"], held["privilege"]) == (
        "Global",
        docs,
        "default",
        group,
    )
    assert client.query(docs, "id >= 0", output_fields=["id"]) == []
    assert "PrivilegeQuery" in denied(lambda: client.query(other, "id >= 0"))
    row = {"id": 1, "vector": [1.0, 0.0]}
    assert "PrivilegeInsert" in denied(lambda: client.insert(docs, [row]))
    secured.root.add_privileges_to_group(group, ["Insert"])
    client.insert(docs, [row])
    assert count(secured.root, docs) == 1
    with pytest.raises(MilvusException) as err:
        secured.root.drop_privilege_group(group)
    assert f"privilege group [{group}] is used by role [{role}]" in err.value.message
    secured.root.revoke_privilege_v2(role, group, docs, db_name="default")
    assert "PrivilegeQuery" in denied(lambda: client.query(docs, "id >= 0"))
    secured.root.drop_privilege_group(group)
    assert group not in {g["privilege_group"] for g in secured.root.list_privilege_groups()}


def test_built_in_groups_grant_their_level_as_milvus_defines_it(
    secured: Secured, user: tuple[str, MilvusClient]
):
    name, client = user
    docs = unique("bdocs")
    secured.root.create_collection(docs, dimension=2, consistency_level="Strong")
    role = unique("brole")
    secured.root.create_role(role)
    secured.root.grant_role(name, role)
    assert "PrivilegeCreateCollection" in denied(
        lambda: client.create_collection(unique("b"), dimension=2)
    )
    secured.root.grant_privilege_v2(role, "CollectionReadWrite", docs, db_name="default")
    client.insert(docs, [{"id": 7, "vector": [0.0, 1.0]}])
    assert "PrivilegeDropAlias" in denied(lambda: client.drop_alias(unique("a")))
    secured.root.grant_privilege_v2(role, "DatabaseAdmin", "*", db_name="default")
    # quick setup also indexes and loads the new collection: collection-level privileges
    secured.root.grant_privilege_v2(role, "CollectionReadWrite", "*", db_name="default")
    made = unique("b")
    client.create_collection(made, dimension=2)
    assert made in secured.root.list_collections()
    assert "PrivilegeCreateDatabase" in denied(lambda: client.create_database(unique("db")))
    with pytest.raises(MilvusException) as err:
        secured.root.grant_privilege_v2(role, "ClusterAdmin", "*", db_name="default")
    assert "dbName and collectionName should be * for the cluster level privilege" in (
        err.value.message
    )
    secured.root.grant_privilege_v2(role, "ClusterAdmin", "*", db_name="*")
    db = unique("db")
    client.create_database(db)
    assert db in secured.root.list_databases()
    listed = {g["privilege_group"]: g["privileges"] for g in secured.root.list_privilege_groups()}
    assert "CreateDatabase" in listed["ClusterAdmin"]
    plain = _fresh(secured)
    assert "PrivilegeCreatePrivilegeGroup" in denied(lambda: plain.create_privilege_group("g"))
    plain.close()


def _fresh(secured: Secured) -> MilvusClient:
    """Returns a client of a new user with no role."""
    name = unique("plain")
    secured.root.create_user(name, "secret123")
    return secured.login(name, "secret123")


def test_rest_privilege_groups_and_v2_grants(secured: Secured):
    name = unique("restg")
    secured.root.create_user(name, "secret123")
    docs = unique("rgdocs")
    secured.root.create_collection(docs, dimension=2)
    group, role = unique("rgrp"), unique("rgrole")
    with TestClient(rest_app(secured.client, authorization=True)) as http:

        def call(token: str, endpoint: str, **body: Any) -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {token}"}
            envelope: dict[str, Any] = http.post(
                f"/v2/vectordb/{endpoint}", json=body, headers=headers
            ).json()
            return envelope

        user = f"{name}:secret123"
        refused = call(user, "privilege_groups/create", privilegeGroupName=group)
        assert refused["code"] == 65535 and "PrivilegeCreatePrivilegeGroup" in refused["message"]
        assert call(ROOT, "privilege_groups/create", privilegeGroupName=group)["code"] == 0
        added = call(
            ROOT,
            "privilege_groups/add_privileges_to_group",
            privilegeGroupName=group,
            privileges=["Insert", "Query"],
        )
        assert added["code"] == 0
        listed = call(ROOT, "privilege_groups/list")["data"]["privilegeGroups"]
        mine = [g for g in listed if g["privilegeGroupName"] == group]
        assert mine == [{"privilegeGroupName": group, "privileges": "Insert,Query"}]
        assert call(ROOT, "roles/create", roleName=role)["code"] == 0
        grant = {"roleName": role, "privilege": group, "collectionName": docs, "dbName": "default"}
        assert call(ROOT, "roles/grant_privilege_v2", **grant)["code"] == 0
        assert call(ROOT, "users/grant_role", userName=name, roleName=role)["code"] == 0
        row = {"id": 1, "vector": [1.0, 0.0]}
        assert call(user, "entities/insert", collectionName=docs, data=[row])["code"] == 0
        removed = call(
            ROOT,
            "privilege_groups/remove_privileges_from_group",
            privilegeGroupName=group,
            privileges=["Insert"],
        )
        assert removed["code"] == 0
        again = call(user, "entities/insert", collectionName=docs, data=[row])
        assert again["code"] == 65535
        assert call(ROOT, "roles/revoke_privilege_v2", **grant)["code"] == 0
        assert call(ROOT, "privilege_groups/drop", privilegeGroupName=group)["code"] == 0
        bad = call(ROOT, "roles/grant_privilege_v2", **{**grant, "privilege": "Fly"})
        assert bad["code"] != 0 and "not found the privilege name[Fly]" in bad["message"]


def test_user_and_role_descriptions_are_set_described_and_altered(secured: Secured):
    """pymilvus's create_user/create_role `description`, update_user and alter_role; a user
    without CreateOwnership may not alter a role."""
    name, role = unique("desc"), unique("drole")
    secured.root.create_user(name, "secret123", description="on call")
    assert secured.root.describe_user(name)["description"] == "on call"
    secured.root.update_user(name, "retired")
    described = secured.login(name, "secret123").describe_user(name)
    assert (described["user_name"], described["description"]) == (name, "retired")
    secured.root.create_role(role, description="readers")
    assert secured.root.describe_role(role)["description"] == "readers"
    secured.root.alter_role(role, "writers")
    assert secured.root.describe_role(role)["description"] == "writers"
    plain = secured.login(name, "secret123")
    assert "PrivilegeCreateOwnership" in denied(lambda: plain.alter_role(role, "mine"))
    assert secured.root.describe_role(role)["description"] == "writers"
    with pytest.raises(MilvusException) as err:
        secured.root.alter_role(unique("ghost"), "x")
    assert "not found the role" in err.value.message
    plain.close()
