"""In-memory twins of the processor service interfaces, for unit tests of one processor.

Each implements one Protocol of `vectorlog.processors.*.service` with the least behaviour a
unit test needs and records the calls made to it; none is ever what a user runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectorlog.core.errors import CollectionNotFound, ConsistencyTimeout
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.model import CollectionHistory, CollectionInfo, CollectionSchema, quick_schema
from vectorlog.core.types import Hit, IndexSpec


def hybrid_clock() -> Iterator[int]:
    """Yields strictly increasing hybrid timestamps that follow the wall clock."""
    last = 0
    while True:
        last = max(last + 1, compose(wall_ms()))
        yield last


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


@dataclass
class FakeRootCoord:
    """RootCoordService over a dict of collections, a counting clock and id allocator."""

    collections: dict[str, CollectionInfo] = field(default_factory=dict)
    next_id: int = 1000
    stamped: list[int] = field(default_factory=list)
    tick_requests: int = 0
    ddl: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    _clock: Iterator[int] = field(default_factory=lambda: hybrid_clock())
    #: when each live collection was created (0: put into `collections` by the test)
    _created: dict[str, int] = field(default_factory=dict)
    #: (name, created ts, dropped ts, info) of every dropped collection
    _dropped: list[tuple[str, int, int, CollectionInfo]] = field(default_factory=list)

    def create_collection(
        self,
        name: str,
        schema: CollectionSchema,
        shards_num: int = 1,
        properties: dict[str, str] | None = None,
        num_partitions: int = 0,
    ) -> CollectionInfo:
        self.ddl.append(("create_collection", (name, shards_num)))
        self.collections[name] = collection(name, self.allocate_ids(3), shards=shards_num)
        self._created[name] = self.now()
        return self.collections[name]

    def drop_collection(self, name: str) -> None:
        self.ddl.append(("drop_collection", (name,)))
        info = self.collections.pop(name, None)
        if info is not None:
            self._dropped.append((name, self._created.pop(name, 0), self.now(), info))

    def _as_of(self, as_of: int | None) -> dict[str, CollectionInfo]:
        """The collections that existed at `as_of` (now if None), by name."""
        if as_of is None:
            return self.collections
        live = {n: c for n, c in self.collections.items() if self._created.get(n, 0) <= as_of}
        gone = {n: c for n, created, dropped, c in self._dropped if created <= as_of < dropped}
        return {**gone, **live}

    def rename_collection(self, old_name: str, new_name: str) -> None:
        self.ddl.append(("rename_collection", (old_name, new_name)))

    def create_partition(self, collection: str, partition: str) -> None:
        self.ddl.append(("create_partition", (collection, partition)))

    def alter_collection_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        self.ddl.append(("alter_collection_properties", (name, properties, delete_keys)))

    def drop_partition(self, collection: str, partition: str) -> None:
        self.ddl.append(("drop_partition", (collection, partition)))

    def create_alias(self, collection: str, alias: str) -> None:
        self.ddl.append(("create_alias", (collection, alias)))

    def drop_alias(self, alias: str) -> None:
        self.ddl.append(("drop_alias", (alias,)))

    def alter_alias(self, collection: str, alias: str) -> None:
        self.ddl.append(("alter_alias", (collection, alias)))

    def create_index(self, collection: str, spec: IndexSpec) -> None:
        self.ddl.append(("create_index", (collection, spec)))

    def drop_index(self, collection: str, index_name: str) -> None:
        self.ddl.append(("drop_index", (collection, index_name)))

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        found = self._as_of(as_of).get(name)
        if found is None:
            raise CollectionNotFound(name)
        return found

    def has_collection(self, name: str, as_of: int | None = None) -> bool:
        return name in self._as_of(as_of)

    def list_collections(self, as_of: int | None = None) -> list[str]:
        return sorted(self._as_of(as_of))

    def list_aliases(self, as_of: int | None = None) -> dict[str, int]:
        return {}

    def meta_horizon(self) -> int:
        return 0

    def collection_histories(self) -> list[CollectionHistory]:
        return [
            CollectionHistory(
                c.collection_id,
                c.schema,
                c.created_ts,
                None,
                {},
                frozenset(c.partitions.values()),
            )
            for c in sorted(self.collections.values(), key=lambda c: c.collection_id)
        ]

    def now(self) -> int:
        return next(self._clock)

    def allocate_ids(self, count: int = 1) -> int:
        first, self.next_id = self.next_id, self.next_id + count
        return first

    def tick_source(self, name: str) -> FakeStamper:
        return FakeStamper(self._clock, self.stamped)

    def request_tick(self, after: int | None = None) -> None:
        self.tick_requests += 1

    def strong_ts(self) -> int:
        return self.now()

    @contextlib.contextmanager
    def write_guard(self, info: CollectionInfo, partition_id: int = -1) -> Iterator[None]:
        live = self.collections.get(info.name)
        if live is None or live.collection_id != info.collection_id:
            raise CollectionNotFound(info.name)
        yield


@dataclass
class FakeDataCoord:
    """DataCoordService that puts every channel's rows into segment `base + call number`."""

    base: int = 5000
    calls: list[tuple[int, int, str, int]] = field(default_factory=list)
    flushed: list[int] = field(default_factory=list)

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
        return [(self.base + len(self.calls), rows)]

    def flush(self, collection_id: int) -> list[int]:
        return [self.base + i + 1 for i, c in enumerate(self.calls) if c[0] == collection_id]

    def wait_flushed(self, segment_ids: list[int], timeout: float) -> None:
        self.flushed += segment_ids

    def flush_state(self, segment_ids: list[int]) -> bool:
        return set(segment_ids) <= set(self.flushed)

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        return [{"segment_id": i} for i in segment_ids]

    def list_segments(self, collection_id: int) -> list[dict[str, Any]]:
        return self.get_segment_info(self.flush(collection_id))

    def compaction_groups(
        self, collection_id: int, horizon: int, policy: Any = None, expire_ts: int = 0
    ) -> list[dict[str, Any]]:
        return []  # its segments hold no binlogs


@dataclass
class FakeQueryNode:
    """QueryNodeService with a settable tsafe; reads record their arguments."""

    tsafe_ts: int = 0
    reads: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, collection, ts)
    known: set[int] = field(default_factory=set)
    matching: list[Any] = field(default_factory=list)  # the keys every query returns
    #: the partitions the last search, query or count read (None: every one)
    last_partitions: list[int] | None = None

    def tsafe(self, pchannels: Sequence[int]) -> int:
        return self.tsafe_ts

    def wait_tsafe(self, pchannels: Sequence[int], ts: int, timeout: float) -> None:
        if self.tsafe_ts < ts:
            raise ConsistencyTimeout(ts, self.tsafe_ts, timeout)

    def _read(self, kind: str, collection_id: int, ts: int) -> None:
        if collection_id not in self.known:
            raise CollectionNotFound(collection_id)
        self.reads.append((kind, collection_id, ts))

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
    ) -> list[list[Hit]]:
        self._read("search", collection_id, ts)
        self.last_partitions = partitions
        self.search_args = {"params": params, "metric": metric}  # the last search's
        return [[] for _ in queries]

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
        return [{f: k for f in output_fields} for k in self.matching]

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
        return []

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
        return 0
