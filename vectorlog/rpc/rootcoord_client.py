"""`RootCoordClient`: RootCoordRpc over the network, with batched allocation as Milvus's proxy
allocators do: timestamps and ids are fetched a block per RPC and served from it."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import CollectionHistory, CollectionInfo, CollectionSchema, FieldSchema
from vectorlog.core.types import IndexSpec
from vectorlog.rpc.channel import DEFAULT_DEADLINE_S, RpcChannel
from vectorlog.rpc.methods import LOADSTATE, ROOTCOORD

#: timestamps fetched per AllocTimestamp RPC by `now()`
TS_BATCH = 256
#: a block of timestamps is served for at most this long after it was fetched, so a
#: timestamp `now()` returns is at most this much older than the oracle's clock
TS_MAX_AGE_S = 0.05
#: ids fetched per AllocID RPC (Milvus's proxy fetches 200,000 per request)
ID_BATCH = 10_000
MAX_TS_COUNT = (1 << 18) - 1


def _count(count: Any, limit: int | None = None) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidArgument(f"count must be a positive integer, not {count!r}")
    if limit is not None and count > limit:
        raise InvalidArgument(f"count must be at most {limit}, not {count}")
    return count


class _Block:
    """A range [next, end) of values fetched at `fetched` (monotonic seconds)."""

    def __init__(self) -> None:
        self.first = self.next = self.end = 0
        self.fetched = 0.0

    def take(self, count: int, max_age: float | None) -> int | None:
        """Returns the first of `count` values from the block, or None if it cannot serve."""
        stale = max_age is not None and time.monotonic() - self.fetched > max_age
        if stale or self.next + count > self.end:
            return None
        first, self.next = self.next, self.next + count
        return first

    def refill(self, first: int, count: int) -> None:
        self.first, self.next, self.end = first, first, first + count
        self.fetched = time.monotonic()

    def above(self, value: int) -> None:
        """Drops what is left of the block if it would serve `value` or less."""
        if self.next <= value:
            self.next = self.end


class RootCoordClient:
    """RootCoordRpc of the rootcoord serving at `address` (an RpcServer)."""

    def __init__(
        self,
        address: str,
        deadline_s: float = DEFAULT_DEADLINE_S,
        *,
        ts_batch: int = TS_BATCH,
        ts_max_age_s: float = TS_MAX_AGE_S,
        id_batch: int = ID_BATCH,
        token: str | None = None,
    ) -> None:
        """`ts_batch`, `id_batch`: values fetched per RPC (1: no batching);
        `ts_max_age_s`: how long a block of timestamps is served; `token`: the cluster's
        token, sent with every call (None: none)."""
        self._rpc = RpcChannel(ROOTCOORD, address, deadline_s, token=token)
        self._load = RpcChannel(LOADSTATE, address, deadline_s, token=token)
        self._ts_batch, self._ts_age = _count(ts_batch, MAX_TS_COUNT), ts_max_age_s
        self._id_batch = _count(id_batch)
        self._ts, self._ids = _Block(), _Block()
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        return self._rpc.address

    def close(self) -> None:
        """Closes the connection; the unused rest of each block is never handed out."""
        self._rpc.close()
        self._load.close()

    # -- DDL -------------------------------------------------------------------------------
    def create_collection(
        self,
        name: str,
        schema: CollectionSchema,
        shards_num: int = 1,
        properties: dict[str, str] | None = None,
        num_partitions: int = 0,
    ) -> CollectionInfo:
        return cast(
            CollectionInfo,
            self._rpc.call(
                "CreateCollection",
                name=name,
                schema=schema,
                shards_num=shards_num,
                properties=properties,
                num_partitions=num_partitions,
            ),
        )

    def alter_collection_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        self._rpc.call("AlterCollection", name=name, properties=properties, delete_keys=delete_keys)

    def add_collection_field(self, name: str, field: FieldSchema) -> None:
        self._rpc.call("AddCollectionField", name=name, field=field)

    def drop_collection(self, name: str) -> None:
        self._rpc.call("DropCollection", name=name)

    def rename_collection(self, old_name: str, new_name: str) -> None:
        self._rpc.call("RenameCollection", old_name=old_name, new_name=new_name)

    def create_partition(self, collection: str, partition: str) -> None:
        self._rpc.call("CreatePartition", collection=collection, partition=partition)

    def drop_partition(self, collection: str, partition: str) -> None:
        self._rpc.call("DropPartition", collection=collection, partition=partition)

    def load_collection(self, name: str, partitions: list[str] | None = None) -> None:
        self._load.call("LoadCollection", name=name, partitions=partitions)

    def release_collection(self, name: str, partitions: list[str] | None = None) -> None:
        self._load.call("ReleaseCollection", name=name, partitions=partitions)

    def create_alias(self, collection: str, alias: str) -> None:
        self._rpc.call("CreateAlias", collection=collection, alias=alias)

    def drop_alias(self, alias: str) -> None:
        self._rpc.call("DropAlias", alias=alias)

    def alter_alias(self, collection: str, alias: str) -> None:
        self._rpc.call("AlterAlias", collection=collection, alias=alias)

    def create_index(self, collection: str, spec: IndexSpec) -> None:
        self._rpc.call("CreateIndex", collection=collection, spec=spec)

    def drop_index(self, collection: str, index_name: str) -> None:
        self._rpc.call("DropIndex", collection=collection, index_name=index_name)

    # -- meta reads --------------------------------------------------------------------------
    def create_database(self, name: str, properties: dict[str, str] | None = None) -> None:
        self._rpc.call("CreateDatabase", name=name, properties=properties)

    def drop_database(self, name: str) -> None:
        self._rpc.call("DropDatabase", name=name)

    def alter_database_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        self._rpc.call("AlterDatabase", name=name, properties=properties, delete_keys=delete_keys)

    def describe_database(self, name: str, as_of: int | None = None) -> dict[str, Any]:
        return cast(dict[str, Any], self._rpc.call("DescribeDatabase", name=name, as_of=as_of))

    def list_databases(self, as_of: int | None = None) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._rpc.call("ListDatabases", as_of=as_of))

    def create_user(self, name: str, password_hash: str, description: str = "") -> None:
        self._rpc.call(
            "CreateCredential", name=name, password_hash=password_hash, description=description
        )

    def alter_user(self, name: str, description: str) -> None:
        self._rpc.call("AlterCredential", name=name, description=description)

    def update_password(self, name: str, password_hash: str) -> None:
        self._rpc.call("UpdateCredential", name=name, password_hash=password_hash)

    def drop_user(self, name: str) -> None:
        self._rpc.call("DeleteCredential", name=name)

    def create_role(self, name: str, description: str = "") -> None:
        self._rpc.call("CreateRole", name=name, description=description)

    def alter_role(self, name: str, description: str) -> None:
        self._rpc.call("AlterRole", name=name, description=description)

    def role_description(self, name: str) -> str:
        return cast(str, self._rpc.call("DescribeRole", name=name))

    def drop_role(self, name: str, force_drop: bool = False) -> None:
        self._rpc.call("DropRole", name=name, force_drop=force_drop)

    def grant_role(self, user: str, role: str) -> None:
        self._rpc.call("AddUserToRole", user=user, role=role)

    def revoke_role(self, user: str, role: str) -> None:
        self._rpc.call("RemoveUserFromRole", user=user, role=role)

    def grant_privilege(self, grant: dict[str, Any]) -> None:
        self._rpc.call("GrantPrivilege", grant=grant)

    def revoke_privilege(self, grant: dict[str, Any]) -> None:
        self._rpc.call("RevokePrivilege", grant=grant)

    def list_users(self) -> list[str]:
        return cast(list[str], self._rpc.call("ListCredUsers"))

    def describe_user(self, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._rpc.call("SelectUser", name=name))

    def list_roles(self) -> list[str]:
        return cast(list[str], self._rpc.call("ListRoles"))

    def describe_role(self, name: str) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._rpc.call("SelectGrant", name=name))

    def password_hash(self, name: str) -> str | None:
        return cast(str | None, self._rpc.call("GetCredential", name=name))

    def access_of(self, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._rpc.call("GetAccess", name=name))

    def create_privilege_group(self, name: str) -> None:
        self._rpc.call("CreatePrivilegeGroup", name=name)

    def drop_privilege_group(self, name: str) -> None:
        self._rpc.call("DropPrivilegeGroup", name=name)

    def operate_privilege_group(self, name: str, privileges: list[str], add: bool) -> None:
        self._rpc.call("OperatePrivilegeGroup", name=name, privileges=privileges, add=add)

    def list_privilege_groups(self) -> dict[str, list[str]]:
        return cast(dict[str, list[str]], self._rpc.call("ListPrivilegeGroups"))

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        return cast(CollectionInfo, self._rpc.call("DescribeCollection", name=name, as_of=as_of))

    def has_collection(self, name: str, as_of: int | None = None) -> bool:
        return bool(self._rpc.call("HasCollection", name=name, as_of=as_of))

    def list_collections(self, as_of: int | None = None) -> list[str]:
        return list(self._rpc.call("ShowCollections", as_of=as_of))

    def list_aliases(self, as_of: int | None = None) -> dict[str, int]:
        return dict(self._rpc.call("ListAliases", as_of=as_of))

    def collection_histories(self) -> list[CollectionHistory]:
        return list(self._rpc.call("GetCollectionHistories"))

    def meta_horizon(self) -> int:
        return int(self._rpc.call("GetMetaHorizon"))

    def meta_version(self) -> int:
        return int(self._rpc.call("GetMetaVersion"))

    # -- time and ids ------------------------------------------------------------------------
    def now(self) -> int:
        """Returns a timestamp of the oracle, strictly above every one this client returned
        before (by any method but `recent`), from a block fetched at most `ts_max_age_s`
        ago."""
        return self.stamp(self._ts_age)

    def stamp(self, max_age_s: float) -> int:
        """Returns a timestamp as `now` does, from a block fetched at most `max_age_s` ago:
        for an event that needs a stamp of its own, above this client's earlier ones, but
        not a fresh one (a heartbeat: one RPC per block instead of one per beat)."""
        with self._lock:
            ts = self._ts.take(1, max_age_s)
            if ts is None:
                first = self._alloc_ts(self._ts_batch)
                self._ts.refill(first, self._ts_batch)
                ts = self._ts.take(1, None)
            assert ts is not None
            return ts

    def recent(self, max_age_s: float) -> int:
        """Returns a timestamp the oracle handed this client at most `max_age_s` ago: the
        first of its block if fetched since (no RPC; the same one again until the next
        block), else the first of a new block. Not a fresh stamp: for a read that counts
        back from about now (Bounded). Never below one it returned before."""
        with self._lock:
            if not self._ts.first or time.monotonic() - self._ts.fetched > max_age_s:
                self._ts.refill(self._alloc_ts(self._ts_batch), self._ts_batch)
            return self._ts.first

    def skip_past(self, ts: int) -> None:
        """Makes every later `now()` answer above `ts` (a DDL this process learned of from
        the log: what it stamps after that follows the DDL)."""
        with self._lock:
            self._ts.above(ts)

    def allocate_timestamps(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive fresh timestamps (one RPC, no batching).
        Raises InvalidArgument unless 1 <= count < 2**18."""
        first = self._alloc_ts(_count(count, MAX_TS_COUNT))
        with self._lock:
            self._ts.above(first + count - 1)
        return first

    def _alloc_ts(self, count: int) -> int:
        return int(self._rpc.call("AllocTimestamp", count=count))

    def allocate_ids(self, count: int = 1) -> int:
        """Returns the first of `count` fresh ids, from this client's block when it holds
        them, else from a new block (a request of a block or more is fetched alone)."""
        _count(count)
        with self._lock:
            first = self._ids.take(count, None)
            if first is not None:
                return first
            if count >= self._id_batch:
                return int(self._rpc.call("AllocID", count=count))
            self._ids.refill(int(self._rpc.call("AllocID", count=self._id_batch)), self._id_batch)
            first = self._ids.take(count, None)
            assert first is not None
            return first

    def request_tick(self, after: int | None = None) -> None:
        self._rpc.call("RequestTimeTick", after=after)

    def strong_ts(self) -> int:
        """Returns the server's strong ts (never from a block: it must pass every write
        acknowledged anywhere before the call); `now()` answers above it from then on."""
        ts = int(self._rpc.call("GetStrongTimestamp"))
        with self._lock:
            self._ts.above(ts)
        return ts
