"""Databases through the in-process Client (issue 26): collections of one database are
invisible from another and the same name in two databases is two collections; databases
are DDL events, so they survive a restart and a rebuild from the log; Milvus's rules hold
(default and non-empty databases are not dropped, an unknown database is refused, names
are checked) and a refused call writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients import ClientFactory
from tests.vectorlog.test_rebuild import source_config
from tests.vectorlog.test_time_travel import caught_up
from vectorlog import Client
from vectorlog.core.errors import (
    DatabaseExists,
    DatabaseNotFound,
    DatabaseRefused,
    InvalidArgument,
    InvalidDatabaseName,
    InvalidName,
)
from vectorlog.jobs.rebuild import rebuild

ROW = {"id": 1, "vector": [1.0, 0.0]}


def test_databases_namespace_collections_and_survive_a_restart(open_client: ClientFactory):
    client = open_client()
    client.create_database("tenant", properties={"team": "a"})
    tenant = client.in_database("tenant")
    tenant.create_collection("docs", dimension=2)
    client.create_collection("docs", dimension=2)
    tenant.insert("docs", [ROW])
    tenant.create_alias("docs", "latest")
    assert client.list_collections() == ["docs"] and tenant.list_collections() == ["docs"]
    assert tenant.query("docs", "id >= 0", ["id"]) == [{"id": 1}]
    assert client.query("docs", "id >= 0", ["id"]) == []
    assert tenant.list_aliases()["aliases"] == ["latest"]
    assert client.list_aliases()["aliases"] == []
    assert not client.has_collection("latest")
    client.close()
    reopened = open_client(db_name="tenant")
    assert reopened.list_databases() == ["default", "tenant"]
    assert reopened.describe_database("tenant") == {"name": "tenant", "team": "a"}
    assert reopened.query("latest", "id >= 0", ["id"]) == [{"id": 1}]
    reopened.use_database("default")
    assert reopened.query("docs", "id >= 0", ["id"]) == []
    reopened.close()


def test_milvus_rules_for_databases_refuse_before_writing(open_client: ClientFactory):
    client = open_client()
    client.create_database("tenant")
    with pytest.raises(DatabaseExists, match="database already exist: tenant"):
        client.create_database("tenant")
    with pytest.raises(InvalidDatabaseName, match=r"invalid database name\[database=a-b\]"):
        client.create_database("a-b")
    with pytest.raises(DatabaseRefused, match="can not drop default database"):
        client.drop_database("default")
    tenant = client.in_database("tenant")
    tenant.create_collection("c", dimension=2)
    with pytest.raises(DatabaseRefused, match="must drop all collections before drop database"):
        client.drop_database("tenant")
    gone = client.in_database("gone")
    with pytest.raises(DatabaseNotFound, match=r"database not found\[database=gone\]"):
        gone.create_collection("c", dimension=2)
    with pytest.raises(DatabaseNotFound):
        gone.insert("c", [ROW])
    with pytest.raises(DatabaseNotFound):
        client.use_database("gone")
    with pytest.raises(InvalidName):
        client.describe_collection("tenant.c")  # a dot is no part of a collection name
    with pytest.raises(InvalidArgument, match="different databases"):
        tenant.rename_collection("c", "d", target_db="default")
    assert client.list_databases() == ["default", "tenant"]
    assert tenant.list_collections() == ["c"] and client.list_collections() == []
    tenant.drop_collection("c")
    client.drop_database("tenant")
    assert client.list_databases() == ["default"]
    client.close()


@pytest.mark.usefixtures("spark")
def test_a_rebuild_replays_the_databases(
    open_client: ClientFactory, client_args: dict[str, Any], tmp_path: Path
):
    source = open_client()
    source.create_database("kept")
    source.create_database("gone")
    source.drop_database("gone")
    kept = source.in_database("kept")
    kept.create_collection("c", dimension=2)
    at = int(kept.insert("c", [ROW])["timestamp"])
    source.close()
    report = rebuild(source_config(client_args), str(tmp_path / "rebuilt"), at)
    rebuilt = Client(str(tmp_path / "rebuilt"), cluster=report.cluster, db_name="kept")
    caught_up(rebuilt)
    assert rebuilt.list_databases() == ["default", "kept"]
    assert rebuilt.query("c", "id >= 0", ["id"]) == [{"id": 1}]
    rebuilt.close()
