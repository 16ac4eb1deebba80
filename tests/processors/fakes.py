"""In-memory twins of the processor service interfaces, for unit tests of one processor.

Each implements one Protocol of `vectorlog.processors.*.service` with the least behaviour a
unit test needs and records the calls made to it; none is ever what a user runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from vectorlog.core.added_fields import added_field, with_field
from vectorlog.core.databases import check_database_name, qualified, split
from vectorlog.core.errors import (
    AliasNotFound,
    CollectionExists,
    CollectionNotFound,
    ConsistencyTimeout,
    DatabaseExists,
    DatabaseNotFound,
    DatabaseRefused,
    FlushTimeout,
    IndexNotFound,
    PartitionNotFound,
)
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.load_state import after_load, after_release
from vectorlog.core.model import (
    CollectionHistory,
    CollectionInfo,
    CollectionSchema,
    FieldSchema,
    check_name,
    quick_schema,
)
from vectorlog.core.results import SearchResult
from vectorlog.core.types import Hit, IndexSpec
from vectorlog.processors.indexnode.service import FAILED, FINISHED, IN_PROGRESS, IndexProgress
from vectorlog.processors.rootcoord.load_ddl import partition_names_of
from vectorlog.processors.rootcoord.rbac_ddl import RbacDdl
from vectorlog.processors.rootcoord.rbac_meta import RbacMeta
from vectorlog.schemas.serde import Event


class HybridClock:
    """Strictly increasing hybrid timestamps that follow the wall clock, one or a block."""

    def __init__(self) -> None:
        self.last = 0

    def allocate(self, count: int = 1) -> int:
        """Returns the first of `count` consecutive timestamps above every earlier one."""
        first = max(self.last + 1, compose(wall_ms()))
        self.last = first + count - 1
        return first

    def __iter__(self) -> Iterator[int]:
        while True:
            yield self.allocate()


def collection(
    name: str = "books",
    collection_id: int = 100,
    dim: int = 4,
    shards: int = 2,
    id_type: str = "int",
    auto_id: bool = False,
) -> CollectionInfo:
    """Returns a validated collection with `shards` vchannels on pchannels 0..shards-1."""
    schema = quick_schema(dim, "L2", auto_id, id_type=id_type).validated()
    return CollectionInfo(
        collection_id=collection_id,
        name=name,
        schema=schema,
        shards_num=shards,
        vchannels=[f"t-dml_{p}_{collection_id}v{p}" for p in range(shards)],
        pchannels=list(range(shards)),
        created_ts=1,
        partitions={"_default": collection_id + 1, "p": collection_id + 2},
    )


class FakeStamper:
    """A tick source whose stamps come from the fake rootcoord's clock."""

    def __init__(self, clock: Iterator[int], stamped: list[int]) -> None:
        self._clock, self._stamped = clock, stamped

    @contextlib.contextmanager
    def stamp(self) -> Iterator[int]:
        ts = next(self._clock)
        self._stamped.append(ts)
        yield ts


class FakeMeta:
    """The twin's meta: the real RBAC state (rootcoord's RbacMeta), without history."""

    def __init__(self) -> None:
        self.rbac = RbacMeta()


def _by_id(pair: tuple[CollectionInfo, int | None]) -> int:
    return pair[0].collection_id


@dataclass
class FakeRootCoord(RbacDdl):
    """RootCoordService over a dict of collections, a counting clock and id allocator; its
    users, roles and grants are rootcoord's own RBAC code over an in-memory RbacMeta."""

    collections: dict[str, CollectionInfo] = field(default_factory=dict)
    next_id: int = 1000
    stamped: list[int] = field(default_factory=list)
    tick_requests: int = 0
    ddl: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> collection name
    _clock: HybridClock = field(default_factory=HybridClock)
    #: when each live collection was created (0: put into `collections` by the test)
    _created: dict[str, int] = field(default_factory=dict)
    #: (name, created ts, dropped ts, info) of every dropped collection
    _dropped: list[tuple[str, int, int, CollectionInfo]] = field(default_factory=list)
    #: collection id -> partition id -> [name, dropped ts or None] (the partitions' history)
    _partitions: dict[int, dict[int, list[Any]]] = field(default_factory=dict)
    #: database name -> its description (`default` always there)
    databases: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "default": {"db_id": 1, "name": "default", "properties": {}, "created_ts": 0}
        }
    )

    meta: FakeMeta = field(default_factory=FakeMeta)

    def _ddl(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def _execute(self, event_type: str, collection_id: int, body: dict[str, Any]) -> int:
        """Applies one RBAC event to the in-memory state, as rootcoord's meta would."""
        ts = self.now()
        saves, removals = self.meta.rbac.appliers[event_type](Event(event_type, ts, body))
        for key in removals:
            self.meta.rbac.forget(key)
        for key, raw in saves.items():
            self.meta.rbac.remember(key, raw)
        return ts

    # -- databases: collections are keyed by qualified name (vectorlog.core.databases) --------
    def create_database(self, name: str, properties: dict[str, str] | None = None) -> None:
        check_database_name(name)
        if name in self.databases:
            raise DatabaseExists(name)
        props = {k: str(v) for k, v in (properties or {}).items()}
        self.databases[name] = {
            "db_id": self.allocate_ids(),
            "name": name,
            "properties": props,
            "created_ts": self.now(),
        }

    def drop_database(self, name: str) -> None:
        if name == "default":
            raise DatabaseRefused("can not drop default database")
        if any(c.db == name for c in self.collections.values()):
            raise DatabaseRefused(
                f"database:{name} not empty, must drop all collections before drop database"
            )
        self.databases.pop(name, None)

    def alter_database_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        props = self.describe_database(name)["properties"]
        for key in delete_keys or []:
            props.pop(key, None)
        props.update({k: str(v) for k, v in properties.items()})

    def describe_database(self, name: str, as_of: int | None = None) -> dict[str, Any]:
        if name not in self.databases:
            raise DatabaseNotFound(name)
        return self.databases[name]

    def list_databases(self, as_of: int | None = None) -> list[dict[str, Any]]:
        return sorted(self.databases.values(), key=lambda d: d["db_id"])

    def create_collection(
        self,
        name: str,
        schema: CollectionSchema,
        shards_num: int = 1,
        properties: dict[str, str] | None = None,
        num_partitions: int = 0,
    ) -> CollectionInfo:
        db, plain = split(name)
        check_name("collection", plain)
        self.describe_database(db)
        if name in self.collections or name in self.aliases:
            raise CollectionExists(name)
        self.ddl.append(("create_collection", (name, shards_num)))
        keyed = schema.partition_key is not None
        names = [f"_default_{i}" for i in range(num_partitions or 16)] if keyed else ["_default"]
        cid = self.allocate_ids(1 + len(names))
        self.collections[name] = replace(
            collection(plain, cid, shards=shards_num),
            db=db,
            schema=replace(schema, name=plain).validated(),
            partitions={n: cid + 1 + i for i, n in enumerate(names)},
            properties=dict(properties or {}),
        )
        self._created[name] = self.now()
        self._partitions[cid] = {
            pid: [n, None] for n, pid in self.collections[name].partitions.items()
        }
        return self.collections[name]

    def drop_collection(self, name: str) -> None:
        self.ddl.append(("drop_collection", (name,)))
        info = self._live(name)
        del self.collections[name]
        self._dropped.append((name, self._created.pop(name, 0), self.now(), info))

    def _live(self, name: str) -> CollectionInfo:
        """The live collection called `name` (not an alias). Raises CollectionNotFound."""
        self.describe_database(split(name)[0])
        if name not in self.collections:
            raise CollectionNotFound(name)
        return self.collections[name]

    def _as_of(self, as_of: int | None) -> dict[str, CollectionInfo]:
        """The collections that existed at `as_of` (now if None), by name."""
        if as_of is None:
            return self.collections
        live = {n: c for n, c in self.collections.items() if self._created.get(n, 0) <= as_of}
        gone = {n: c for n, created, dropped, c in self._dropped if created <= as_of < dropped}
        return {**gone, **live}

    def rename_collection(self, old_name: str, new_name: str) -> None:
        self.ddl.append(("rename_collection", (old_name, new_name)))
        check_name("collection", new_name)
        info = self._live(old_name)
        self.collections[new_name] = replace(self.collections.pop(old_name), name=new_name)
        self._created[new_name] = self._created.pop(old_name, 0)
        self.aliases = {a: new_name if n == info.name else n for a, n in self.aliases.items()}

    def add_collection_field(self, name: str, field: FieldSchema) -> None:
        self.ddl.append(("add_collection_field", (name, field)))
        info = self.describe_collection(name)
        new = added_field(info.schema, field)
        self.collections[qualified(info.db, info.name)] = replace(
            info, schema=with_field(info.schema, new)
        )

    def create_partition(self, collection: str, partition: str) -> None:
        self.ddl.append(("create_partition", (collection, partition)))
        info = self.describe_collection(collection)
        pid = info.partitions[check_name("partition", partition)] = self.allocate_ids()
        self._partitions.setdefault(info.collection_id, {})[pid] = [partition, None]

    def alter_collection_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        self.ddl.append(("alter_collection_properties", (name, properties, delete_keys)))
        info = self.describe_collection(name)
        kept = {k: v for k, v in info.properties.items() if k not in (delete_keys or [])}
        self.collections[qualified(info.db, info.name)] = replace(
            info, properties={**kept, **properties}
        )

    def drop_partition(self, collection: str, partition: str) -> None:
        self.ddl.append(("drop_partition", (collection, partition)))
        info = self.describe_collection(collection)
        pid = info.partitions.pop(partition, None)
        if pid is None:
            raise PartitionNotFound(info.name, partition)
        self._partitions.setdefault(info.collection_id, {})[pid] = [partition, self.now()]

    def create_alias(self, collection: str, alias: str) -> None:
        self.ddl.append(("create_alias", (collection, alias)))
        self._live(collection)
        if alias in self.aliases or alias in self.collections:
            raise CollectionExists(check_name("alias", alias), "alias")
        self.aliases[alias] = collection

    def drop_alias(self, alias: str) -> None:
        self.ddl.append(("drop_alias", (alias,)))
        if self.aliases.pop(alias, None) is None:
            raise AliasNotFound(alias)

    def alter_alias(self, collection: str, alias: str) -> None:
        self.ddl.append(("alter_alias", (collection, alias)))
        if alias not in self.aliases:
            raise AliasNotFound(alias)
        self.aliases[alias] = self._live(collection).name

    def create_index(self, collection: str, spec: IndexSpec) -> None:
        self.ddl.append(("create_index", (collection, spec)))
        info = self.describe_collection(collection)
        resolved = spec.resolved(info.schema)
        info.indexes[resolved["index_name"]] = resolved | {"index_id": self.allocate_ids()}

    def drop_index(self, collection: str, index_name: str) -> None:
        self.ddl.append(("drop_index", (collection, index_name)))
        info = self.describe_collection(collection)
        if info.indexes.pop(index_name, None) is None:
            raise IndexNotFound(info.name, index_name)

    def load_collection(self, name: str, partitions: list[str] | None = None) -> None:
        self.ddl.append(("load_collection", (name, partitions)))
        info = self.describe_collection(name)
        info.load = after_load(info.load, partition_names_of(info, partitions, "load"))

    def release_collection(self, name: str, partitions: list[str] | None = None) -> None:
        self.ddl.append(("release_collection", (name, partitions)))
        info = self.describe_collection(name)
        names = partition_names_of(info, partitions, "release")
        info.load = after_release(info.load, names, info.partitions)

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        self.describe_database(split(name)[0])
        if as_of is None and name in self.aliases:
            name = self.aliases[name]
        found = self._as_of(as_of).get(name)
        if found is None:
            raise CollectionNotFound(name)
        if as_of is None or found.collection_id not in self._partitions:
            return found
        history = self._partitions[found.collection_id].items()
        was = {n: pid for pid, (n, dropped) in history if dropped is None or as_of < dropped}
        return replace(found, partitions={n: was[n] for n in sorted(was, key=was.__getitem__)})

    def has_collection(self, name: str, as_of: int | None = None) -> bool:
        self.describe_database(split(name)[0])
        return name in self._as_of(as_of)

    def list_collections(self, as_of: int | None = None) -> list[str]:
        return sorted(self._as_of(as_of))

    def list_aliases(self, as_of: int | None = None) -> dict[str, int]:
        """The live aliases (the twin keeps no history of them: `as_of` is ignored)."""
        return {a: self.collections[n].collection_id for a, n in self.aliases.items()}

    def meta_horizon(self) -> int:
        return 0

    def meta_version(self) -> int:
        """A fresh value on every call: the twin keeps no DDL count, so a cache of its meta
        never serves an entry twice (always correct, never a hit)."""
        return self.now()

    def collection_histories(self) -> list[CollectionHistory]:
        """Every live and dropped collection, by id, with its partitions' drops."""
        lives: list[tuple[CollectionInfo, int | None]] = [
            (c, None) for c in self.collections.values()
        ]
        lives += [(c, dropped) for _, _, dropped, c in self._dropped]
        return [self._history(c, dropped) for c, dropped in sorted(lives, key=_by_id)]

    def _history(self, c: CollectionInfo, dropped: int | None) -> CollectionHistory:
        parts = self._partitions.get(c.collection_id, {})
        drops = {pid: ts for pid, (_, ts) in parts.items() if ts is not None}
        every = frozenset(parts) | frozenset(c.partitions.values())
        return CollectionHistory(c.collection_id, c.schema, c.created_ts, dropped, drops, every)

    def now(self) -> int:
        return self._clock.allocate()

    def allocate_timestamps(self, count: int = 1) -> int:
        return self._clock.allocate(count)

    def allocate_ids(self, count: int = 1) -> int:
        first, self.next_id = self.next_id, self.next_id + count
        return first

    def tick_source(self, name: str) -> FakeStamper:
        return FakeStamper(iter(self._clock), self.stamped)

    def request_tick(self, after: int | None = None) -> None:
        self.tick_requests += 1

    def strong_ts(self) -> int:
        return self.now()

    def bounded_ts(self) -> int:
        return self.now()

    def meta_point(self, fresh: bool = True) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def write_guard(self, info: CollectionInfo, partition_id: int = -1) -> Iterator[None]:
        live = self.collections.get(info.name)
        if live is None or live.collection_id != info.collection_id:
            raise CollectionNotFound(info.name)
        yield


@dataclass
class FakeSegment:
    """One segment of the datacoord twin: its channel, state and allocated rows."""

    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    rows: int = 0
    state: str = "Growing"

    def info(self) -> dict[str, Any]:
        return {
            "segment_id": self.segment_id,
            "collection_id": self.collection_id,
            "partition_id": self.partition_id,
            "insert_channel": self.vchannel,
            "num_rows": self.rows if self.state == "Flushed" else 0,
            "state": self.state,
        }


@dataclass
class FakeDataCoord:
    """DataCoordService whose segments hold whatever was assigned to them: one Growing
    segment per channel (ids `base + 1`, `base + 2`, ... as they open), sealed by `flush`,
    Flushed by `wait_flushed` (as if a data node had written them at once)."""

    base: int = 5000
    calls: list[tuple[int, int, str, int]] = field(default_factory=list)
    segments: dict[int, FakeSegment] = field(default_factory=dict)

    def assign_segments(
        self,
        collection_id: int,
        partition_id: int,
        vchannel: str,
        pchannel: int,
        rows: int,
        row_bytes: int,
        ts: int,
    ) -> list[tuple[int, int]]:
        self.calls.append((collection_id, partition_id, vchannel, rows))
        channel = (collection_id, partition_id, vchannel)
        growing = [
            s
            for s in self.segments.values()
            if (s.collection_id, s.partition_id, s.vchannel) == channel and s.state == "Growing"
        ]
        if not growing:
            seg = FakeSegment(self.base + len(self.segments) + 1, *channel)
            self.segments[seg.segment_id] = seg
            growing = [seg]
        growing[0].rows += rows
        return [(growing[0].segment_id, rows)]

    def _of(self, collection_id: int) -> list[FakeSegment]:
        return sorted(
            (s for s in self.segments.values() if s.collection_id == collection_id),
            key=lambda s: s.segment_id,
        )

    def flush(self, collection_id: int) -> list[int]:
        for seg in self._of(collection_id):
            if seg.state == "Growing":
                seg.state = "Sealed"
        return [s.segment_id for s in self._of(collection_id) if s.state != "Flushed"]

    def wait_flushed(self, segment_ids: list[int], timeout: float) -> None:
        known = [self.segments[i] for i in segment_ids if i in self.segments]
        for seg in known:
            if seg.state == "Sealed":
                seg.state = "Flushed"
        if not self.flush_state(segment_ids):
            raise FlushTimeout({s.segment_id: s.state for s in known}, timeout)

    def flush_state(self, segment_ids: list[int]) -> bool:
        return all(self.segments[i].state == "Flushed" for i in segment_ids if i in self.segments)

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        return [
            self.segments[i].info()
            if i in self.segments
            else {"segment_id": i, "state": "NotExist"}
            for i in segment_ids
        ]

    def list_segments(self, collection_id: int) -> list[dict[str, Any]]:
        return [s.info() for s in self._of(collection_id)]

    def compaction_groups(
        self, collection_id: int, horizon: int, policy: Any = None, expire_ts: int = 0
    ) -> list[dict[str, Any]]:
        return []  # its segments hold no binlogs


@dataclass
class FakeCollection:
    """What the query node twin holds of a collection: rows with the ts they were written at."""

    info: CollectionInfo
    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


@dataclass
class FakeQueryNode:
    """QueryNodeService with a settable tsafe; reads record their arguments. Collections
    only `known` answer nothing (queries: a row per key of `matching`); collections given to
    `load` answer from their rows, exactly (L2, or the `metric` asked)."""

    tsafe_ts: int = 0
    reads: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, collection, ts)
    known: set[int] = field(default_factory=set)
    matching: list[Any] = field(default_factory=list)  # the keys every query returns
    #: the partitions the last search, query or count read (None: every one)
    last_partitions: list[int] | None = None
    loaded: dict[int, FakeCollection] = field(default_factory=dict)
    one_call = False  # no search_common: every search goes through `search`

    def search_common(self, *args: Any) -> None:
        """Returns None: the fake answers searches only through `search`."""
        return None

    def load(self, info: CollectionInfo, rows: list[dict[str, Any]], ts: int) -> None:
        """Adds `rows` written at `ts`, and applies everything up to `ts`."""
        self.known.add(info.collection_id)
        held = self.loaded.setdefault(info.collection_id, FakeCollection(info))
        held.rows += [(ts, dict(r)) for r in rows]
        self.tsafe_ts = max(self.tsafe_ts, ts)

    def tsafe(self, pchannels: Sequence[int]) -> int:
        return self.tsafe_ts

    def wait_tsafe(self, pchannels: Sequence[int], ts: int, timeout: float) -> None:
        if self.tsafe_ts < ts:
            raise ConsistencyTimeout(ts, self.tsafe_ts, timeout)

    def _read(self, kind: str, collection_id: int, ts: int) -> None:
        held = self.loaded.get(collection_id)
        if collection_id not in self.known or (held and held.info.created_ts > ts):
            raise CollectionNotFound(collection_id)
        self.reads.append((kind, collection_id, ts))

    def _visible(
        self,
        collection_id: int,
        ts: int,
        expr: Any = None,
        keys: list[Any] | None = None,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """The rows visible at `ts` (the last write of each key, if written after
        `expire_ts`), in key order."""
        held = self.loaded.get(collection_id)
        if held is None:
            return []
        pk = next(f.name for f in held.info.schema.fields if f.is_primary)
        latest = {r[pk]: (written, r) for written, r in held.rows if written <= ts}
        latest = {k: (w, r) for k, (w, r) in latest.items() if w > expire_ts}
        rows = [latest[k][1] for k in sorted(latest) if keys is None or k in keys]
        if expr is not None and rows:
            columns = {f: np.array([r[f] for r in rows]) for f in expr.fields}
            rows = [
                r for r, keep in zip(rows, expr.evaluate(columns, len(rows)), strict=True) if keep
            ]
        return rows

    def search(
        self,
        collection_id: int,
        queries: np.ndarray,
        limit: int,
        ts: int,
        partitions: list[int] | None,
        output_fields: list[str],
        *,
        expr: Any = None,
        offset: int = 0,
        group_by: str | None = None,
        params: dict[str, Any] | None = None,
        metric: str | None = None,
        group_size: int = 1,
        expire_ts: int = 0,
        anns_field: str | None = None,
    ) -> SearchResult:
        self._read("search", collection_id, ts)
        self.last_partitions = partitions
        self.search_args = {"params": params, "metric": metric}  # the last search's
        held = self.loaded.get(collection_id)
        if held is None:
            return SearchResult.empty(len(queries))
        rows = self._visible(collection_id, ts, expr, expire_ts=expire_ts)
        hits = [_nearest(held.info, rows, q, limit, offset, output_fields) for q in queries]
        return SearchResult.of_hits(hits)

    def query(
        self,
        collection_id: int,
        ts: int,
        output_fields: list[str],
        partitions: list[int] | None = None,
        expr: Any = None,
        keys: list[Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        self._read("query", collection_id, ts)
        self.last_partitions = partitions
        if collection_id not in self.loaded:
            return [{f: k for f in output_fields} for k in self.matching]
        rows = self._visible(collection_id, ts, expr, keys, expire_ts)[offset:]
        return [{f: r[f] for f in output_fields} for r in rows[:limit]]

    def get(
        self,
        collection_id: int,
        keys: list[Any],
        ts: int,
        output_fields: list[str],
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        self._read("get", collection_id, ts)
        rows = self._visible(collection_id, ts, keys=keys, expire_ts=expire_ts)
        return [{f: r[f] for f in output_fields} for r in rows]

    def count(
        self,
        collection_id: int,
        ts: int,
        partitions: list[int] | None = None,
        expr: Any = None,
        keys: list[Any] | None = None,
        *,
        expire_ts: int = 0,
    ) -> int:
        self._read("count", collection_id, ts)
        self.last_partitions = partitions
        return len(self._visible(collection_id, ts, expr, keys, expire_ts))


def _nearest(
    info: CollectionInfo,
    rows: list[dict[str, Any]],
    query: np.ndarray,
    limit: int,
    offset: int,
    fields: list[str],
) -> list[Hit]:
    """The `limit` rows nearest `query` (squared L2) after `offset`, as hits."""
    if not rows:
        return []
    pk = next(f.name for f in info.schema.fields if f.is_primary)
    vec = next(f.name for f in info.schema.fields if f.dtype.name == "FLOAT_VECTOR")
    vectors = np.array([r[vec] for r in rows], dtype=np.float32)
    distances = ((vectors - np.asarray(query, dtype=np.float32)) ** 2).sum(axis=1)
    order = np.argsort(distances, kind="stable")[offset : offset + limit]
    return [
        {
            "id": rows[i][pk],
            "distance": float(distances[i]),
            "entity": {f: rows[i][f] for f in fields},
        }
        for i in order
    ]


@dataclass
class FakeIndexNode:
    """IndexNodeService over settable facts: the Flushed segments' rows per collection
    (`flushed`), the indexes that exist (`indexes`), the (segment, index) builds done and
    failed, computed into progress as the real node computes it."""

    flushed: dict[int, dict[int, int]] = field(default_factory=dict)  # cid: {segment: rows}
    indexes: set[tuple[int, int]] = field(default_factory=set)  # (cid, index_id)
    built: set[tuple[int, int]] = field(default_factory=set)  # (segment, index_id)
    failed: dict[tuple[int, int], str] = field(default_factory=dict)

    def progress(self, collection_id: int, index_id: int) -> IndexProgress:
        segments = self.flushed.get(collection_id, {})
        total = sum(segments.values())
        if (collection_id, index_id) not in self.indexes:
            return IndexProgress(0, 0, 0, FINISHED)
        indexed = sum(n for s, n in segments.items() if (s, index_id) in self.built)
        reasons = "".join(
            f"{s}: {self.failed[(s, index_id)]};" for s in segments if (s, index_id) in self.failed
        )
        state = FAILED if reasons else FINISHED if indexed == total else IN_PROGRESS
        built = tuple(s for s in segments if (s, index_id) in self.built)
        return IndexProgress(indexed, total, total - indexed, state, reasons, built)
