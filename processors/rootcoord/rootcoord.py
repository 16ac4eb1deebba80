"""RootCoord (seed 001 s.3, s.10): DDL requests -> validated, stamped events on the `ddl` topic,
broadcast into the collection's vchannels, applied to the meta snapshot with the log position.

Order of a DDL: validate against the meta table; stamp (holding the time tick back); append
to `ddl` (durable: from here on it happens); broadcast into the vchannels; apply to the meta
snapshot in one RocksDB write with the consumed `ddl` offset. A crash anywhere after the
append is repaired by `recover()`, which replays `ddl` from the stored offset, re-broadcasts
and applies: nothing is lost, nothing is applied twice (consumers ignore a repeated broadcast).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from vectorlog.core.added_fields import added_field
from vectorlog.core.databases import (
    DEFAULT_DATABASE,
    check_database_name,
    same_database,
    split,
)
from vectorlog.core.errors import (
    AliasNotFound,
    ClusterInUse,
    CollectionNotFound,
    DatabaseNotFound,
    DatabaseRefused,
    DdlOutcomeUnknown,
    IndexNotFound,
    InvalidArgument,
    LeaseUnconfirmed,
    LimitExceeded,
    PartitionNotFound,
    RootCoordFenced,
)
from vectorlog.core.faults import CrashPointReached, crash_point
from vectorlog.core.hybridts import physical_ms, wall_ms
from vectorlog.core.model import (
    DEFAULT_PARTITION,
    CollectionHistory,
    CollectionInfo,
    CollectionSchema,
    FieldSchema,
    check_name,
    partition_tag,
)
from vectorlog.core.properties import checked
from vectorlog.core.types import IndexSpec
from vectorlog.processors.rootcoord.ddl_followers import DdlFollowers
from vectorlog.processors.rootcoord.idalloc import IdAllocator
from vectorlog.processors.rootcoord.lease import Lease
from vectorlog.processors.rootcoord.load_ddl import LoadDdl
from vectorlog.processors.rootcoord.meta import MAX_PARTITIONS, MetaTable
from vectorlog.processors.rootcoord.rbac_ddl import RbacDdl
from vectorlog.processors.rootcoord.reserve import ReservationFailed
from vectorlog.processors.rootcoord.snapshotkv import SnapshotKV, TimestampNotIncreasing
from vectorlog.processors.rootcoord.timesync import SoftBarrier, Ticker, TickSource
from vectorlog.processors.rootcoord.tso import TimestampOracle
from vectorlog.processors.rootcoord.writeguard import WriteGuard
from vectorlog.runtime.events import reason_of, skip_past
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore
from vectorlog.state.errors import StateError
from vectorlog.streams.channels import assign_pchannels, vchannel_name
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.errors import LogError, RecordTooLarge, TopicPartitionNotFound
from vectorlog.streams.log.base import Append, Log, Reader, Record
from vectorlog.streams.log.lease_fence import FenceState, seeded
from vectorlog.streams.snapshots import Blobs, FenceMemo, fence_at, is_snapshot, read_from
from vectorlog.streams.topics import Serdes, Topics

log = logging.getLogger(__name__)

#: how long a `bounded_ts` is reused (a proxy of the cluster mode reuses the first of its
#: block of timestamps for up to BOUNDED_TS_AGE_S; against Bounded's 5 s this is "now")
BOUNDED_REUSE_S = 0.01

#: Where the consumed `ddl` position was kept before the state store (format 0, a raw key
#: among the state); opening such a store moves it to the store's positions.
DDL_POSITION_KEY = b"rootcoord/ddl_position"
#: DDL events that data consumers (query nodes, data nodes) see in the vchannels
#: events on the ddl topic that change no meta
NOT_APPLIED = frozenset({"TimeTick", "RangeReserved"})
BROADCAST = frozenset(
    {
        "CollectionCreated",
        "CollectionDropped",
        "PartitionCreated",
        "PartitionDropped",
        "CollectionFieldAdded",
    }
)
MAX_SHARDS = 16
#: partitions of a partition-key collection created without num_partitions (Milvus's
#: common.DefaultPartitionsWithPartitionKey)
DEFAULT_KEY_PARTITIONS = 16
PROBE_TS = (1 << 63) - 1  # the largest ts: an Avro long never encodes longer
#: failures while replaying a record that say nothing about the record: the store, the log or
#: this process failed; the replay stops and is retried, the record is never dead-lettered
NOT_THE_EVENTS_FAULT = (
    StateError,
    LogError,
    CrashPointReached,
    OSError,
    MemoryError,
    ClusterInUse,
    RootCoordFenced,
    LeaseUnconfirmed,
    ReservationFailed,
)
#: ...except these log errors, which a broadcast copy of a bad event causes (too large for the
#: dml topic, or naming a pchannel it does not have): that event is dead-lettered
THE_EVENTS_FAULT = (RecordTooLarge, TopicPartitionNotFound)
#: an id reservation on the log at or past this is impossible (ids start at 2**40)
MAX_ID_UPPER = 1 << 62
DEFAULT_MAX_SKEW_MS = 60_000
#: how long a DDL waits to read the `ddl` records appended before its own
CATCH_UP_TIMEOUT_S = 30.0


class RootCoord(RbacDdl, LoadDdl):
    """Owns the TSO, the ID allocator and the meta table; executes DDL through the log."""

    def __init__(
        self,
        log: Log,
        topics: Topics,
        serdes: Serdes,
        store: StateStore,
        tso: TimestampOracle,
        ids: IdAllocator,
        barrier: SoftBarrier,
        retention_ms: int | None = None,
        ticker: Ticker | None = None,
        *,
        lease: Lease | None = None,
        max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
        snapshots: Blobs | None = None,
    ) -> None:
        """`lease`: this process's claim on the cluster; when it is lost, every DDL, id and
        timestamp is refused. `max_skew_ms`: a `ddl` record whose timestamp (or reserved
        bound) is further ahead of the oracle and the wall clock is dead-lettered at replay.
        `snapshots`: where the ddl topic's snapshots are (ddl_snapshot)."""
        self._snapshots = snapshots
        self.log, self.topics, self.store, self.tso, self.ids = log, topics, store, tso, ids
        self._ddl_serde = serdes.for_topic(topics.ddl)
        self._dml_serde = serdes.for_topic(topics.dml)
        self.meta = MetaTable(SnapshotKV(store, clock=tso.now, retention_ms=retention_ms))
        self.source = barrier.register(TickSource("rootcoord", tso))
        self._barrier, self._ticker = barrier, ticker
        self._dead_letter = DeadLetterWriter(log, topics.dlq, "rootcoord")
        self._lock = threading.Lock()
        self._dirty = False
        self._guard = WriteGuard()
        tso.on_reserve = lambda bound: self._log_reservation("timestamps", bound)
        ids.on_reserve = lambda upper: self._log_reservation("ids", upper)
        self._lease, self._max_skew_ms = lease, max_skew_ms
        if lease is not None:
            tso.guard = ids.guard = lease.check
        self._tail: Reader | None = None  # reads `ddl` records a DDL finds before its own
        self._tail_next = 0
        #: the `ddl` offset the tail reader last started from and the lease fence there
        self._tail_fence: tuple[int, FenceState] | None = None
        self._version: int | None = None  # the ddl offset the in-memory meta is at
        self._bounded = (0.0, 0)  # (monotonic s until which it serves, bounded_ts)
        self._strong = 0  # the highest strong_ts returned
        self._strong_lock = threading.Lock()
        #: cluster mode: the DDL leases of the processes caching the meta (ddl_followers)
        self.followers: DdlFollowers | None = None

    # -- RootCoordService: meta reads, timestamps, ids, ticks ------------------------------
    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        """Returns the collection (or alias target) as of `as_of`. Raises CollectionNotFound."""
        return self.meta.get(name, as_of)

    def has_collection(self, name: str, as_of: int | None = None) -> bool:
        return self.meta.has(name, as_of)

    def list_collections(self, as_of: int | None = None) -> list[str]:
        return self.meta.names(as_of)

    def list_aliases(self, as_of: int | None = None) -> dict[str, int]:
        return self.meta.aliases(as_of)

    def collection_histories(self) -> list[CollectionHistory]:
        return self.meta.histories()

    def meta_horizon(self) -> int:
        return self.meta.kv.gc_horizon

    def meta_version(self) -> int:
        """Returns the `ddl` offset after the last DDL the meta reads reflect: it grows with
        every DDL (on every leader: it is the log's), and a read after it returned sees the
        meta of that DDL or later."""
        if self._version is None:
            self._version = self.stored_position()
        return self._version

    def now(self) -> int:
        """Returns a fresh hybrid timestamp."""
        return self.tso.now()

    def allocate_timestamps(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive fresh timestamps. Raises InvalidArgument
        unless 1 <= count < 2**18."""
        if isinstance(count, bool) or not isinstance(count, int) or not 0 < count < 1 << 18:
            raise InvalidArgument(f"count must be in 1..{(1 << 18) - 1}, not {count!r}")
        return self.tso.allocate(count)

    def allocate_ids(self, count: int = 1) -> int:
        """Returns the first of `count` fresh ids."""
        return self.ids.allocate(count)

    def tick_source(self, name: str) -> TickSource:
        """Returns a new TickSource registered with the soft barrier."""
        return self._barrier.register(TickSource(name, self.tso))

    def request_tick(self, after: int | None = None) -> None:
        """Asks for a time tick now; with `after`, only if no tick at or past it was appended."""
        if self._ticker is not None:
            self._ticker.request(after)

    def strong_ts(self) -> int:
        """Returns the ts a Strong read reads at: the last tick appended, if nothing was
        stamped since it was computed and nothing is in flight (it covers every acknowledged
        write, and serving at it appends nothing), else a fresh timestamp; never one below a
        ts it returned before."""
        tick = self._ticker.quiet_tick() if self._ticker is not None else None
        ts = self.tso.now() if tick is None else tick
        # never below one returned before: a fresh ts taken while the ticker appended a tick
        # it had computed earlier is above that tick, which then reads as quiet (a read at
        # either sees the same rows: nothing was stamped between them)
        with self._strong_lock:
            self._strong = max(ts, self._strong)
            return self._strong

    def bounded_ts(self) -> int:
        """Returns a `strong_ts()` at most BOUNDED_REUSE_S old (on a quiet cluster the last
        tick, so a Bounded read appends none): the 5 s a Bounded read counts back from it
        move by that moment at most, and its reads at the node's tsafe see every row
        applied all the same. Reused, it spares each read the quiet-tick check."""
        until, ts = self._bounded
        now = time.monotonic()
        if now < until:
            return ts
        ts = self.strong_ts()
        self._bounded = (now + BOUNDED_REUSE_S, ts)
        return ts

    def meta_point(self, fresh: bool = True) -> contextlib.nullcontext[None]:
        """Returns an empty block: in-process, every look-up reads the meta table itself."""
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def write_guard(self, info: CollectionInfo, partition_id: int = -1) -> Iterator[None]:
        """Holds `info`'s collection against drops while a write is stamped and appended.

        Raises CollectionNotFound (the collection with that id was dropped) or
        PartitionNotFound (`partition_id` was, unless -1) on entry; a drop of either waits
        until the block exits, so the write's ts is below the drop's.
        """
        cid = info.collection_id
        while True:
            if self._dirty:  # a DDL failed half-way: its drop may be on the log, replay it
                with self._ddl():
                    pass
            self._guard.acquire_write(cid)
            if not self._dirty:
                break
            self._guard.release_write(cid)
        try:
            self._check_live(info, partition_id)
            yield
        finally:
            self._guard.release_write(cid)

    def _check_live(self, info: CollectionInfo, partition_id: int) -> None:
        rec = self.meta.by_id(info.collection_id)
        if rec is None:
            raise CollectionNotFound(info.name, info.db)  # the write's database, as Milvus
        if partition_id != -1 and partition_id not in rec["partitions"].values():
            names = [n for n, p in info.partitions.items() if p == partition_id]
            raise PartitionNotFound(info.name, names[0] if names else str(partition_id))

    # -- requests ---------------------------------------------------------------------
    def create_collection(
        self,
        name: str,
        schema: CollectionSchema,
        shards_num: int = 1,
        properties: dict[str, str] | None = None,
        num_partitions: int = 0,
    ) -> CollectionInfo:
        """Creates a collection (`name` qualified: core/databases.py); with a partition key
        field, with `num_partitions` partitions (0: Milvus's default 16) named
        `_default_0`... and no `_default`. Raises InvalidArgument/CollectionExists,
        DatabaseNotFound; nothing appended."""
        db, plain = split(name)
        check_name("collection", plain)
        self.meta.database(db)
        schema = replace(schema, name=plain).validated()
        names = initial_partitions(schema, num_partitions)
        if (
            not isinstance(shards_num, int)
            or isinstance(shards_num, bool)
            or not 0 < shards_num <= MAX_SHARDS
        ):
            raise InvalidArgument(f"shards_num must be 1..{MAX_SHARDS}, not {shards_num!r}")
        with self._ddl():
            cid = self.ids.allocate(1 + len(names))
            pch = assign_pchannels(cid, shards_num, self.topics.dml_partitions)
            vch = [vchannel_name(self.topics.cluster, p, cid, i) for i, p in enumerate(pch)]
            body = {
                "collection_id": cid,
                "collection_name": plain,
                "db_name": db,
                "schema": schema.to_avro(),
                "shards_num": shards_num,
                "vchannels": vch,
                "pchannels": pch,
                "partitions": [
                    {"partition_id": cid + 1 + i, "partition_name": p} for i, p in enumerate(names)
                ],
                "properties": checked({k: str(v) for k, v in (properties or {}).items()}),
            }
            self._execute("CollectionCreated", cid, body)
        return self.meta.get(name)

    def drop_collection(self, name: str) -> None:
        """Drops a collection (not via an alias). Raises CollectionNotFound, InvalidArgument."""
        with self._ddl():
            cid = self._collection_id(name)
            with self._guard.dropping(cid):  # no write of it is stamped across the drop
                body = {"collection_id": cid, "collection_name": split(name)[1]}
                self._execute("CollectionDropped", cid, body)

    def rename_collection(self, old_name: str, new_name: str) -> None:
        """Renames a collection within its database; its id, data and aliases stay. Raises
        InvalidArgument (a new name in another database), CollectionNotFound."""
        check_name("collection", split(new_name)[1])
        with self._ddl():
            cid = self._collection_id(old_name)
            same_database(old_name, new_name)
            old, new = split(old_name)[1], split(new_name)[1]
            self._execute(
                "CollectionRenamed", cid, {"collection_id": cid, "old_name": old, "new_name": new}
            )

    def alter_collection_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        """Sets `properties` and removes `delete_keys` of a collection (or alias target) in one
        CollectionPropertiesAltered event. Raises InvalidArgument (a TTL or mmap value Milvus
        refuses, both or neither of the two given), CollectionNotFound; nothing is appended
        then."""
        with self._ddl():
            cid = self.meta.resolve(name)  # first, as Milvus
            if not properties and not delete_keys:
                raise InvalidArgument("no properties or delete keys provided")
            if properties and delete_keys:
                raise InvalidArgument("can not provide properties and deletekeys at the same time")
            props = checked(properties)
            body = {"collection_id": cid, "properties": props, "delete_keys": delete_keys or []}
            self._execute("CollectionPropertiesAltered", cid, body)

    def add_collection_field(self, name: str, field: FieldSchema) -> None:
        """Adds `field` (nullable, maybe with a default value) to a collection (or alias
        target) in one CollectionFieldAdded event, broadcast into its vchannels: rows written
        before it read as its default value, else null. Raises CollectionNotFound,
        InvalidArgument (core/added_fields.py's rules, Milvus's messages); nothing is
        appended then."""
        with self._ddl():
            cid = self.meta.resolve(name)  # first, as Milvus
            if not isinstance(field, FieldSchema):
                raise InvalidArgument(f"a field schema is needed, not {field!r:.80}")
            new = added_field(self.meta.get(name).schema, field)
            body = {"collection_id": cid, "field": new.to_avro()}
            self._execute("CollectionFieldAdded", cid, body)

    def create_partition(self, collection: str, partition: str) -> None:
        """Creates a partition; one of that name already there: a no-op, as Milvus's
        rootcoord ignores it. Raises InvalidPartitionName (Milvus's partition tag check),
        CollectionNotFound, InvalidArgument for a partition-key collection."""
        partition_tag(partition)
        with self._ddl():
            cid = self.meta.resolve(collection)
            info = self.meta.get(collection)
            if info.schema.partition_key is not None:
                raise InvalidArgument("disable create partition if partition key mode is used")
            if partition in info.partitions:
                return
            self._execute(
                "PartitionCreated",
                cid,
                {
                    "collection_id": cid,
                    "partition_name": partition,
                    "partition_id": self.ids.allocate(),
                },
            )

    def drop_partition(self, collection: str, partition: str) -> None:
        with self._ddl():
            info = self.meta.get(collection)
            if info.schema.partition_key is not None:
                raise InvalidArgument("disable drop partition if partition key mode is used")
            if partition not in info.partitions:
                raise PartitionNotFound(info.name, partition)
            with self._guard.dropping(info.collection_id):  # as in drop_collection
                self._execute(
                    "PartitionDropped",
                    info.collection_id,
                    {
                        "collection_id": info.collection_id,
                        "partition_name": partition,
                        "partition_id": info.partitions[partition],
                    },
                )

    def create_alias(self, collection: str, alias: str) -> None:
        """Creates `alias` (qualified, in the collection's database). Raises InvalidArgument,
        AliasExists, CollectionNotFound."""
        check_name("alias", split(alias)[1])
        with self._ddl():
            cid = self._collection_id(collection)
            same_database(collection, alias)
            body = {"collection_id": cid, "alias": split(alias)[1]}
            self._execute("AliasCreated", cid, body)

    def drop_alias(self, alias: str) -> None:
        with self._ddl():
            cid = self.meta.aliases().get(alias)
            if cid is None:
                raise AliasNotFound(alias)
            self._execute("AliasDropped", cid, {"collection_id": cid, "alias": split(alias)[1]})

    def alter_alias(self, collection: str, alias: str) -> None:
        """Points `alias` at `collection`. Raises InvalidName (checked first, as Milvus's
        proxy), AliasNotFound, CollectionNotFound, InvalidArgument."""
        check_name("alias", split(alias)[1])
        with self._ddl():
            prev = self.meta.aliases().get(alias)
            if prev is None:
                raise AliasNotFound(alias)
            cid = self._collection_id(collection)
            same_database(collection, alias)
            self._execute(
                "AliasAltered",
                cid,
                {"collection_id": cid, "alias": split(alias)[1], "previous_collection_id": prev},
            )

    # -- databases --------------------------------------------------------------------
    def create_database(self, name: str, properties: dict[str, str] | None = None) -> None:
        """Creates database `name`. Raises InvalidDatabaseName, DatabaseExists,
        DatabaseLimitExceeded; nothing appended."""
        check_database_name(name)
        with self._ddl():
            body = {
                "db_id": self.ids.allocate(),
                "db_name": name,
                "properties": {str(k): str(v) for k, v in (properties or {}).items()},
            }
            self._execute("DatabaseCreated", 0, body)

    def drop_database(self, name: str) -> None:
        """Drops an empty database; a missing one is a no-op, as Milvus. Raises
        DatabaseRefused (`default`, or one holding collections)."""
        with self._ddl():
            if name == DEFAULT_DATABASE:
                raise DatabaseRefused("can not drop default database")
            try:
                rec = self.meta.database(name)
            except DatabaseNotFound:
                return
            self._execute("DatabaseDropped", 0, {"db_id": rec["db_id"], "db_name": name})

    def alter_database_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        """Sets `properties` and removes `delete_keys` of database `name`. Raises
        DatabaseNotFound, InvalidArgument (neither given)."""
        with self._ddl():
            rec = self.meta.database(name)
            if not properties and not delete_keys:
                raise InvalidArgument("no properties or delete keys provided")
            body = {
                "db_id": rec["db_id"],
                "db_name": name,
                "properties": {str(k): str(v) for k, v in properties.items()},
                "delete_keys": list(delete_keys or []),
            }
            self._execute("DatabasePropertiesAltered", 0, body)

    def describe_database(self, name: str, as_of: int | None = None) -> dict[str, Any]:
        """Returns {db_id, name, properties, created_ts}. Raises DatabaseNotFound."""
        return dict(self.meta.database(name, as_of))

    def list_databases(self, as_of: int | None = None) -> list[dict[str, Any]]:
        """Returns the databases' records ({db_id, name, properties, created_ts}) by id."""
        return self.meta.databases(as_of)

    def create_index(self, collection: str, spec: IndexSpec) -> None:
        """Records an index description. Raises InvalidArgument, IndexExists."""
        with self._ddl():
            info = self.meta.get(collection)
            self._execute(
                "IndexCreated", info.collection_id, spec.event_body(info, self.ids.allocate())
            )

    def drop_index(self, collection: str, index_name: str) -> None:
        with self._ddl():
            info = self.meta.get(collection)
            if index_name not in info.indexes:
                raise IndexNotFound(info.name, index_name)
            self._execute(
                "IndexDropped",
                info.collection_id,
                {
                    "collection_id": info.collection_id,
                    "index_name": index_name,
                    "index_id": info.indexes[index_name]["index_id"],
                },
            )

    def _collection_id(self, name: str) -> int:
        """Returns the id of the collection called `name` (aliases refused). Raises
        DatabaseNotFound, CollectionNotFound, InvalidArgument."""
        if not self.meta.has(name):
            if name in self.meta.aliases():
                raise InvalidArgument(f"{split(name)[1]!r} is an alias; name the collection itself")
            raise CollectionNotFound(name)
        return self.meta.resolve(name)

    def _execute(self, event_type: str, collection_id: int, body: dict[str, Any]) -> int:
        """Checks, stamps, appends to `ddl`, broadcasts and applies one DDL event (after the
        `ddl` records before it that this rootcoord has not consumed yet)."""
        self.meta.check(Event(event_type, 0, body, collection_id))
        self._check_sizes(Event(event_type, PROBE_TS, body, collection_id))
        with self.source.stamp() as ts:
            event = Event(event_type, ts, body, collection_id)
            try:
                record = Append(0, self._ddl_serde.encode(event), self._ddl_serde.key(event))
                offset = self.log.append(self.topics.ddl, [record])[0]
                crash_point("rootcoord.ddl.after_append")
                if self._catch_up(offset):  # another writer's DDL came first: still valid?
                    self.meta.check(event)
                self._broadcast(event)
                crash_point("rootcoord.ddl.before_apply")
                self._apply(event, offset)
            except Exception as exc:  # it may be on the log: replay before the next DDL
                self._dirty = True
                raise DdlOutcomeUnknown(event_type, exc) from exc
        if self.followers is not None:  # the caches of the meta know it before it returns
            self.followers.settle(offset)
        return ts

    def _check_sizes(self, event: Event) -> None:
        """Raises LimitExceeded, before anything is appended, if the event or one of its
        broadcast copies would not fit in a record of the topic it goes to."""
        limit = self.log.max_message_bytes
        sizes = [(self.topics.ddl, len(self._ddl_serde.encode(event)))]
        sizes += [
            (self.topics.dml, len(self._dml_serde.encode(replace(event, vchannel=vc))))
            for _, vc in self._targets(event)
        ]
        for topic, size in sizes:
            if size > limit:
                raise LimitExceeded(
                    f"{event.type} encodes to {size} bytes on {topic!r}, over the maximum "
                    f"message size of {limit}: shorten its names, description or properties"
                )

    @contextlib.contextmanager
    def _ddl(self) -> Iterator[None]:
        """Serializes DDL; first replays the log if an earlier DDL failed half-way.
        Raises RootCoordFenced / LeaseUnconfirmed if this process does not hold the lease."""
        with self._lock:
            if self._lease is not None:
                self._lease.check()
            if self._dirty:
                self.recover()
                self._dirty = False
            yield

    # -- applying and broadcasting ------------------------------------------------------
    def _targets(self, event: Event) -> list[tuple[int, str]]:
        if event.type not in BROADCAST:
            return []
        body = event.body
        if "vchannels" in body:
            return list(zip(body["pchannels"], body["vchannels"], strict=True))
        rec = self.meta.by_id(event.collection_id)
        return list(zip(rec["pchannels"], rec["vchannels"], strict=True)) if rec else []

    def _broadcast(self, event: Event) -> None:
        records = [
            Append(
                p,
                self._dml_serde.encode(replace(event, vchannel=vc)),
                self._dml_serde.vchannel_key(vc),
            )
            for p, vc in self._targets(event)
        ]
        if records:
            self.log.append(self.topics.dml, records)

    def _apply(self, event: Event, offset: int) -> None:
        """Commits the event's meta changes (none for some) and the `ddl` position after it
        in one synced write."""
        txn = self.store.transaction()
        txn.set_position(self.topics.ddl, 0, offset + 1)
        self.meta.apply(event, txn)
        self._version = offset + 1  # after the in-memory view changed (meta_version)

    def _log_reservation(self, kind: str, upper: int) -> None:
        """Appends a RangeReserved event so a rebuilt rootcoord never reissues a value."""
        if self._lease is not None:
            self._lease.check()
        event = Event("RangeReserved", 0, {"kind": kind, "upper": upper})
        record = Append(0, self._ddl_serde.encode(event), self._ddl_serde.key(event))
        self.log.append(self.topics.ddl, [record])

    def _observe_reservation(self, event: Event) -> None:
        if event.body["kind"] == "ids":
            self.ids.observe(event.body["upper"])
        else:
            self.tso.observe_bound(event.body["upper"])

    # -- recovery -----------------------------------------------------------------------
    def stored_position(self) -> int:
        """Returns the committed next `ddl` offset to apply (0 if none)."""
        position = self.store.position(self.topics.ddl, 0)
        return 0 if position is None else position

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Returns {(topic, partition): next offset} consumed into the stored meta snapshot:
        `ddl` records (its own reservations, end markers) are replayed at the next DDL."""
        return {(self.topics.ddl, 0): self.stored_position()}

    def recover(self, timeout: float = 60.0) -> int:
        """Replays `ddl` from the stored position to its end; returns events applied. The
        catch-up reader goes on with the lease fence state this read ended with."""
        position, memo = self.stored_position(), FenceMemo()
        records = read_from(self.log, self.topics.ddl, self._snapshots, position, timeout, memo)
        applied = sum(self._replay_one(rec) for rec in records)
        self._tail_fence = memo.get(self.topics.ddl)
        return applied

    def _replay_one(self, rec: Record) -> int:
        """Applies one `ddl` record read from the log; returns 1 for a DDL event applied.

        A record that cannot be decoded or applied (undecodable, not a DDL event, breaking a
        meta rule, impossible timestamps or bounds, a broadcast copy the dml topic refuses) is
        dead-lettered with its reason and position, and the position moves past it: replaying
        a record never stops the cluster from opening. Failures of the store or the log raise.
        """
        try:
            event = self._ddl_serde.decode(rec.value)
            if self._applied_before(rec, event):
                skip_past(self.store, rec)  # a snapshot read again after a partial apply
                return 0
            self._check_plausible(event)
            self.tso.observe(event.ts)
            if event.type == "RangeReserved":
                self._observe_reservation(event)
            if event.type in NOT_APPLIED:
                self._apply(event, rec.offset)
                return 0
            self.meta.check(event)  # an invalid event is refused before it is broadcast
            self._broadcast(event)
            self._apply(event, rec.offset)
            return 1
        except Exception as exc:
            if isinstance(exc, NOT_THE_EVENTS_FAULT) and not isinstance(exc, THE_EVENTS_FAULT):
                raise  # the store or the log failed, not the record: retry, never dead-letter
            self._dead_letter(rec, reason_of(exc))
            skip_past(self.store, rec)
            return 0

    def _applied_before(self, rec: Record, event: Event) -> bool:
        """Returns whether `rec` is a snapshot record whose DDL event the meta already holds:
        a snapshot's events are in timestamp order, so one stamped at or below the last one
        applied was applied (by the partial apply a crash interrupted, or before the position
        the reader started from); it is skipped, not dead-lettered."""
        return (
            is_snapshot(rec) and event.type not in NOT_APPLIED and event.ts <= self.meta.kv.last_ts
        )

    def _check_plausible(self, event: Event) -> None:
        """Raises MalformedEvent (or TimestampNotIncreasing) for a `ddl` event no rootcoord
        wrote: a timestamp or a reserved bound ahead of everything this oracle has seen by more
        than the allowed clock skew, a reservation of another kind, a DDL event stamped at or
        below the last one applied (its broadcast would disagree with the meta)."""
        reach = max(wall_ms(), self.tso.reach_ms()) + self._max_skew_ms + 2 * self.tso.window_ms
        if event.ts < 0 or physical_ms(event.ts) > reach:
            raise MalformedEvent(f"{event.type} has an impossible ts {event.ts}")
        if event.type == "RangeReserved":
            kind, upper = event.body["kind"], event.body["upper"]
            limit = {"ids": MAX_ID_UPPER, "timestamps": reach}.get(kind)
            if limit is None or not 0 <= upper <= limit:
                raise MalformedEvent(f"impossible reservation of {kind!r} up to {upper}")
        elif event.type not in NOT_APPLIED and event.ts <= self.meta.kv.last_ts:
            raise TimestampNotIncreasing(event.ts, self.meta.kv.last_ts, f"{event.type} on ddl")

    def _catch_up(self, offset: int) -> int:
        """Replays the `ddl` records before `offset` (a DDL's own) that this rootcoord has not
        consumed: its reservations, end markers, and whatever another writer appended (a
        malformed record is dead-lettered here, not skipped). Returns DDL events applied."""
        start = self.stored_position()
        if start >= offset:
            return 0
        if self._tail is None or self._tail_next != start:  # with the lease fence at start
            ddl, since = self.topics.ddl, self._tail_fence
            fence = fence_at(self.log, ddl, self._snapshots, start, since=since)
            self._tail_fence = (start, fence)
            if self._tail is None:
                self._tail = self.log.reader(self.topics.ddl, {0: start})
            else:
                self._tail.seek(self.topics.ddl, 0, start)
            seeded(self._tail, fence)
        self._tail_next, applied = start, 0
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while self._tail_next < offset:
            if time.monotonic() > deadline:
                raise LogError(f"did not read {self.topics.ddl!r} up to offset {offset} in time")
            for rec in self._tail.poll(1000, 0.2):
                if self._tail_next <= rec.offset < offset:
                    applied += self._replay_one(rec)
                self._tail_next = max(self._tail_next, rec.offset + 1)
        return applied

    def close(self) -> None:
        """Reserves no more timestamps or ids (waits for a reservation in flight) and closes
        the `ddl` reader. Idempotent."""
        self.tso.close()
        self.ids.close()
        with self._lock:
            if self._tail is not None:
                self._tail.close()
                self._tail = None


def initial_partitions(schema: CollectionSchema, num_partitions: int) -> list[str]:
    """Returns the partitions a new collection starts with: `_default`, or with a partition
    key `num_partitions` (0: 16) of `_default_{i}`. Raises InvalidArgument with Milvus's
    messages."""
    if not isinstance(num_partitions, int) or isinstance(num_partitions, bool):
        raise InvalidArgument(f"num_partitions must be an int, not {num_partitions!r}")
    if schema.partition_key is None:
        if num_partitions != 0:
            raise InvalidArgument(
                "num_partitions should only be specified with partition key field enabled"
            )
        return [DEFAULT_PARTITION]
    if num_partitions < 0:
        raise InvalidArgument(
            "the specified partitions should be greater than 0 if partition key is used"
        )
    if num_partitions > MAX_PARTITIONS:
        raise InvalidArgument(
            f"partition number ({num_partitions}) exceeds max configuration ({MAX_PARTITIONS})"
        )
    return [f"{DEFAULT_PARTITION}_{i}" for i in range(num_partitions or DEFAULT_KEY_PARTITIONS)]
