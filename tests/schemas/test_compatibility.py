"""Schema evolution: every published envelope version stays readable by the current one."""

from __future__ import annotations

import io
import json
from typing import Any, cast

import fastavro
import pytest

from vectorlog.schemas.registry import AVRO_DIR, SchemaRegistry, default_registry
from vectorlog.schemas.serde import Event, EventSerde

V1 = SchemaRegistry(AVRO_DIR / "v1")


def v1_events() -> list[Event]:
    schema = {
        "name": "c",
        "description": "",
        "fields": [
            {
                "field_id": 100,
                "name": "id",
                "data_type": "INT64",
                "is_primary_key": True,
                "auto_id": False,
                "params": {},
                "description": "",
            }
        ],
    }
    created = {
        "collection_id": 5,
        "collection_name": "c",
        "schema": schema,
        "shards_num": 1,
        "vchannels": ["x-dml_1_5v0"],
        "pchannels": [1],
        "partitions": [{"partition_id": 6, "partition_name": "_default"}],
        "properties": {"k": "v"},
    }
    return [
        Event("CollectionCreated", 10, created, 5),
        Event("TimeTick", 11, {"source": "rootcoord"}),
        Event("CollectionDropped", 12, {"collection_id": 5, "collection_name": "c"}, 5),
    ]


def test_registry_knows_v1_and_current_by_fingerprint():
    reg = default_registry()
    assert V1.current.fingerprint in reg.versions
    assert reg.current.fingerprint != V1.current.fingerprint


@pytest.mark.parametrize("event", v1_events(), ids=lambda e: e.type)
def test_data_written_with_v1_is_read_by_the_current_schema(event: Event):
    old_writer = EventSerde(registry=V1)
    data = old_writer.encode(event)
    assert data[2:10] == V1.current.fingerprint
    assert without_v4_defaults(EventSerde().decode(data)) == event


def without_v4_defaults(decoded: Event) -> Event:
    """Returns `decoded` after checking and removing the v4 (and v8, v9, v10) schema
    fields' defaults."""
    if decoded.type in ("BinlogPathsSaved", "ChannelCheckpointed"):
        assert decoded.body.pop("writer") is None  # v10: a single data node's, never fenced
    if decoded.type == "CollectionCreated":
        assert decoded.body.pop("db_name") == "default"  # v9: collections of old are default's
    if decoded.type == "TimeTick":  # v10: a tick of old ticked under no lease, never idle
        assert (decoded.body.pop("lease"), decoded.body.pop("epoch")) == ("", 0)
        assert decoded.body.pop("idle") is False
    schema = decoded.body.get("schema") if isinstance(decoded.body, dict) else None
    if schema is not None:
        assert schema.pop("functions") == []
        assert schema.pop("enable_dynamic_field") is False
        assert all(f.pop("is_dynamic") is False for f in schema["fields"])
        assert all(f.pop("is_partition_key") is False for f in schema["fields"])
    return decoded


def test_v2_only_appends_union_branches_and_keeps_every_v1_field():
    def branches(reg: SchemaRegistry) -> list[str]:
        env = json.loads(reg.current.text)
        payload = next(f for f in env["fields"] if f["name"] == "payload")
        return [b["name"] for b in payload["type"]]

    old, new = branches(V1), branches(default_registry())
    assert new[: len(old)] == old and len(new) > len(old)


def test_every_schema_has_a_namespace_and_past_tense_events():
    for path in AVRO_DIR.glob("*.avsc"):
        raw = json.loads(path.read_text())
        assert raw["namespace"] == "io.vectorlog.events", path.name
    env = json.loads(default_registry().current.text)
    payload = next(f for f in env["fields"] if f["name"] == "payload")
    for branch in payload["type"]:
        name = branch["name"].rsplit(".", 1)[-1]
        assert name == "TimeTick" or name.endswith(("ed", "Dropped")), name


def test_v1_reader_cannot_read_new_branches_so_upgrade_readers_first():
    data = EventSerde().encode(Event("AliasCreated", 3, {"collection_id": 1, "alias": "a"}, 1))
    with pytest.raises(Exception):  # noqa: B017 - fastavro's resolution error type varies
        fastavro.schemaless_reader(
            __import__("io").BytesIO(data[10:]),
            default_registry().current.parsed,
            V1.current.parsed,
        )


V2 = SchemaRegistry(AVRO_DIR / "v2")


def v2_events() -> list[Event]:
    return [
        Event("AliasCreated", 20, {"collection_id": 5, "alias": "a"}, 5),
        Event("RangeReserved", 21, {"kind": "ids", "upper": 1000}),
        Event("IndexDropped", 22, {"collection_id": 5, "index_name": "ix", "index_id": 9}, 5),
    ]


@pytest.mark.parametrize("event", v2_events(), ids=lambda e: e.type)
def test_data_written_with_v2_is_read_by_the_current_schema(event: Event):
    assert read_by_current(V2, event) == event


def read_by_current(old: SchemaRegistry, event: Event) -> Event:
    """Encodes `event` with the `old` schema version and decodes it with the current one."""
    data = EventSerde(registry=old).encode(event)
    assert data[2:10] == old.current.fingerprint != default_registry().current.fingerprint
    return EventSerde().decode(data)


def test_v3_only_appends_the_segment_lifecycle_branches_to_v2():
    def branches(reg: SchemaRegistry) -> list[str]:
        env = json.loads(reg.current.text)
        payload = next(f for f in env["fields"] if f["name"] == "payload")
        return [b["name"].rsplit(".", 1)[-1] for b in payload["type"]]

    old, new = branches(V2), branches(V3)
    assert new[: len(old)] == old
    assert new[len(old) :] == [
        "SegmentOpened",
        "SegmentsAllocated",
        "SegmentsSealed",
        "DataNodeTicked",
        "SegmentsFlushStarted",
        "BinlogPathsSaved",
        "SegmentFlushed",
    ]


V3 = SchemaRegistry(AVRO_DIR / "v3")
V4 = SchemaRegistry(AVRO_DIR / "v4")
V5 = SchemaRegistry(AVRO_DIR / "v5")
V6 = SchemaRegistry(AVRO_DIR / "v6")
V7 = SchemaRegistry(AVRO_DIR / "v7")
V8 = SchemaRegistry(AVRO_DIR / "v8")
V9 = SchemaRegistry(AVRO_DIR / "v9")


def v3_events() -> list[Event]:
    created = v1_events()[0]
    return [
        Event("CollectionCreated", 30, created.body, 5),
        Event("SegmentFlushed", 31, {"segment_id": 7, "num_rows": 10}),
    ]


@pytest.mark.parametrize("event", v3_events(), ids=lambda e: e.type)
def test_data_written_with_v3_is_read_by_the_current_schema(event: Event):
    data = EventSerde(registry=V3).encode(event)
    assert data[2:10] == V3.current.fingerprint != default_registry().current.fingerprint
    assert without_v4_defaults(EventSerde().decode(data)) == event


def test_v4_appends_the_index_build_branches_and_data_types_to_v3():
    def env(reg: SchemaRegistry) -> dict:
        return json.loads(reg.current.text)

    def branches(reg: SchemaRegistry) -> list[str]:
        payload = next(f for f in env(reg)["fields"] if f["name"] == "payload")
        return [b["name"].rsplit(".", 1)[-1] for b in payload["type"]]

    old, new = branches(V3), branches(V4)
    assert new[: len(old)] == old
    assert new[len(old) :] == ["SegmentIndexed", "SegmentIndexesDropped"]
    dtypes = json.loads((AVRO_DIR / "v4" / "DataType.avsc").read_text())["symbols"]
    old_dtypes = json.loads((AVRO_DIR / "v3" / "DataType.avsc").read_text())["symbols"]
    assert dtypes[: len(old_dtypes)] == old_dtypes
    assert dtypes[len(old_dtypes) :] == ["INT8", "INT16", "INT32", "FLOAT", "ARRAY"]


def v4_events() -> list[Event]:
    indexed = {
        "collection_id": 5,
        "partition_id": 6,
        "segment_id": 7,
        "vchannel": "x-dml_0_5v0",
        "field_id": 101,
        "index_id": 8,
        "index_name": "vector",
        "build_id": 9,
        "index_type": "HNSW",
        "metric_type": "L2",
        "params": {"M": "16"},
        "num_rows": 10,
        "index_file": "index_files/5/6/7/9/index",
        "row_id_file": "index_files/5/6/7/9/row_ids",
        "build_ms": 3,
    }
    return [
        Event("SegmentFlushed", 40, {"segment_id": 7, "num_rows": 10}),
        Event("SegmentIndexed", 41, indexed, 5),
    ]


@pytest.mark.parametrize("event", v4_events(), ids=lambda e: e.type)
def test_data_written_with_v4_is_read_by_the_current_schema(event: Event):
    assert read_by_current(V4, event) == event


def test_v5_appends_the_channel_checkpoint_branch_to_v4():
    def branches(reg: SchemaRegistry) -> list[str]:
        env = json.loads(reg.current.text)
        payload = next(f for f in env["fields"] if f["name"] == "payload")
        return [b["name"].rsplit(".", 1)[-1] for b in payload["type"]]

    old, new = branches(V4), branches(V5)
    assert new[: len(old)] == old
    assert new[len(old) :] == ["ChannelCheckpointed"]
    event = Event(
        "ChannelCheckpointed",
        50,
        {"positions": [{"pchannel": 0, "offset": 12, "tick": 49, "tick_offset": 11}]},
    )
    assert without_v4_defaults(read_by_current(V5, event)) == event


def _branches(reg: SchemaRegistry) -> list[str]:
    env = json.loads(reg.current.text)
    payload = next(f for f in env["fields"] if f["name"] == "payload")
    return [b["name"].rsplit(".", 1)[-1] for b in payload["type"]]


def v5_events() -> list[Event]:
    saved = {
        "segment_id": 7,
        "collection_id": 5,
        "partition_id": 6,
        "vchannel": "x-dml_0_5v0",
        "field_binlogs": [],
        "delta_binlogs": [],
        "stats_binlogs": [],
        "ddl_binlogs": [],
        "num_rows": 10,
        "start_position": None,
        "end_position": None,
        "flushed": True,
    }
    positions = [{"pchannel": 0, "offset": 12, "tick": 49, "tick_offset": 11}]
    return [
        Event("BinlogPathsSaved", 60, saved, 5),
        Event("ChannelCheckpointed", 61, {"positions": positions}),
    ]


@pytest.mark.parametrize("event", v5_events(), ids=lambda e: e.type)
def test_data_written_with_v5_is_read_by_the_current_schema(event: Event):
    decoded = without_v4_defaults(read_by_current(V5, event))
    if event.type == "BinlogPathsSaved":
        assert decoded.body.pop("imported") is False  # the v6 field's default
        assert decoded.body.pop("compacted_from") == []  # the v7 field's default
    assert decoded == event


def test_v6_appends_the_bulk_insert_branch_to_v5():
    old, new = _branches(V5), _branches(V6)
    assert new[: len(old)] == old
    assert new[len(old) :] == ["SegmentImported"]
    binlog = {"log_id": 3, "path": "insert_log/5/6/7/100/3", "entries": 10}
    binlog |= {"timestamp_from": 70, "timestamp_to": 70, "size": 99}
    segment = {"segment_id": 7, "num_rows": 10, "stats_binlogs": []}
    segment["field_binlogs"] = [{"field_id": 100, "binlogs": [binlog]}]
    body = {"collection_id": 5, "partition_id": 6, "job_id": 8, "segments": [segment]}
    event = Event("SegmentImported", 70, body, 5, "x-dml_0_5v0")
    assert EventSerde().decode(EventSerde().encode(event)) == event


def test_v7_appends_the_compaction_branch_to_v6():
    old, new = _branches(V6), _branches(V7)
    assert new[: len(old)] == old
    assert new[len(old) :] == ["SegmentsCompacted"]
    binlog = {"log_id": 3, "path": "insert_log/5/6/9/100/3", "entries": 10}
    binlog |= {"timestamp_from": 70, "timestamp_to": 75, "size": 99}
    delta = {**binlog, "log_id": 4, "path": "delta_log/5/6/9/4", "entries": 1}
    segment = {"segment_id": 9, "num_rows": 10, "stats_binlogs": []}
    segment["field_binlogs"] = [{"field_id": 100, "binlogs": [binlog]}]
    body = {
        "collection_id": 5,
        "partition_id": 6,
        "plan_id": 8,
        "compacted_from": [7, 8],
        "consumed_deltas": ["delta_log/5/6/7/2"],
        "horizon": 60,
        "segment": segment,
        "delta_binlogs": [delta],
    }
    event = Event("SegmentsCompacted", 80, body, 5, "x-dml_0_5v0")
    assert EventSerde().decode(EventSerde().encode(event)) == event


def v6_events() -> list[Event]:
    saved = {**v5_events()[0].body, "imported": True}
    return [Event("BinlogPathsSaved", 90, saved, 5)]


@pytest.mark.parametrize("event", v6_events(), ids=lambda e: e.type)
def test_data_written_with_v6_is_read_by_the_current_schema(event: Event):
    decoded = without_v4_defaults(read_by_current(V6, event))
    assert decoded.body.pop("compacted_from") == []  # the v7 field's default
    assert decoded == event


def test_v8_appends_the_properties_branch_and_the_partition_key_flag_to_v7():
    old, new = _branches(V7), _branches(V8)
    assert new[: len(old)] == old
    assert new[len(old) :] == ["CollectionPropertiesAltered"]
    body = {"collection_id": 5, "properties": {"collection.ttl.seconds": "60"}}
    event = Event("CollectionPropertiesAltered", 90, body | {"delete_keys": ["k"]}, 5)
    assert EventSerde().decode(EventSerde().encode(event)) == event


def test_v7_collections_read_by_v8_have_no_partition_key():
    created = v1_events()[0]
    decoded = read_by_current(V7, Event("CollectionCreated", 95, created.body, 5))
    assert [f["is_partition_key"] for f in decoded.body["schema"]["fields"]] == [False]
    assert without_v4_defaults(decoded) == Event("CollectionCreated", 95, created.body, 5)


GRANT = {
    "role_name": "r",
    "object_type": "Collection",
    "object_name": "*",
    "db_name": "default",
    "privilege": "Search",
}


def test_v9_appends_the_database_and_query_coordination_branches_to_v8():
    old, new = _branches(V8), _branches(V9)
    assert new[: len(old)] == old
    assert new[len(old) :] == [
        "DatabaseCreated",
        "DatabaseDropped",
        "DatabasePropertiesAltered",
        "UserCreated",
        "UserPasswordUpdated",
        "UserDropped",
        "RoleCreated",
        "RoleDropped",
        "UserRoleGranted",
        "UserRoleRevoked",
        "PrivilegeGranted",
        "PrivilegeRevoked",
        "QueryNodeReported",
        "QueryChannelsAssigned",
        "QueryReplicasConfigured",
    ]
    created = {"db_id": 7, "db_name": "tenant", "properties": {"k": "v"}}
    altered = {"db_id": 7, "db_name": "tenant", "properties": {}, "delete_keys": ["k"]}
    for event in (
        Event("DatabaseCreated", 100, created),
        Event("DatabasePropertiesAltered", 101, altered),
        Event("DatabaseDropped", 102, {"db_id": 7, "db_name": "tenant"}),
        Event("UserCreated", 104, {"user_name": "u", "password_hash": "h", "description": ""}),
        Event("RoleDropped", 105, {"role_name": "r", "force_drop": True}),
        Event("PrivilegeGranted", 106, {**GRANT, "grantor": "root"}),
    ):
        assert EventSerde().decode(EventSerde().encode(event)) == event
    collection = Event("CollectionCreated", 103, v1_events()[0].body | {"db_name": "tenant"}, 5)
    decoded = EventSerde().decode(EventSerde().encode(collection))
    assert decoded.body["db_name"] == "tenant"


def test_v8_collections_read_by_v9_live_in_the_default_database():
    created = v1_events()[0]
    decoded = read_by_current(V8, Event("CollectionCreated", 96, created.body, 5))
    assert decoded.body["db_name"] == "default"


def test_v9_query_coordination_events_round_trip():
    owner = {"pchannel": 1, "replica": 1, "node": "qn1", "epoch": 7, "address": "127.0.0.1:5"}
    failure = {"pchannel": 2, "node": "qn1", "reason": "segment 9: bad binlog"}
    beat = {"node": "qn1", "epoch": 7, "address": "a", "serving": [1], "failed": [failure]}
    plan = {"version": 3, "replicas": 2, "targets": [owner], "owners": [owner], "dead": []}
    plan["failed"] = []
    plan["nodes"] = [{"node": "qn1", "epoch": 7, "node_id": 3}]  # v10: node and replica ids
    plan["collections"] = [{"collection_id": 5, "replica_ids": [9, 10]}]
    plan |= {"next_node_id": 4, "next_replica_id": 11}
    loaded = {"collection_id": 5, "replica_number": 2}
    for event in (
        Event("QueryNodeReported", 99, beat),
        Event("QueryChannelsAssigned", 99, plan),
        Event("QueryReplicasConfigured", 99, loaded),
    ):
        assert EventSerde().decode(EventSerde().encode(event)) == event


def test_v9_assignments_read_by_v10_have_no_node_or_replica_ids_yet():
    owner = {"pchannel": 1, "replica": 0, "node": "qn1", "epoch": 7, "address": "a"}
    plan = {"version": 3, "replicas": 1, "targets": [owner], "owners": [owner], "dead": []}
    event = Event("QueryChannelsAssigned", 99, {**plan, "failed": []})
    decoded = EventSerde().decode(EventSerde(registry=V9).encode(event))
    added = {"nodes": [], "next_node_id": 1, "collections": [], "next_replica_id": 1}
    assert decoded.body == {**event.body, **added}


def _named(reg: SchemaRegistry, name: str) -> dict:
    """Returns the definition of named type `name` in a version's full (inlined) schema."""
    found = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("name") == name and "type" in node and node["type"] in ("record", "enum"):
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(reg.current.full))
    return found[0]


def test_v9_appends_the_sparse_and_packed_column_branches_and_data_types_to_v8():
    old, new = _named(V8, "FieldColumn"), _named(V9, "FieldColumn")
    old_union = [b if isinstance(b, str) else b["name"] for b in old["fields"][2]["type"]]
    new_union = [b if isinstance(b, str) else b["name"] for b in new["fields"][2]["type"]]
    assert new_union[: len(old_union)] == old_union
    assert new_union[len(old_union) :] == ["SparseFloatVectorColumn", "PackedVectorColumn"]
    old_types = _named(V8, "DataType")["symbols"]
    added = ["SPARSE_FLOAT_VECTOR", "FLOAT16_VECTOR", "BFLOAT16_VECTOR", "BINARY_VECTOR"]
    assert _named(V9, "DataType")["symbols"] == [*old_types, *added]


def test_rows_written_with_v8_are_read_by_v9_and_v9_sparse_rows_round_trip():
    column = {"field_id": 100, "field_name": "id"}
    column["column"] = ("io.vectorlog.events.Int64Column", {"values": [1, 2], "valid": None})
    body: dict[str, Any] = {"collection_id": 5, "partition_id": 6, "segment_id": 7}
    body |= {"num_rows": 2, "first_row_id": 10, "columns": [column]}
    event = Event("RowsInserted", 90, body, 5, "x-dml_0_5v0")
    out = io.BytesIO()
    fastavro.schemaless_writer(out, V8.current.parsed, event.to_avro())
    decoded = fastavro.schemaless_reader(
        io.BytesIO(out.getvalue()), V8.current.parsed, default_registry().current.parsed
    )
    assert cast(Any, decoded)["payload"]["columns"][0]["column"]["values"] == [1, 2]
    rows = [b"\x01\x00\x00\x00\x00\x00\x80\x3f", b""]
    sparse = {"field_id": 101, "field_name": "sv"}
    sparse["column"] = ("io.vectorlog.events.SparseFloatVectorColumn", {"rows": rows})
    event = Event("RowsInserted", 91, {**body, "columns": [column, sparse]}, 5, "x-dml_0_5v0")
    assert EventSerde().decode(EventSerde().encode(event)) == event


def test_v10_appends_the_privilege_group_added_field_and_job_branches_to_v9():
    old, new = _branches(V9), _branches(default_registry())
    assert new[: len(old)] == old
    assert new[len(old) : len(old) + 5] == [
        "PrivilegeGroupCreated",
        "PrivilegeGroupDropped",
        "PrivilegeGroupAltered",
        "UserAltered",
        "RoleAltered",
    ]
    assert new[len(old) + 7 : len(old) + 10] == [
        "CollectionFieldAdded",
        "JobRecorded",
        "ClusterIdentityRecorded",
    ]
    altered = {"group_name": "g", "added": ["Search", "Query"], "removed": []}
    field = {**v1_events()[0].body["schema"]["fields"][0], "field_id": 102, "name": "tag"}
    field |= {"is_primary_key": False, "params": {"nullable": "true", "default_value": "7"}}
    field |= {"is_dynamic": False, "is_partition_key": False}
    job = {"job_id": 9, "kind": "import", "collection_name": "c"}
    identity = {"cluster": "c", "id": "3f2a", "created_ms": 1}
    for event in (
        Event("PrivilegeGroupCreated", 110, {"group_name": "g"}),
        Event("PrivilegeGroupAltered", 111, altered),
        Event("PrivilegeGroupAltered", 112, {**altered, "added": [], "removed": ["Query"]}),
        Event("PrivilegeGroupDropped", 113, {"group_name": "g"}),
        Event("UserCreated", 114, {"user_name": "u", "password_hash": "h", "description": "d"}),
        Event("UserAltered", 115, {"user_name": "u", "description": "ops"}),
        Event("RoleCreated", 116, {"role_name": "r", "description": "readers"}),
        Event("RoleAltered", 117, {"role_name": "r", "description": ""}),
        Event("CollectionFieldAdded", 118, {"collection_id": 5, "field": field}, 5, "x-dml_0_5v0"),
        Event("JobRecorded", 119, {**job, "state": "Failed", "detail": '{"reason": "x"}'}),
        Event("ClusterIdentityRecorded", 120, {**identity, "root": "/shared/vl"}),
    ):
        assert EventSerde().decode(EventSerde().encode(event)) == event


@pytest.mark.parametrize(
    "event",
    [
        Event("PrivilegeGranted", 120, {**GRANT, "grantor": "root"}),
        Event("UserCreated", 121, {"user_name": "u", "password_hash": "h"}),
        Event("CollectionCreated", 122, v1_events()[0].body | {"db_name": "tenant"}, 5),
    ],
    ids=lambda e: e.type,
)
def test_data_written_with_v9_is_read_by_the_current_schema(event: Event):
    decoded = read_by_current(V9, event)
    if event.type == "UserCreated":
        assert decoded.body.pop("description") == ""  # v10: users of old have none
    if event.type == "CollectionCreated":
        schema = decoded.body["schema"]
        assert schema.pop("functions") == []
        assert schema.pop("enable_dynamic_field") is False
        assert all(f.pop("is_dynamic") is False for f in schema["fields"])
        assert all(f.pop("is_partition_key") is False for f in schema["fields"])
    assert decoded == event


def test_v10_appends_the_data_channel_branches_to_v9():
    old, new = _branches(V9), _branches(default_registry())
    assert new[: len(old)] == old
    assert new[len(old) + 5 : len(old) + 7] == ["DataNodeReported", "DataChannelsAssigned"]
    owners = [{"pchannel": 0, "node": "dn1", "epoch": 7}]
    plan = {"version": 2, "owners": owners, "dead": [{"node": "dn2", "epoch": 5}]}
    plan["role"] = "indexnode"
    beat = {"node": "dn1", "epoch": 7, "writing": [0, 2], "role": "datanode"}
    for event in (Event("DataNodeReported", 110, beat), Event("DataChannelsAssigned", 111, plan)):
        assert EventSerde().decode(EventSerde().encode(event)) == event
    del beat["role"]  # the data nodes' by default
    decoded = EventSerde().decode(EventSerde().encode(Event("DataNodeReported", 112, beat)))
    assert decoded.body["role"] == "datanode"


def test_v9_checkpoints_have_no_writer_and_v10_ones_name_theirs():
    positions = [{"pchannel": 0, "offset": 12, "tick": 49, "tick_offset": 11}]
    old = Event("ChannelCheckpointed", 112, {"positions": positions})
    assert read_by_current(V9, old).body["writer"] is None
    new = Event("ChannelCheckpointed", 113, {"positions": positions})
    new.body["writer"] = {"node": "dn1", "epoch": 7}
    decoded = EventSerde().decode(EventSerde().encode(new)).body["writer"]
    assert decoded == ("io.vectorlog.events.DataNodeEpoch", {"node": "dn1", "epoch": 7})


V10 = SchemaRegistry(AVRO_DIR / "v10")


def test_v10_ticks_are_never_idle_and_v11_ones_say_so():
    tag = {"source": "proxy1", "lease": "", "epoch": 0}
    assert read_by_current(V10, Event("TimeTick", 130, dict(tag))).body["idle"] is False
    idle = Event("TimeTick", 131, {**tag, "idle": True})
    assert EventSerde().decode(EventSerde().encode(idle)) == idle
    assert V10.current.fingerprint != default_registry().current.fingerprint


def test_v11_appends_the_load_state_branches_to_v10_and_reads_v10_data():
    old, new = _branches(V10), _branches(default_registry())
    assert new[: len(old)] == old
    assert new[len(old) :] == ["CollectionLoaded", "CollectionReleased"]
    for event in (
        Event("CollectionReleased", 140, {"collection_id": 5, "partition_names": []}, 5),
        Event("CollectionLoaded", 141, {"collection_id": 5, "partition_names": ["p1"]}, 5),
    ):
        assert EventSerde().decode(EventSerde().encode(event)) == event
    renamed = {"collection_id": 5, "old_name": "c", "new_name": "d"}
    assert read_by_current(V10, Event("CollectionRenamed", 142, renamed, 5)).body == renamed
