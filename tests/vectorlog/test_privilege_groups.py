"""Privilege groups through the in-process Client (issue 26): custom groups and v2 grants
are DDL events on the log, so they survive a restart and a rebuild of rootcoord's meta from
the log; Milvus's rules refuse bad input before anything is written."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory, ddl_changes
from tests.vectorlog.test_ddl_crash import state_dir
from tests.vectorlog.test_rebuild import source_config
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.core.errors import InvalidArgument, VectorlogError
from vectorlog.core.privilege_groups import BUILTIN_GROUPS
from vectorlog.jobs.rebuild import rebuild


@pytest.fixture
def client(shared_client: Client) -> Client:
    """A database of its own on a cluster the module shares (tests/clients.py); privilege
    groups and roles are the cluster's, so the tests that share it name theirs uniquely."""
    return shared_client


def groups(client: Any) -> dict[str, list[str]]:
    return {g["privilege_group"]: list(g["privileges"]) for g in client.list_privilege_groups()}


def test_groups_and_v2_grants_survive_a_restart_and_a_meta_rebuild(
    open_client: ClientFactory, client_args: dict[str, Any]
):
    client = open_client()
    client.create_privilege_group("search_only")
    client.add_privileges_to_group("search_only", ["Search", "Query", "Load"])
    client.remove_privileges_from_group("search_only", ["Load"])
    client.create_role("analyst")
    client.grant_privilege_v2("analyst", "search_only", "docs")
    client.grant_privilege_v2("analyst", "DatabaseReadOnly", "*", db_name="default")
    expected = client.describe_role("analyst")
    client.close()
    reopened = open_client()
    assert groups(reopened)["search_only"] == ["Query", "Search"]
    assert reopened.describe_role("analyst") == expected
    reopened.close()
    shutil.rmtree(state_dir(client_args))
    rebuilt = open_client()
    assert groups(rebuilt)["search_only"] == ["Query", "Search"]
    assert rebuilt.describe_role("analyst") == expected
    rebuilt.revoke_privilege_v2("analyst", "search_only", "docs")
    rebuilt.drop_privilege_group("search_only")
    assert "search_only" not in groups(rebuilt)
    rebuilt.close()


def test_the_built_in_groups_are_listed_with_milvus_privileges(client: Client):
    listed = groups(client)
    assert {k: v for k, v in listed.items() if k in BUILTIN_GROUPS} == {
        k: list(v) for k, v in BUILTIN_GROUPS.items()
    }
    assert listed["CollectionReadOnly"][:3] == ["Query", "Search", "IndexDetail"]
    assert "CreateCollection" in listed["DatabaseAdmin"]
    assert "ListPrivilegeGroups" in listed["ClusterReadOnly"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c, g, r: c.create_privilege_group(""), "privilege group name should not be empty"),
        (lambda c, g, r: c.create_privilege_group("a-b"), "can only contain numbers, letters"),
        (lambda c, g, r: c.create_privilege_group("CollectionAdmin"), "defined by built in"),
        (
            lambda c, _g, _r: c.add_privileges_to_group("ghost", ["Search"]),
            r"no privilege group name",
        ),
        (lambda c, g, r: c.add_privileges_to_group(g, []), "privileges is empty"),
        (
            lambda c, g, _: c.add_privileges_to_group(g, ["Search", "DropDatabase"]),
            "same privilege",
        ),
        (
            lambda c, _, r: c.grant_privilege_v2(r, "Fly", "*"),
            r"not found the privilege name\[Fly\]",
        ),
        (
            lambda c, g, r: c.grant_privilege_v2(r, "DatabaseAdmin", "docs"),
            "collectionName should be \\* for the database level privilege: DatabaseAdmin",
        ),
        (
            lambda c, g, r: c.grant_privilege_v2(r, "CollectionAdmin", "docs", db_name="*"),
            "please specify database name for the collection level privilege",
        ),
        (
            lambda c, g, r: c.grant_privilege(r, "Collection", "CollectionAdmin", "*"),
            r"can not operate the built-in privilege group \[CollectionAdmin\]",
        ),
    ],
)
def test_bad_group_calls_are_refused_before_anything_is_written(
    client: Client, call: Any, message: str
):
    g, r = f"g{uuid.uuid4().hex[:8]}", f"r{uuid.uuid4().hex[:8]}"  # the cluster is shared
    client.create_privilege_group(g)
    client.create_role(r)
    before = len(ddl_changes(client))
    with pytest.raises(InvalidArgument, match=message) as err:
        call(client, g, r)
    assert isinstance(err.value, VectorlogError)
    assert len(ddl_changes(client)) == before


@pytest.mark.usefixtures("spark")
def test_a_rebuild_as_of_a_past_time_has_the_groups_of_that_time(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    source = open_client()
    source.create_privilege_group("g")
    source.add_privileges_to_group("g", ["Search"])
    source.create_collection("c", dimension=2)
    at = int(source.insert("c", [{"id": 1, "vector": [1.0, 0.0]}])["timestamp"])
    source.add_privileges_to_group("g", ["Query"])
    source.create_privilege_group("later")
    source.insert("c", [{"id": 2, "vector": [0.0, 1.0]}])
    source.close()
    report = rebuild(source_config(client_args), str(tmp_path / "rebuilt"), at)
    rebuilt = Client(str(tmp_path / "rebuilt"), cluster=report.cluster)
    caught_up(rebuilt)
    found = groups(rebuilt)
    assert found["g"] == ["Search"] and "later" not in found
    rebuilt.close()
