"""The RPCs of each service: gRPC method name (Milvus's internal name where it has one), the
Protocol method it calls, and the Avro type of every argument and the result.

A request is the Avro record `<Method>Request` of its arguments, a response the record
`<Method>Response` with one field, `result`; both are written schemaless with fastavro. The
gRPC path carries the service's version (`/vectorlog.rpc.v1.RootCoord/AllocTimestamp`): a
change to a payload schema is a new version of its service (a new path), never an edit of a
served one (test_wire pins each served service's fingerprint).

Versions served: QueryNode v3 and QueryShard v2 answer a search with a `SearchResult`
(core/results.py: ids, distances and per-query offsets as packed arrays, output fields as
columns) where v2 and v1 sent a list of hit dicts per query (their payload schemas are the
same; the meaning of the answer changed, so v2 and v1 are retired). DataCoord v3 added the
cluster mode's jobs, run by the leading datacoord (Import, GetImportState, ListImports: bulk
insert; ManualCompaction, GetCompactionState, ListCompactions: compaction; runners.jobs);
DataCoord v2 is retired. RootCoord v5 added GetMetaVersion (a number that grows with every
DDL: what a process's cache of the meta tags its entries with, runners.meta_cache); v4 added
the privilege
groups (CreatePrivilegeGroup, DropPrivilegeGroup, OperatePrivilegeGroup,
ListPrivilegeGroups), user and role descriptions (CreateCredential's and CreateRole's
description, AlterCredential, AlterRole, DescribeRole) and AddCollectionField (fields added
to a collection); v3 added the database DDL and reads (CreateDatabase, DropDatabase,
AlterDatabase, DescribeDatabase, ListDatabases; collection names are qualified with their
database, vectorlog.core.databases) and the users, roles and grants (RBAC); DataCoord and
QueryNode v2. RootCoord v2 added `num_partitions` (partition keys) to CreateCollection and
AlterCollection (collection properties: TTL, consistency level); DataCoord v2 and QueryNode
v2 added `expire_ts` (the collection's TTL horizon) to GetCompactionGroups and to Search,
Query, Get and Count, and Search's `anns_field` (the vector field of a collection with
several). Member v1 (GetClusterName) is served by every cluster process's RpcServer: the
cluster it serves, checked by a process at its start against its own; Member v2 adds
GetStorageIdentity (the cluster identity object of its storage root), served beside v1.
IndexNode v1 serves the build progress describe_index reports; QueryShard v1 the reads of a
query node that holds some of the dml pchannels (the scale-out of runners.shards). The other
v1s, RootCoord v2 (its callers could not address a database), RootCoord v3 and v4 (nothing
outside this repository spoke them), are retired, not served: a v1 read would have shown
expired rows, a v1 create would have ignored the partition count, and nothing outside this
repository spoke v1; a caller of a retired version gets gRPC's UNIMPLEMENTED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VALUE = "vectorlog.rpc.v1.Value"
LONG, INT, STRING, BOOL, DOUBLE, NULL = "long", "int", "string", "boolean", "double", "null"
OPT_LONG: list[Any] = ["null", "long"]
LONGS = {"type": "array", "items": "long"}
STRINGS = {"type": "array", "items": "string"}
OPT_LONGS: list[Any] = ["null", LONGS]


@dataclass(frozen=True)
class Method:
    """One RPC: `name` on the wire, `call` the Protocol method, `args` [(name, Avro type)]
    (passed by keyword), `result` the Avro type of the return value, `waits` the name of an
    argument holding a timeout in seconds the call may legitimately wait (its deadline is
    extended by it)."""

    name: str
    call: str
    args: tuple[tuple[str, Any], ...]
    result: Any
    waits: str | None = None


@dataclass(frozen=True)
class Service:
    """A gRPC service: its full name and its methods by wire name."""

    name: str
    methods: dict[str, Method]

    def path(self, method: str) -> str:
        """Returns the gRPC path of `method`."""
        return f"/{self.name}/{method}"


def _service(short: str, version: str, *methods: Method) -> Service:
    return Service(f"vectorlog.rpc.{version}.{short}", {m.name: m for m in methods})


def _ddl(name: str, call: str, *args: str) -> Method:
    return Method(name, call, tuple((a, STRING) for a in args), NULL)


AS_OF = (("as_of", OPT_LONG),)
ROOTCOORD = _service(
    "RootCoord",
    "v5",
    Method(
        "CreateCollection",
        "create_collection",
        (
            ("name", STRING),
            ("schema", VALUE),
            ("shards_num", LONG),
            ("properties", VALUE),
            ("num_partitions", LONG),
        ),
        VALUE,
    ),
    Method(
        "AlterCollection",
        "alter_collection_properties",
        (("name", STRING), ("properties", VALUE), ("delete_keys", VALUE)),
        NULL,
    ),
    Method(
        "AddCollectionField", "add_collection_field", (("name", STRING), ("field", VALUE)), NULL
    ),
    _ddl("DropCollection", "drop_collection", "name"),
    _ddl("RenameCollection", "rename_collection", "old_name", "new_name"),
    _ddl("CreatePartition", "create_partition", "collection", "partition"),
    _ddl("DropPartition", "drop_partition", "collection", "partition"),
    _ddl("CreateAlias", "create_alias", "collection", "alias"),
    _ddl("DropAlias", "drop_alias", "alias"),
    _ddl("AlterAlias", "alter_alias", "collection", "alias"),
    Method("CreateIndex", "create_index", (("collection", STRING), ("spec", VALUE)), NULL),
    _ddl("DropIndex", "drop_index", "collection", "index_name"),
    Method("DescribeCollection", "describe_collection", (("name", STRING), *AS_OF), VALUE),
    Method("HasCollection", "has_collection", (("name", STRING), *AS_OF), BOOL),
    Method("ShowCollections", "list_collections", AS_OF, STRINGS),
    Method("ListAliases", "list_aliases", AS_OF, {"type": "map", "values": "long"}),
    Method("GetCollectionHistories", "collection_histories", (), VALUE),
    Method("GetMetaHorizon", "meta_horizon", (), LONG),
    Method("GetMetaVersion", "meta_version", (), LONG),
    Method("AllocTimestamp", "allocate_timestamps", (("count", LONG),), LONG),
    Method("AllocID", "allocate_ids", (("count", LONG),), LONG),
    Method("RequestTimeTick", "request_tick", (("after", OPT_LONG),), NULL),
    Method("GetStrongTimestamp", "strong_ts", (), LONG),
    Method("CreateDatabase", "create_database", (("name", STRING), ("properties", VALUE)), NULL),
    _ddl("DropDatabase", "drop_database", "name"),
    Method(
        "AlterDatabase",
        "alter_database_properties",
        (("name", STRING), ("properties", VALUE), ("delete_keys", VALUE)),
        NULL,
    ),
    Method("DescribeDatabase", "describe_database", (("name", STRING), *AS_OF), VALUE),
    Method("ListDatabases", "list_databases", AS_OF, VALUE),
    _ddl("CreateCredential", "create_user", "name", "password_hash", "description"),
    _ddl("AlterCredential", "alter_user", "name", "description"),
    _ddl("UpdateCredential", "update_password", "name", "password_hash"),
    _ddl("DeleteCredential", "drop_user", "name"),
    _ddl("CreateRole", "create_role", "name", "description"),
    _ddl("AlterRole", "alter_role", "name", "description"),
    Method("DescribeRole", "role_description", (("name", STRING),), STRING),
    Method("DropRole", "drop_role", (("name", STRING), ("force_drop", BOOL)), NULL),
    _ddl("AddUserToRole", "grant_role", "user", "role"),
    _ddl("RemoveUserFromRole", "revoke_role", "user", "role"),
    Method("GrantPrivilege", "grant_privilege", (("grant", VALUE),), NULL),
    Method("RevokePrivilege", "revoke_privilege", (("grant", VALUE),), NULL),
    Method("ListCredUsers", "list_users", (), STRINGS),
    Method("SelectUser", "describe_user", (("name", STRING),), VALUE),
    Method("ListRoles", "list_roles", (), STRINGS),
    Method("SelectGrant", "describe_role", (("name", STRING),), VALUE),
    Method("GetCredential", "password_hash", (("name", STRING),), ["null", "string"]),
    Method("GetAccess", "access_of", (("name", STRING),), VALUE),
    _ddl("CreatePrivilegeGroup", "create_privilege_group", "name"),
    _ddl("DropPrivilegeGroup", "drop_privilege_group", "name"),
    Method(
        "OperatePrivilegeGroup",
        "operate_privilege_group",
        (("name", STRING), ("privileges", STRINGS), ("add", BOOL)),
        NULL,
    ),
    Method("ListPrivilegeGroups", "list_privilege_groups", (), VALUE),
)

SEGMENTS = (("segment_ids", LONGS),)
EXPIRE = (("expire_ts", LONG),)
OPT_STRING: list[Any] = ["null", "string"]
DATACOORD = _service(
    "DataCoord",
    "v3",
    Method(
        "AssignSegmentID",
        "assign_segments",
        (
            ("collection_id", LONG),
            ("partition_id", LONG),
            ("vchannel", STRING),
            ("pchannel", LONG),
            ("rows", LONG),
            ("row_bytes", LONG),
            ("ts", LONG),
        ),
        VALUE,
    ),
    Method("Flush", "flush", (("collection_id", LONG),), LONGS),
    Method("WaitFlushed", "wait_flushed", (*SEGMENTS, ("timeout", DOUBLE)), NULL, "timeout"),
    Method("GetFlushState", "flush_state", SEGMENTS, BOOL),
    Method("GetSegmentInfo", "get_segment_info", SEGMENTS, VALUE),
    Method("ListSegments", "list_segments", (("collection_id", LONG),), VALUE),
    Method(
        "GetCompactionGroups",
        "compaction_groups",
        (("collection_id", LONG), ("horizon", LONG), ("policy", VALUE), *EXPIRE),
        VALUE,
    ),
    Method(
        "Import",
        "import_files",
        (
            ("collection_name", STRING),
            ("files", VALUE),
            ("partition_name", OPT_STRING),
            ("options", VALUE),
        ),
        VALUE,
    ),
    Method("GetImportState", "import_state", (("task_id", LONG),), VALUE),
    Method("ListImports", "list_imports", (("collection_name", OPT_STRING),), VALUE),
    Method("ManualCompaction", "compact", (("collection_name", STRING),), VALUE),
    Method("GetCompactionState", "compaction_state", (("job_id", LONG),), VALUE),
    Method("ListCompactions", "list_compactions", (), VALUE),
)

PCHANNELS = (("pchannels", LONGS),)
READ = (("collection_id", LONG),)
QUERYNODE = _service(
    "QueryNode",
    "v3",
    Method("GetTSafe", "tsafe", PCHANNELS, LONG),
    Method(
        "WaitTSafe", "wait_tsafe", (*PCHANNELS, ("ts", LONG), ("timeout", DOUBLE)), NULL, "timeout"
    ),
    Method(
        "Search",
        "search",
        (
            *READ,
            ("queries", VALUE),
            ("limit", LONG),
            ("ts", LONG),
            ("partitions", OPT_LONGS),
            ("output_fields", STRINGS),
            ("expr", VALUE),
            ("offset", LONG),
            ("group_by", ["null", "string"]),
            ("params", VALUE),
            ("metric", ["null", "string"]),
            ("group_size", LONG),
            *EXPIRE,
            ("anns_field", ["null", "string"]),
        ),
        VALUE,
    ),
    Method(
        "Query",
        "query",
        (
            *READ,
            ("ts", LONG),
            ("output_fields", STRINGS),
            ("partitions", OPT_LONGS),
            ("expr", VALUE),
            ("keys", VALUE),
            ("limit", OPT_LONG),
            ("offset", LONG),
            *EXPIRE,
        ),
        VALUE,
    ),
    Method(
        "Get",
        "get",
        (*READ, ("keys", VALUE), ("ts", LONG), ("output_fields", STRINGS), *EXPIRE),
        VALUE,
    ),
    Method(
        "Count",
        "count",
        (
            *READ,
            ("ts", LONG),
            ("partitions", OPT_LONGS),
            ("expr", VALUE),
            ("keys", VALUE),
            *EXPIRE,
        ),
        LONG,
    ),
)
INDEXNODE = _service(
    "IndexNode",
    "v1",
    Method("GetIndexProgress", "progress", (("collection_id", LONG), ("index_id", LONG)), VALUE),
)
#: a query node of the scale-out (runners.shards): one read of `op` (search, query, get,
#: count, tsafe, wait_tsafe) with its keyword `args`, answered per pchannel with the node's
#: name and epoch, after waiting for tsafe >= ts on each (up to `timeout` seconds)
QUERYSHARD = _service(
    "QueryShard",
    "v2",
    Method(
        "ShardRead",
        "read",
        (("op", STRING), *PCHANNELS, ("ts", LONG), ("timeout", DOUBLE), ("args", VALUE)),
        VALUE,
        "timeout",
    ),
)
#: what every cluster process's RpcServer answers about itself: the cluster it serves (its
#: topics' prefix), which a process compares with its own --cluster at its start
#: (runners.peerwait); a process of a version before it answers UNIMPLEMENTED
MEMBER = _service("Member", "v1", Method("GetClusterName", "cluster_name", (), STRING))
#: Member v2 adds GetStorageIdentity: the cluster identity object the process read from its
#: storage root (storage.cluster_identity: {cluster, id, created_ms} and `root`, where it
#: read it; None if it has none), which a process compares with its own at its start
#: (runners.identity). Served beside v1, so a process of the version before asks v1 as before
MEMBER_V2 = _service(
    "Member",
    "v2",
    Method("GetClusterName", "cluster_name", (), STRING),
    Method("GetStorageIdentity", "storage_identity", (), VALUE),
)
#: the leading rootcoord's DDL leases (processors.rootcoord.ddl_followers): a process caching
#: the meta renews its lease (a long poll of up to `wait_s`), saying how far its ddl reader
#: read and the fence it holds; the answer is {required, ttl_ms}. Served beside RootCoord v5
#: (a rootcoord of the version before answers UNIMPLEMENTED: the follower asks the broker)
DDLLEASE = _service(
    "DdlLease",
    "v1",
    Method(
        "RenewDdlLease",
        "renew",
        (("follower", STRING), ("read_through", LONG), ("fence", LONG), ("wait_s", DOUBLE)),
        VALUE,
        "wait_s",
    ),
)
#: rootcoord's load and release requests (processors.rootcoord.load_ddl): `partitions` None
#: for the whole collection. Served beside RootCoord v5 (a rootcoord of the version before
#: answers UNIMPLEMENTED)
LOADSTATE = _service(
    "LoadState",
    "v1",
    Method("LoadCollection", "load_collection", (("name", STRING), ("partitions", VALUE)), NULL),
    Method(
        "ReleaseCollection", "release_collection", (("name", STRING), ("partitions", VALUE)), NULL
    ),
)
#: `vectorlog serve`'s embedded log, appended to by its data node run as a child process
#: (runners.dnproc, `datanode_process`): `records` is a list of [partition, value, key,
#: headers]; an append of a `generation` that is not the child's current one is refused
#: (a killed child's late call). The answer is the offsets, once the log made them durable.
#: ReportFloors passes the child's retention floors ({"dml": {p: offset}, "coord": offset})
LOGWRITES = _service(
    "LogWrites",
    "v1",
    Method(
        "Append",
        "append",
        (("generation", LONG), ("topic", STRING), ("records", VALUE)),
        LONGS,
    ),
    Method("ReportFloors", "report_floors", (("generation", LONG), ("floors", VALUE)), NULL),
)
SERVICES = {
    s.name: s
    for s in (
        ROOTCOORD,
        LOADSTATE,
        DATACOORD,
        QUERYNODE,
        INDEXNODE,
        QUERYSHARD,
        MEMBER,
        MEMBER_V2,
        DDLLEASE,
        LOGWRITES,
    )
}
