"""What rootcoord offers the other processors: DDL, the meta snapshot as of a timestamp,
timestamps, ids and time ticks (seed 001 s.3, s.4, s.6.3). Others depend on this only."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from vectorlog.core.model import CollectionHistory, CollectionInfo, CollectionSchema, FieldSchema
from vectorlog.core.types import IndexSpec


class TickStamper(Protocol):
    """A writer of the dml topic, registered with rootcoord's soft barrier (a proxy's ticks)."""

    def stamp(self) -> AbstractContextManager[int]:
        """Yields a fresh ts that holds the time tick back until the block exits."""
        ...


class DdlService(Protocol):
    """The DDL requests: rootcoord executes them, the proxy forwards them."""

    def create_collection(
        self,
        name: str,
        schema: CollectionSchema,
        shards_num: int = 1,
        properties: dict[str, str] | None = None,
        num_partitions: int = 0,
    ) -> CollectionInfo:
        """Returns the created collection (with a partition key field, with
        `num_partitions` partitions, 0: 16). Raises InvalidArgument, CollectionExists."""
        ...

    def drop_collection(self, name: str) -> None: ...
    def rename_collection(self, old_name: str, new_name: str) -> None: ...
    def alter_collection_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        """Sets `properties` and removes `delete_keys`. Raises InvalidArgument (a value
        Milvus refuses), CollectionNotFound."""
        ...

    def add_collection_field(self, name: str, field: FieldSchema) -> None:
        """Adds a nullable scalar `field` (its id assigned here); rows written before read as
        its default value, else null. Raises InvalidArgument (Milvus's rules and messages),
        CollectionNotFound."""
        ...

    def create_partition(self, collection: str, partition: str) -> None: ...
    def drop_partition(self, collection: str, partition: str) -> None: ...
    def create_alias(self, collection: str, alias: str) -> None: ...
    def drop_alias(self, alias: str) -> None: ...
    def alter_alias(self, collection: str, alias: str) -> None: ...
    def create_index(self, collection: str, spec: IndexSpec) -> None: ...
    def drop_index(self, collection: str, index_name: str) -> None: ...
    def load_collection(self, name: str, partitions: list[str] | None = None) -> None:
        """Loads the collection, or (`partitions` not None) those partitions (a
        CollectionLoaded event; none if nothing changes). Raises CollectionNotFound,
        PartitionNotFound, LoadRefused."""
        ...

    def release_collection(self, name: str, partitions: list[str] | None = None) -> None:
        """Releases the collection, or (`partitions` not None) those partitions: reads of
        them are refused until a load (a CollectionReleased event). Raises
        CollectionNotFound, PartitionNotFound, InvalidArgument, LoadRefused."""
        ...


class DatabaseService(Protocol):
    """The database DDL and reads (Milvus 2.2+); a collection name elsewhere is qualified
    with its database (vectorlog.core.databases)."""

    def create_database(self, name: str, properties: dict[str, str] | None = None) -> None:
        """Raises InvalidDatabaseName, DatabaseExists, DatabaseLimitExceeded."""
        ...

    def drop_database(self, name: str) -> None:
        """Drops an empty database (a missing one: no-op). Raises DatabaseRefused."""
        ...

    def alter_database_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        """Raises DatabaseNotFound, InvalidArgument."""
        ...

    def describe_database(self, name: str, as_of: int | None = None) -> dict[str, Any]:
        """Returns {db_id, name, properties, created_ts}. Raises DatabaseNotFound."""
        ...

    def list_databases(self, as_of: int | None = None) -> list[dict[str, Any]]:
        """Returns every database's description, `default` first (by id)."""
        ...


class RbacService(Protocol):
    """Users, roles and privilege grants (Milvus's RBAC) and the reads that authenticate and
    authorize a call. Passwords cross only as salted hashes (vectorlog.core.passwords)."""

    def create_user(self, name: str, password_hash: str, description: str = "") -> None:
        """Raises InvalidArgument (a name Milvus refuses), RbacRefused (it exists)."""
        ...

    def alter_user(self, name: str, description: str) -> None:
        """Replaces a user's description. Raises RbacRefused (no such user)."""
        ...

    def update_password(self, name: str, password_hash: str) -> None: ...
    def drop_user(self, name: str) -> None:
        """A missing user: no-op. Raises RbacRefused (root)."""
        ...

    def create_role(self, name: str, description: str = "") -> None: ...
    def alter_role(self, name: str, description: str) -> None:
        """Replaces a role's description. Raises RbacRefused (no such role)."""
        ...

    def role_description(self, name: str) -> str:
        """Returns a role's description. Raises RbacRefused (no such role)."""
        ...

    def drop_role(self, name: str, force_drop: bool = False) -> None: ...
    def grant_role(self, user: str, role: str) -> None: ...
    def revoke_role(self, user: str, role: str) -> None: ...
    def grant_privilege(self, grant: dict[str, Any]) -> None:
        """`grant`: {role_name, object_type, object_name, db_name, privilege, grantor}.
        Raises InvalidArgument (a privilege Milvus does not have), RbacRefused."""
        ...

    def revoke_privilege(self, grant: dict[str, Any]) -> None: ...
    def list_users(self) -> list[str]: ...
    def describe_user(self, name: str) -> dict[str, Any]:
        """Returns {"user_name", "roles", "description"}. Raises RbacRefused."""
        ...

    def list_roles(self) -> list[str]: ...
    def describe_role(self, name: str) -> list[dict[str, Any]]:
        """Returns the role's grants. Raises RbacRefused."""
        ...

    def password_hash(self, name: str) -> str | None:
        """Returns the user's password hash, None for root's default password. Raises
        RbacRefused (no such user)."""
        ...

    def access_of(self, name: str) -> dict[str, Any]:
        """Returns {"roles", "grants", "groups"} of a user (groups: the custom privilege
        groups' privileges by name). Raises RbacRefused."""
        ...

    def create_privilege_group(self, name: str) -> None:
        """Raises InvalidArgument (a bad name, or one a group or privilege has)."""
        ...

    def drop_privilege_group(self, name: str) -> None:
        """A missing group: no-op. Raises InvalidArgument (a role holds a grant of it)."""
        ...

    def operate_privilege_group(self, name: str, privileges: list[str], add: bool) -> None:
        """Adds (`add`) or removes privileges of a custom group. Raises InvalidArgument."""
        ...

    def list_privilege_groups(self) -> dict[str, list[str]]:
        """Returns every group's privileges by name: custom groups, then built-in ones."""
        ...


class RootCoordRpc(DdlService, DatabaseService, RbacService, Protocol):
    """What crosses processes (vectorlog.rpc): DDL requests, meta reads as of a ts, the
    timestamp oracle and the id allocator."""

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        """Returns the collection (or alias target) as of `as_of`. Raises CollectionNotFound."""
        ...

    def has_collection(self, name: str, as_of: int | None = None) -> bool:
        """Returns whether a collection (not an alias) is called `name` as of `as_of`."""
        ...

    def list_collections(self, as_of: int | None = None) -> list[str]:
        """Returns the live collections' qualified names (every database's) as of `as_of`,
        sorted."""
        ...

    def list_aliases(self, as_of: int | None = None) -> dict[str, int]:
        """Returns {qualified alias: collection id} as of `as_of`."""
        ...

    def collection_histories(self) -> list[CollectionHistory]:
        """Returns, by id, every collection the meta still holds versions of (live, or
        dropped within the meta retention): schema, created and dropped ts, partition drops."""
        ...

    def meta_horizon(self) -> int:
        """Returns the meta's GC horizon: history older than this ts was pruned (0: none),
        so a collection unknown to `collection_histories` existed, if ever, only before it."""
        ...

    def meta_version(self) -> int:
        """Returns a number that grows with every DDL: a meta read after it returned a value
        reflects every DDL up to that value (what a cache of the meta checks against)."""
        ...

    def now(self) -> int:
        """Returns a fresh hybrid timestamp from the timestamp oracle."""
        ...

    def allocate_timestamps(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive fresh timestamps (1 <= count < 2**18),
        each above every timestamp handed out before (also after restart)."""
        ...

    def allocate_ids(self, count: int = 1) -> int:
        """Returns the first of `count` fresh ids, never handed out before (also after restart)."""
        ...

    def request_tick(self, after: int | None = None) -> None:
        """Asks for a time tick now, so a read need not wait for the next interval; with
        `after`, only if no tick at or past `after` was appended already."""
        ...

    def strong_ts(self) -> int:
        """Returns the ts a Strong read reads at: past every write acknowledged before the
        call. It is the last tick appended when nothing was stamped since (the read then
        appends nothing), else a fresh timestamp."""
        ...


class RootCoordService(RootCoordRpc, Protocol):
    """RootCoordRpc and the in-process constructs of a `Standalone` cluster: the soft
    barrier's tick sources and the drop lock (cluster mode replaces both with per-proxy time
    ticks on the log, so they never cross processes)."""

    def bounded_ts(self) -> int:
        """Returns the ts a Bounded read counts its staleness back from: a moment old at
        most (a cluster-mode process's block of timestamps, no RPC; in-process, `strong_ts`)."""
        ...

    def tick_source(self, name: str) -> TickStamper:
        """Returns a new writer registered with the soft barrier under `name`."""
        ...

    def meta_point(self, fresh: bool = True) -> AbstractContextManager[None]:
        """Within the block, this thread's look-ups of the latest meta see every DDL
        acknowledged before the block began, made sure of once at its start (a cluster-mode
        process's wait for its `ddl` watch; in-process: nothing to wait for); not `fresh`:
        the meta read so far, no wait (for work known to be made before an earlier fresh
        block began). Raises ServiceUnavailable."""
        ...

    def write_guard(
        self, info: CollectionInfo, partition_id: int = -1
    ) -> AbstractContextManager[None]:
        """Holds the collection against drops while a write is stamped and appended inside
        the block: a drop of it (or of `partition_id`, unless -1) is stamped entirely before
        or after. Raises CollectionNotFound / PartitionNotFound on entry if the collection
        with `info`'s id (or the partition) no longer exists; nothing may be appended then."""
        ...
