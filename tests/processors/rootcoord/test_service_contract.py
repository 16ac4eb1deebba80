"""The RootCoordService contract (processors/rootcoord/service.py), run against every
implementation (tests/processors/implementations.py): the real rootcoord of a cluster on
each log backend, the test twin in tests/processors/fakes.py, and the network client
(RootCoordRpc) through an RpcServer wrapping the real one; so a unit test that uses the twin,
and a process that uses the client, rely only on what the real one does. The in-process
extras (tick sources, the write guard) are held to it by the in-process implementations."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.processors.fakes import FakeRootCoord
from tests.processors.implementations import ALL, IN_PROCESS, open_cluster, served
from vectorlog.core.errors import (
    AliasNotFound,
    CollectionExists,
    CollectionNotFound,
    DatabaseExists,
    DatabaseNotFound,
    DatabaseRefused,
    InvalidArgument,
    RbacRefused,
)
from vectorlog.core.model import DataType, FieldSchema, quick_schema
from vectorlog.core.types import IndexSpec
from vectorlog.processors.rootcoord.service import RootCoordRpc, RootCoordService
from vectorlog.rpc.rootcoord_client import RootCoordClient

SCHEMA = quick_schema(4, "L2")
every = pytest.mark.parametrize("rootcoord", ALL, indirect=True)
in_process = pytest.mark.parametrize("rootcoord", IN_PROCESS, indirect=True)


@pytest.fixture
def rootcoord(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A RootCoordService (RootCoordRpc for "network"): the twin, the real one of a fresh
    cluster on a log backend, or the network client of a server wrapping the real one."""
    if request.param == "fake":
        yield FakeRootCoord()
        return
    client = open_cluster(request.param, request, tmp_path)
    try:
        if request.param != "network":
            yield client.cluster.rootcoord
            return
        with served(rootcoord=client.cluster.rootcoord) as address:
            remote = RootCoordClient(address)
            yield remote
            remote.close()
    finally:
        client.close()


@every
def test_timestamps_strictly_increase(rootcoord: RootCoordRpc):
    stamps = [rootcoord.now() for _ in range(600)]
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False))


@every
def test_a_block_of_timestamps_is_consecutive_and_below_every_later_one(rootcoord: RootCoordRpc):
    before = rootcoord.now()
    first = rootcoord.allocate_timestamps(1000)
    assert before < first
    assert rootcoord.now() > first + 999
    assert rootcoord.allocate_timestamps(1) > first + 999


@every
def test_id_ranges_never_overlap(rootcoord: RootCoordRpc):
    counts = (1, 5, 100, 3, 20_000, 1)
    ranges = sorted((first, first + n) for n in counts for first in [rootcoord.allocate_ids(n)])
    assert all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False))


@every
def test_a_created_collection_is_described_listed_and_has(rootcoord: RootCoordRpc):
    info = rootcoord.create_collection("books", SCHEMA, shards_num=2)
    assert (info.name, info.shards_num, len(info.vchannels)) == ("books", 2, 2)
    described = rootcoord.describe_collection("books")
    assert described.collection_id == info.collection_id
    assert [f.name for f in described.schema.fields] == [f.name for f in SCHEMA.fields]
    assert [f.dtype for f in described.schema.fields] == [f.dtype for f in SCHEMA.fields]
    assert rootcoord.has_collection("books")
    assert "books" in rootcoord.list_collections()
    assert any(h.collection_id == info.collection_id for h in rootcoord.collection_histories())


@every
def test_a_second_collection_of_the_same_name_is_refused(rootcoord: RootCoordRpc):
    rootcoord.create_collection("books", SCHEMA)
    with pytest.raises(CollectionExists, match="books"):
        rootcoord.create_collection("books", SCHEMA)


@every
def test_an_unknown_collection_is_not_found(rootcoord: RootCoordRpc):
    assert not rootcoord.has_collection("nothing")
    with pytest.raises(CollectionNotFound, match="nothing"):
        rootcoord.describe_collection("nothing")
    with pytest.raises(CollectionNotFound, match="nothing"):
        rootcoord.drop_collection("nothing")


@every
def test_a_dropped_collection_is_gone_now_but_seen_before_the_drop(rootcoord: RootCoordRpc):
    rootcoord.create_collection("books", SCHEMA)
    before_drop = rootcoord.now()
    rootcoord.drop_collection("books")
    assert not rootcoord.has_collection("books")
    assert "books" not in rootcoord.list_collections()
    with pytest.raises(CollectionNotFound):
        rootcoord.describe_collection("books")
    assert rootcoord.has_collection("books", as_of=before_drop)


@every
def test_a_collection_did_not_exist_before_its_creation(rootcoord: RootCoordRpc):
    before = rootcoord.now()
    rootcoord.create_collection("books", SCHEMA)
    assert not rootcoord.has_collection("books", as_of=before)
    assert "books" not in rootcoord.list_collections(as_of=before)


@every
def test_an_alias_names_its_collection_until_dropped(rootcoord: RootCoordRpc):
    info = rootcoord.create_collection("books", SCHEMA)
    rootcoord.create_alias("books", "library")
    assert rootcoord.list_aliases() == {"library": info.collection_id}
    assert rootcoord.describe_collection("library").collection_id == info.collection_id
    assert not rootcoord.has_collection("library")
    rootcoord.drop_alias("library")
    assert rootcoord.list_aliases() == {}
    with pytest.raises(AliasNotFound, match="library"):
        rootcoord.drop_alias("library")


@every
def test_a_created_partition_is_described(rootcoord: RootCoordRpc):
    rootcoord.create_collection("books", SCHEMA)
    rootcoord.create_partition("books", "novels")
    partitions = rootcoord.describe_collection("books").partitions
    assert set(partitions) == {"_default", "novels"}
    assert len(set(partitions.values())) == 2


@every
def test_a_created_index_is_described(rootcoord: RootCoordRpc):
    rootcoord.create_collection("books", SCHEMA)
    spec = IndexSpec("vector", "HNSW", "L2", {"M": 8, "efConstruction": 64})
    rootcoord.create_index("books", spec)
    index = rootcoord.describe_collection("books").indexes["vector"]
    assert (index["index_type"], index["metric_type"]) == ("HNSW", "L2")


@every
def test_an_invalid_name_is_refused_with_the_name(rootcoord: RootCoordRpc):
    with pytest.raises(InvalidArgument, match="1bad"):
        rootcoord.create_collection("1bad", SCHEMA)
    assert rootcoord.list_collections() == []


@every
def test_strong_timestamps_never_go_back_nor_pass_the_oracle(rootcoord: RootCoordRpc):
    first = rootcoord.strong_ts()
    rootcoord.request_tick()
    second = rootcoord.strong_ts()
    rootcoord.request_tick(after=second)
    assert first <= second < rootcoord.now()


@pytest.mark.parametrize("backend", ["embedded"])
def test_a_strong_ts_never_goes_back_when_an_older_tick_lands_after_a_fresh_one(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The ticker computes a tick, a Strong read meanwhile takes a fresh timestamp (the
    cluster was not quiet), then the tick lands and the cluster reads as quiet at it: the
    next Strong read must not go back to that older tick (it failed CI once so)."""
    client = open_cluster(backend, request, tmp_path)
    try:
        rc, ticker = client.cluster.rootcoord, client.cluster.ticker
        older = rc.now()
        monkeypatch.setattr(ticker, "quiet_tick", lambda: None)  # not quiet: a fresh ts
        first = rc.strong_ts()
        monkeypatch.setattr(ticker, "quiet_tick", lambda: older)  # the older tick landed
        assert older < first <= rc.strong_ts()
    finally:
        client.close()


@in_process
def test_the_write_guard_refuses_a_dropped_collection(rootcoord: RootCoordService):
    info = rootcoord.create_collection("books", SCHEMA)
    with rootcoord.write_guard(info):
        pass
    rootcoord.drop_collection("books")
    with pytest.raises(CollectionNotFound), rootcoord.write_guard(info):
        pass


@in_process
def test_stamps_and_strong_reads_follow_the_clock(rootcoord: RootCoordService):
    earlier = rootcoord.now()
    with rootcoord.tick_source("contract").stamp() as ts:
        assert ts > earlier
    assert rootcoord.strong_ts() >= ts


@every
def test_a_partition_key_collection_has_the_partitions_asked(rootcoord: RootCoordRpc):
    tenant = FieldSchema("tenant", DataType.INT64, is_partition_key=True)
    schema = replace(SCHEMA, fields=(*SCHEMA.fields, tenant))
    rootcoord.create_collection("keyed", schema, num_partitions=4)
    described = rootcoord.describe_collection("keyed")
    assert sorted(described.partitions) == [f"_default_{i}" for i in range(4)]


@every
def test_altered_properties_are_described(rootcoord: RootCoordRpc):
    rootcoord.create_collection("books", SCHEMA, properties={"collection.ttl.seconds": "60"})
    assert rootcoord.describe_collection("books").properties["collection.ttl.seconds"] == "60"
    rootcoord.alter_collection_properties("books", {"collection.ttl.seconds": "120"})
    assert rootcoord.describe_collection("books").properties["collection.ttl.seconds"] == "120"
    rootcoord.alter_collection_properties("books", {}, ["collection.ttl.seconds"])
    assert "collection.ttl.seconds" not in rootcoord.describe_collection("books").properties


@every
def test_an_added_field_is_described_with_the_next_id_and_refused_twice(rootcoord: RootCoordRpc):
    rootcoord.create_collection("books", SCHEMA)
    top = max(f.field_id for f in SCHEMA.validated().fields)
    tag = FieldSchema("tag", DataType.INT64, nullable=True, default_value=3)
    rootcoord.add_collection_field("books", tag)
    added = rootcoord.describe_collection("books").schema.field("tag")
    assert (added.field_id, added.nullable, added.default_value) == (top + 1, True, 3)
    with pytest.raises(InvalidArgument, match="duplicate field name: tag"):
        rootcoord.add_collection_field("books", tag)
    with pytest.raises(InvalidArgument, match="added field must be nullable"):
        rootcoord.add_collection_field("books", FieldSchema("n", DataType.INT64))


@every
def test_the_meta_version_grows_with_every_ddl(rootcoord: RootCoordRpc):
    seen = [rootcoord.meta_version()]
    rootcoord.create_collection("books", SCHEMA)
    seen.append(rootcoord.meta_version())
    rootcoord.add_collection_field("books", FieldSchema("tag", DataType.INT64, nullable=True))
    seen.append(rootcoord.meta_version())
    rootcoord.alter_collection_properties("books", {"collection.ttl.seconds": "60"})
    seen.append(rootcoord.meta_version())
    rootcoord.drop_collection("books")
    seen.append(rootcoord.meta_version())
    assert seen == sorted(set(seen))


@every
def test_a_database_namespaces_its_collections_and_is_dropped_only_empty(rootcoord: RootCoordRpc):
    rootcoord.create_database("tenant", {"team": "a"})
    with pytest.raises(DatabaseExists, match="database already exist: tenant"):
        rootcoord.create_database("tenant")
    mine = rootcoord.create_collection("tenant.docs", SCHEMA)
    theirs = rootcoord.create_collection("docs", SCHEMA)
    assert mine.collection_id != theirs.collection_id
    assert (mine.name, mine.db, theirs.db) == ("docs", "tenant", "default")
    assert rootcoord.describe_collection("tenant.docs").collection_id == mine.collection_id
    assert {"docs", "tenant.docs"} <= set(rootcoord.list_collections())
    with pytest.raises(DatabaseRefused, match="database:tenant not empty"):
        rootcoord.drop_database("tenant")
    with pytest.raises(DatabaseNotFound, match=r"database not found\[database=elsewhere\]"):
        rootcoord.describe_collection("elsewhere.docs")
    with pytest.raises(DatabaseNotFound):
        rootcoord.create_collection("elsewhere.docs", SCHEMA)
    rootcoord.alter_database_properties("tenant", {"k": "v"}, [])
    rootcoord.alter_database_properties("tenant", {}, ["team"])
    assert rootcoord.describe_database("tenant")["properties"] == {"k": "v"}
    rootcoord.drop_collection("tenant.docs")
    rootcoord.drop_database("tenant")
    rootcoord.drop_database("tenant")  # a missing database: a no-op, as Milvus
    assert [d["name"] for d in rootcoord.list_databases()] == ["default"]
    with pytest.raises(DatabaseRefused, match="can not drop default database"):
        rootcoord.drop_database("default")


@every
def test_users_roles_and_grants_are_kept_and_refused_as_milvus(rootcoord: RootCoordRpc):
    rootcoord.create_user("alice", "pbkdf2_sha256$1$00$00")
    with pytest.raises(RbacRefused, match="user already exists: alice"):
        rootcoord.create_user("alice", "pbkdf2_sha256$1$00$00")
    assert rootcoord.password_hash("alice") == "pbkdf2_sha256$1$00$00"
    assert rootcoord.password_hash("root") is None  # Milvus's default password
    rootcoord.create_role("reader")
    grant = {"role_name": "reader", "object_type": "Collection", "object_name": "docs"}
    rootcoord.grant_privilege(grant | {"db_name": "default", "privilege": "Search"})
    with pytest.raises(InvalidArgument, match=r"not found the privilege name\[Fly\]"):
        rootcoord.grant_privilege(grant | {"db_name": "default", "privilege": "Fly"})
    rootcoord.grant_role("alice", "reader")
    assert rootcoord.describe_user("alice") == {
        "user_name": "alice",
        "roles": ["reader"],
        "description": "",
    }
    access = rootcoord.access_of("alice")
    assert access["roles"] == ["reader"]
    assert {(g["role"], g["privilege"]) for g in access["grants"]} >= {("reader", "Search")}
    with pytest.raises(RbacRefused, match="has privileges"):
        rootcoord.drop_role("reader")
    with pytest.raises(RbacRefused, match="default role"):
        rootcoord.drop_role("admin")
    with pytest.raises(RbacRefused, match="root user cannot be deleted"):
        rootcoord.drop_user("root")
    rootcoord.drop_role("reader", force_drop=True)
    assert rootcoord.describe_user("alice")["roles"] == []
    assert rootcoord.list_roles() == ["admin", "public"]
    rootcoord.drop_user("alice")
    assert rootcoord.list_users() == ["root"]


@every
def test_privilege_groups_are_kept_granted_and_refused_as_milvus(rootcoord: RootCoordRpc):
    rootcoord.create_privilege_group("readers")
    assert rootcoord.list_privilege_groups()["readers"] == []
    assert "CollectionReadOnly" in rootcoord.list_privilege_groups()
    with pytest.raises(InvalidArgument, match=r"privilege group name \[readers\] is defined by"):
        rootcoord.create_privilege_group("readers")
    with pytest.raises(InvalidArgument, match=r"\[Search\] is defined by built in privileges"):
        rootcoord.create_privilege_group("Search")
    with pytest.raises(InvalidArgument, match="first character of a privilege group name"):
        rootcoord.create_privilege_group("1x")
    rootcoord.operate_privilege_group("readers", ["Search", "Query"], True)
    with pytest.raises(InvalidArgument, match="not the same privilege level"):
        rootcoord.operate_privilege_group("readers", ["CreateDatabase"], True)
    with pytest.raises(InvalidArgument, match=r"privilege group name \[Fly\]"):
        rootcoord.operate_privilege_group("readers", ["Fly"], True)
    with pytest.raises(InvalidArgument, match=r"no privilege group name \[nope\]"):
        rootcoord.operate_privilege_group("nope", ["Search"], True)
    rootcoord.operate_privilege_group("readers", ["Query"], False)
    assert rootcoord.list_privilege_groups()["readers"] == ["Search"]
    rootcoord.create_role("r")
    v2 = {"role_name": "r", "privilege": "readers", "object_name": "docs", "v2": True}
    rootcoord.grant_privilege(v2 | {"db_name": "default"})
    with pytest.raises(InvalidArgument, match="should be \\* for the cluster level"):
        rootcoord.grant_privilege(v2 | {"privilege": "ClusterReadOnly", "db_name": "default"})
    with pytest.raises(InvalidArgument, match=r"not found the privilege name\[Fly\]"):
        rootcoord.grant_privilege(v2 | {"privilege": "Fly", "db_name": "default"})
    with pytest.raises(InvalidArgument, match="can not operate the custom privilege group"):
        rootcoord.grant_privilege(v2 | {"object_type": "Global", "db_name": "default", "v2": False})
    [held] = [g for g in rootcoord.describe_role("r") if g["privilege"] == "readers"]
    assert (held["object_type"], held["object_name"], held["db_name"]) == (
        "Global",
        "docs",
        "default",
    )
    with pytest.raises(InvalidArgument, match=r"privilege group \[readers\] is used by role \[r\]"):
        rootcoord.drop_privilege_group("readers")
    rootcoord.revoke_privilege(v2 | {"db_name": "default"})
    rootcoord.drop_privilege_group("readers")
    rootcoord.drop_privilege_group("readers")  # a missing group: a no-op
    assert "readers" not in rootcoord.list_privilege_groups()


@every
def test_user_and_role_descriptions_are_kept(rootcoord: RootCoordRpc):
    rootcoord.create_user("bob", "pbkdf2_sha256$1$00$00", "on call")
    assert rootcoord.describe_user("bob")["description"] == "on call"
    rootcoord.alter_user("bob", "retired")
    assert rootcoord.describe_user("bob")["description"] == "retired"
    rootcoord.create_role("ops", "operators")
    assert rootcoord.role_description("ops") == "operators"
    rootcoord.alter_role("ops", "")
    assert rootcoord.role_description("ops") == ""
    with pytest.raises(RbacRefused, match="not found the role"):
        rootcoord.alter_role("ghost", "x")
    with pytest.raises(RbacRefused, match="not found the user"):
        rootcoord.alter_user("ghost", "x")


@every
def test_collection_histories_give_creation_drops_and_partition_drops(rootcoord: RootCoordRpc):
    rootcoord.create_collection("keep", SCHEMA)
    rootcoord.create_collection("gone", SCHEMA)
    rootcoord.create_partition("keep", "p")
    rootcoord.create_partition("keep", "q")
    rootcoord.drop_partition("keep", "p")
    rootcoord.drop_collection("gone")
    keep, gone = rootcoord.collection_histories()
    info = rootcoord.describe_collection("keep")
    assert keep.collection_id == info.collection_id < gone.collection_id
    assert keep.created_ts == info.created_ts and keep.dropped_ts is None
    assert keep.schema.vector.dim == 4
    (dropped,) = keep.partition_drops
    assert dropped not in info.partitions.values()
    assert keep.partitions == {dropped, *info.partitions.values()}
    before_drop = keep.partition_drops[dropped] - 1
    assert rootcoord.describe_collection("keep", as_of=before_drop).partitions["p"] == dropped
    after_drop = rootcoord.describe_collection("keep", as_of=keep.partition_drops[dropped])
    assert "p" not in after_drop.partitions
    assert gone.dropped_ts is not None and gone.dropped_ts > gone.created_ts
    assert not rootcoord.has_collection("gone", as_of=gone.dropped_ts)
    assert rootcoord.has_collection("gone", as_of=gone.dropped_ts - 1)
