"""The proxy (seed 001 s.6, seed 004): the entry of every request (`ProxyService`).

DDL and meta reads are forwarded to rootcoord.

Insert: validate rows against the schema (nothing is written on error), assign auto_id keys
and row ids, stamp one ts for the whole batch, route rows to vchannels by primary-key hash,
take segment assignments, and append the RowsInserted events to the dml pchannels as one
batch (`streams.batches`: readers apply it whole or not at all, even when a crash on Kafka
cut the append short); the call returns only after the log acknowledged every record, so an
acknowledged write is whole and durable. A write holds rootcoord's write guard
from its last check of the meta through its stamp and append, so a drop of its collection or
partition is stamped entirely before or after it. Reads resolve a guarantee ts, wait for the
query node's tsafe, and read at that ts; a Strong read with nothing stamped since the last
tick is served at that tick and appends nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import replace
from typing import Any

import numpy as np

from vectorlog.core.databases import check_database_name, check_qualified, qualified
from vectorlog.core.errors import (
    AliasNotFound,
    CollectionConflict,
    CollectionExists,
    CollectionNotFound,
    IndexNotFound,
    InvalidArgument,
    PartitionNotFound,
)
from vectorlog.core.faults import crash_point
from vectorlog.core.hybrid import ranker_spec
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.core.model import (
    DEFAULT_PARTITION,
    HALF_TYPES,
    CollectionInfo,
    CollectionSchema,
    DataType,
    FieldSchema,
    partition_tag,
)
from vectorlog.core.properties import TTL_PROPERTY, expire_ts
from vectorlog.core.results import SearchResult
from vectorlog.core.types import (
    COLLECTION_LEVEL,
    CONSISTENCY_PROPERTY,
    DEFAULT_SEARCH,
    STRONG,
    DeleteResult,
    Hit,
    IndexSpec,
    InsertResult,
    ReadAt,
    SearchOptions,
    collection_level,
    level_name,
)
from vectorlog.expr import Expr
from vectorlog.processors.datacoord.service import DataCoordService
from vectorlog.processors.indexnode.service import IndexNodeService
from vectorlog.processors.proxy import arguments as a
from vectorlog.processors.proxy import common_search, dynamic, hybrid, imports, loaded, plancache
from vectorlog.processors.proxy import compaction_requests as compactions
from vectorlog.processors.proxy import function_rank as fr
from vectorlog.processors.proxy import indexes as ix
from vectorlog.processors.proxy import partition_key as pkey
from vectorlog.processors.proxy import reads as r
from vectorlog.processors.proxy import search_shape as shape
from vectorlog.processors.proxy import validation as v
from vectorlog.processors.proxy.batches import (
    delete_events,
    insert_events,
    row_bytes,
    split_by_shard,
    take,
)
from vectorlog.processors.proxy.consistency import guarantee
from vectorlog.processors.proxy.credentials import Credentials
from vectorlog.processors.proxy.functions import bm25_params, text_queries
from vectorlog.processors.proxy.hybrid_groups import Grouping, grouped
from vectorlog.processors.proxy.rerank import Ranker
from vectorlog.processors.querynode.service import QueryNodeService
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.storage import ObjectStore
from vectorlog.streams.batches import batched
from vectorlog.streams.log.base import Append, Headers, Log, with_headers
from vectorlog.streams.topics import Serdes, Topics


class Proxy:
    """Serves every client request for one process (implements `ProxyService`)."""

    def __init__(
        self,
        name: str,
        rootcoord: RootCoordService,
        datacoord: DataCoordService,
        querynode: QueryNodeService,
        log: Log,
        topics: Topics,
        serdes: Serdes,
        read_timeout: float = 30.0,
        indexnode: IndexNodeService | None = None,
        objects: ObjectStore | None = None,
    ) -> None:
        """`indexnode`: the build progress describe_index reports (None: no index node, so
        every index reports zero rows and Finished). `objects`: the storage root bulk inserts
        write to (None: no data node, no bulk insert)."""
        self.rc, self.dc, self.qn, self.log = rootcoord, datacoord, querynode, log
        self.credentials = Credentials(rootcoord)
        self.indexnode, self.objects = indexnode, objects
        self.topic = topics.dml
        self.serde = serdes.for_topic(self.topic)
        self.source = rootcoord.tick_source(name)
        self.read_timeout = read_timeout
        self._plans = plancache.PlanCache(common_search.common_plan)

    # -- DDL and meta reads: forwarded to rootcoord ----------------------------------------
    def create_collection(
        self,
        name: str,
        schema: CollectionSchema,
        shards_num: int = 1,
        properties: dict[str, str] | None = None,
        num_partitions: int = 0,
    ) -> CollectionInfo:
        """Returns the created collection; its reads that name no level read at its
        `consistency_level` property (default Strong). Creating an existing collection again
        with identical parameters returns it (Milvus's rootcoord: idempotent). Raises
        InvalidArgument (a property that is not a level), CollectionConflict (same name,
        other parameters), CollectionExists (an alias of that name)."""
        props = a.properties(properties)
        if props and CONSISTENCY_PROPERTY in props:
            props[CONSISTENCY_PROPERTY] = level_name(props[CONSISTENCY_PROPERTY])
        name = a.name("collection", name)
        try:
            return self.rc.create_collection(name, schema, shards_num, props, num_partitions)
        except CollectionExists as exc:
            if exc.what != "collection":
                raise
            existing = self.rc.describe_collection(name)
            if not _same_collection(existing, schema, shards_num, props or {}):
                raise CollectionConflict(name) from None
            return existing

    def drop_collection(self, name: str) -> None:
        """Drops a collection; a missing one is a no-op, as Milvus 2.4 (drops are idempotent).
        Raises InvalidName first (as Milvus's proxy), InvalidArgument (an alias, or a
        collection with aliases)."""
        try:
            self.rc.drop_collection(check_qualified("collection", name))
        except CollectionNotFound:
            return

    def rename_collection(self, old_name: str, new_name: str) -> None:
        self.rc.rename_collection(old_name, new_name)

    def alter_collection_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        """Sets `properties` (values stored as their str()) or removes `delete_keys`.
        Raises InvalidArgument (see RootCoord.alter_collection_properties), CollectionNotFound."""
        props = a.properties(properties) or {}
        keys = a.string_list("property_keys", delete_keys) or []
        self.rc.alter_collection_properties(a.name("collection", name), props, keys)

    def add_collection_field(self, name: str, field: FieldSchema) -> None:
        """Adds a nullable scalar `field` to a collection (or alias target): rows written
        before read as its default value, else null. Raises InvalidArgument (Milvus's
        rules, core/added_fields.py), CollectionNotFound."""
        self.rc.add_collection_field(a.name("collection", name), field)

    # Milvus's proxy checks the names' forms before it looks anything up (PreExecute):
    # the collection's, then the partition's; an alias's, then the collection's.
    def create_partition(self, collection: str, partition: str) -> None:
        self.rc.create_partition(check_qualified("collection", collection), partition)

    def drop_partition(self, collection: str, partition: str) -> None:
        check_qualified("collection", collection)
        self.rc.drop_partition(collection, partition_tag(partition))

    def load_collection(self, name: str, partitions: list[str] | None = None) -> None:
        """Loads the collection (or alias target), or those `partitions`. Raises
        InvalidName, CollectionNotFound, PartitionNotFound, LoadRefused."""
        self.rc.load_collection(check_qualified("collection", name), partitions)

    def release_collection(self, name: str, partitions: list[str] | None = None) -> None:
        """Releases the collection (or alias target), or those `partitions`: their reads are
        refused until a load, writes go on. Raises InvalidName, CollectionNotFound,
        PartitionNotFound, InvalidArgument, LoadRefused."""
        self.rc.release_collection(check_qualified("collection", name), partitions)

    def create_alias(self, collection: str, alias: str) -> None:
        check_qualified("alias", alias)
        self.rc.create_alias(check_qualified("collection", collection), alias)

    def drop_alias(self, alias: str) -> None:
        self.rc.drop_alias(alias)

    def alter_alias(self, collection: str, alias: str) -> None:
        check_qualified("alias", alias)
        self.rc.alter_alias(check_qualified("collection", collection), alias)

    def create_index(self, collection: str, spec: IndexSpec) -> None:
        """Creates an index; one identical to an existing index is a no-op (as Milvus).
        Raises InvalidArgument naming a bad field, type, metric or parameter, IndexExists."""
        if not ix.exists_already(self._info(collection), spec):
            self.rc.create_index(collection, spec)

    def describe_index(
        self, collection: str, index_name: str, as_of: int | None = None
    ) -> dict[str, Any]:
        """Returns the index's description with Milvus's keys and its build progress.
        Raises CollectionNotFound, IndexNotFound."""
        info = self._info(collection, as_of)
        counted = ix.counted_segments(info, self.dc.list_segments(info.collection_id))
        return ix.describe(info, index_name, self.indexnode, counted)

    def drop_index(self, collection: str, index_name: str) -> None:
        """Drops an index; dropping one that does not exist is a no-op, as in Milvus (its
        datacoord answers Success). Raises CollectionNotFound."""
        with suppress(IndexNotFound):
            self.rc.drop_index(collection, index_name)

    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        """Returns the collection as of `as_of`. Raises InvalidName for a name no collection
        can have (Milvus checks the name first: pymilvus's has_collection describes),
        CollectionNotFound."""
        return self._info(check_qualified("collection", name), as_of)

    def has_collection(self, name: str, as_of: int | None = None) -> bool:
        """Returns whether a collection (or alias) `name` exists. Raises InvalidName for a
        name no collection can have (Milvus checks the name first)."""
        return self.rc.has_collection(check_qualified("collection", name), a.as_of(as_of))

    def list_collections(self, as_of: int | None = None) -> list[str]:
        return self.rc.list_collections(a.as_of(as_of))

    def describe_alias(self, alias: str) -> str:
        """Returns the name of the collection `alias` points to. Raises AliasNotFound."""
        if alias not in self.rc.list_aliases():
            raise AliasNotFound(alias)
        try:
            return self.rc.describe_collection(alias).name
        except CollectionNotFound:  # dropped meanwhile
            raise AliasNotFound(alias) from None

    def list_aliases(self, as_of: int | None = None) -> list[str]:
        return sorted(self.rc.list_aliases(as_of))

    # -- databases -------------------------------------------------------------------------
    def create_database(self, name: str, properties: dict[str, str] | None = None) -> None:
        self.rc.create_database(check_database_name(name), a.properties(properties))

    def drop_database(self, name: str) -> None:
        self.rc.drop_database(check_database_name(name))

    def alter_database_properties(
        self, name: str, properties: dict[str, str], delete_keys: list[str] | None = None
    ) -> None:
        props = a.properties(properties) or {}
        keys = a.string_list("property_keys", delete_keys) or []
        self.rc.alter_database_properties(check_database_name(name), props, keys)

    def describe_database(self, name: str, as_of: int | None = None) -> dict[str, Any]:
        return self.rc.describe_database(check_database_name(name), a.as_of(as_of))

    def list_databases(self, as_of: int | None = None) -> list[dict[str, Any]]:
        return self.rc.list_databases(a.as_of(as_of))

    # -- writes ----------------------------------------------------------------------------
    def meta_point(self, fresh: bool = True) -> AbstractContextManager[None]:
        """Returns a block within which this thread's latest-meta look-ups see every DDL
        acknowledged before it began, made sure of once, or if not `fresh` the meta read so
        far (RootCoordService.meta_point)."""
        return self.rc.meta_point(fresh)

    def insert(
        self,
        name: str,
        rows: Any,
        partition_name: str | None = None,
        upsert: bool = False,
        headers: Headers = (),
    ) -> InsertResult:
        """Inserts rows; returns {insert_count, ids, timestamp} once durable on the log.

        A row whose key exists replaces it from this insert's ts on (an upsert); `upsert=True`
        only makes the key required even on an auto_id collection. Every dml record written
        carries `headers` (the ingest consumer's source positions).
        """
        info = self._info(name)
        keyed = info.schema.partition_key is not None
        if keyed and partition_name:
            raise InvalidArgument(pkey.NAMED_PARTITIONS)
        partition = -1 if keyed else self._partition(info, partition_name)
        cols = v.rows_to_columns(info.schema, rows, upsert)
        n = len(rows) if not isinstance(rows, dict) else 1
        pks = self._primary_keys(info, cols, n, upsert)
        first_row_id = self.rc.allocate_ids(n)
        per_row = row_bytes(info.schema, cols, n)
        with self.rc.write_guard(info, partition), self.source.stamp() as ts:
            records = self._insert_records(info, partition, cols, pks, n, first_row_id, per_row, ts)
            self.log.append(self.topic, batched(with_headers(records, headers)))
        ids = pks.tolist() if isinstance(pks, np.ndarray) else list(pks)
        return {"insert_count": n, "ids": ids, "timestamp": ts}

    def _insert_records(
        self,
        info: CollectionInfo,
        partition: int,
        cols: dict[str, Any],
        pks: Any,
        n: int,
        first_row_id: int,
        per_row: int,
        ts: int,
    ) -> list[Append]:
        """Returns the dml records of an insert's rows: routed to their partitions (by the
        partition key when `partition` is -1) and shards (by key hash), each shard's rows
        split over datacoord's segment assignments. One partition and one shard (the usual
        collection): every row goes to shard 0 as it is, with no routing (the same records)."""
        if partition != -1 and info.shards_num == 1:
            return self._shard_records(info, partition, 0, None, cols, first_row_id, per_row, ts)
        records = []
        for part, rows_of in self._by_partition(info, partition, cols, n):
            part_cols = {k: take(c, rows_of) for k, c in cols.items()}
            for shard, idx in split_by_shard(info, take(pks, rows_of)):
                first = first_row_id + int(rows_of[0])
                records += self._shard_records(
                    info, part, shard, idx, part_cols, first, per_row, ts
                )
        return records

    @staticmethod
    def _by_partition(
        info: CollectionInfo, partition: int, cols: dict[str, Any], n: int
    ) -> list[tuple[int, np.ndarray]]:
        """Returns (partition id, row indices) of an insert's rows: all in `partition`, or
        routed by the partition key (partition -1)."""
        key = info.schema.partition_key
        if key is None or partition != -1:
            return [(partition, np.arange(n))]
        return list(pkey.route(info, cols[key.name]))

    def commit_import(
        self,
        name: str,
        partition_name: str | None,
        segments: list[dict[str, Any]],
        job_id: int,
    ) -> int:
        """Makes a bulk insert's segments (written with a placeholder ts, see
        vectorlog/engines/spark/bulkload_job.py) visible at one stamped ts: writes their timestamp
        binlogs, then appends one SegmentImported per vchannel in a single append; returns the
        ts once durable. Raises CollectionNotFound / PartitionNotFound (nothing visible),
        InvalidArgument, StorageError, LogError."""
        if self.objects is None:
            raise InvalidArgument("bulk insert needs the data node (datanode is 'off')")
        info = self._info(name)
        partition = self._partition(info, partition_name)
        first_log_id = self.rc.allocate_ids(max(1, len(segments)))
        with self.rc.write_guard(info, partition), self.source.stamp() as ts:
            stamped, placeholders = imports.stamp_segments(
                self.objects, self.rc, info, partition, segments, ts, first_log_id
            )
            records = imports.imported_events(info, partition, stamped, job_id, ts, self.serde)
            crash_point("proxy.import.before_append")
            self.log.append(self.topic, batched(records))
        imports.delete_quietly(self.objects, placeholders)
        return ts

    def compaction_groups(self, name: str, horizon: int) -> list[dict[str, Any]]:
        """Returns the groups of Flushed segments of a collection worth merging (datacoord's
        policy), each with the files a merge reads; a segment holding rows the collection's
        TTL expired by `horizon` is rewritten alone. Raises CollectionNotFound."""
        info = self._info(name)
        expired = expire_ts(info.properties, horizon)
        return self.dc.compaction_groups(info.collection_id, horizon, expire_ts=expired)

    def commit_compaction(
        self,
        name: str,
        group: dict[str, Any],
        result: dict[str, Any],
        plan_id: int,
        horizon: int,
    ) -> int:
        """Swaps a merge's segment in for the group's at one stamped ts (one SegmentsCompacted
        on dml); returns the ts once durable. Raises CollectionNotFound, CompactionConflict
        (a merged segment is no longer Flushed: nothing was appended), LogError."""
        info = self._info(name)
        with self.rc.write_guard(info, group["partition_id"]), self.source.stamp() as ts:
            olds = [s["segment_id"] for s in group["segments"]]
            compactions.check_flushed(plan_id, self.dc.get_segment_info(olds))
            record = compactions.compacted_event(
                info, group, result, plan_id, horizon, ts, self.serde
            )
            crash_point("proxy.compaction.before_append")
            self.log.append(self.topic, [record])
        return ts

    def _primary_keys(
        self, info: CollectionInfo, cols: dict[str, Any], n: int, upsert: bool
    ) -> Any:
        pk = info.schema.primary
        if pk.auto_id and not upsert:
            first = self.rc.allocate_ids(n)
            keys = np.arange(first, first + n, dtype=np.int64)
            cols[pk.name] = keys if pk.dtype is DataType.INT64 else [str(k) for k in keys]
        else:
            v.check_unique(pk, cols[pk.name])
        return cols[pk.name]

    def _shard_records(
        self,
        info: CollectionInfo,
        partition: int,
        shard: int,
        idx: np.ndarray | None,
        cols: dict[str, Any],
        first_row_id: int,
        per_row: int,
        ts: int,
    ) -> list[Append]:
        """Returns the records of the rows `idx` of `cols` (None: all of them) on `shard`,
        over the segments datacoord assigns them."""
        vch, pch = info.vchannels[shard], info.pchannels[shard]
        sub = cols if idx is None else {k: take(c, idx) for k, c in cols.items()}
        n = len(sub[info.schema.primary.name]) if idx is None else len(idx)
        limit, key = self.log.max_message_bytes, self.serde.vchannel_key(vch)
        out, lo = [], 0
        for seg, count in self.dc.assign_segments(
            info.collection_id, partition, vch, pch, n, per_row, ts
        ):
            whole = lo == 0 and count == n  # one segment takes every row: no copy
            part = sub if whole else {k: take(c, np.arange(lo, lo + count)) for k, c in sub.items()}
            body = {
                "collection_id": info.collection_id,
                "partition_id": partition,
                "segment_id": seg,
                "first_row_id": first_row_id + lo,
            }
            rows_bytes = per_row if whole and idx is None else None
            for data in insert_events(
                info, part, count, body, ts, vch, self.serde, limit, rows_bytes
            ):
                out.append(Append(pch, data, key))
            lo += count
        return out

    def delete(
        self,
        name: str,
        ids: Any = None,
        partition_name: str | None = None,
        filter: str | None = None,  # noqa: A002 (MilvusClient's name)
        filter_params: dict[str, Any] | None = None,
        headers: Headers = (),
    ) -> DeleteResult:
        """Deletes rows by primary key, or those matching `filter` (exactly one of the two);
        returns {delete_count, timestamp} once durable; its dml records carry `headers`.

        A filter that is one `pk in [...]` (what pymilvus sends for ids=) or `pk == v` deletes
        those keys without reading, each counted, as Milvus's simple delete (an `or` of them
        is read like any other filter, as there).
        Another filter is evaluated by a Strong read on the query node; the keys it matched
        are deleted like `ids` (key deletes on the log, so a replay deletes the same rows),
        and delete_count is their number. Raises InvalidArgument, InvalidExpression."""
        info = self._info(name)
        if info.schema.partition_key is not None and partition_name:
            raise InvalidArgument(pkey.NAMED_PARTITIONS)
        partition = -1 if partition_name is None else self._partition(info, partition_name)
        if filter == "" and ids is not None:  # as pymilvus: an empty filter is none
            filter = None
        if (ids is None) == (filter is None):
            raise InvalidArgument("delete needs exactly one of ids= and filter=")
        keys, read_ts = self._keys_to_delete(info, ids, filter, filter_params, partition)
        if read_ts and not len(keys):  # a filter that matched nothing: nothing to append
            return {"delete_count": 0, "timestamp": read_ts}
        limit = self.log.max_message_bytes
        with self.rc.write_guard(info, partition), self.source.stamp() as ts:
            records = []
            for shard, idx in split_by_shard(info, keys):
                vch, pch = info.vchannels[shard], info.pchannels[shard]
                for data in delete_events(
                    info, take(keys, idx), partition, ts, vch, self.serde, limit
                ):
                    records.append(Append(pch, data, self.serde.vchannel_key(vch)))
            self.log.append(self.topic, batched(with_headers(records, headers)))
        return {"delete_count": len(keys), "timestamp": ts}

    def _keys_to_delete(
        self, info: CollectionInfo, ids: Any, text: str | None, params: Any, partition: int
    ) -> tuple[Any, int]:
        """Returns (the primary keys a delete deletes, the ts of the read that found them, or
        0): `ids`, the keys a key-only filter names, or those of the rows a filter matches.
        Raises InvalidArgument, InvalidExpression."""
        pk = info.schema.primary
        if text is None:
            return v.primary_keys(pk, ids), 0
        expr = r.expression(info.schema, text, params)
        if expr is None:
            raise InvalidArgument("delete filter must be a non-empty expression")
        listed = expr.listed_keys(pk.name)
        if listed is not None:
            return v.primary_keys(pk, listed), 0
        return self._matching_keys(info, expr, partition)

    def _matching_keys(self, info: CollectionInfo, expr: Expr, partition: int) -> tuple[Any, int]:
        """Returns (the primary keys of the rows matching `expr` in `partition` (-1: any) at a
        Strong read ts, that ts)."""
        ts = self.read_ts(info, STRONG)
        parts = None if partition == -1 else [partition]
        pk = info.schema.primary
        with _named(info):
            rows = self.qn.query(info.collection_id, ts, [pk.name], parts, expr)
        keys = [row[pk.name] for row in rows]
        return (v.primary_keys(pk, keys) if keys else []), ts

    def _partition(self, info: CollectionInfo, name: str | None) -> int:
        name = a.optional_name("partition", name) or DEFAULT_PARTITION
        if name not in info.partitions:
            partition_tag(name)  # Milvus checks the name's form before its existence
            raise PartitionNotFound(info.name, name)
        return info.partitions[name]

    # -- flush and segments ---------------------------------------------------------------
    def flush(self, name: str, wait: bool = True, timeout: float | None = None) -> list[int]:
        """Seals the collection's Growing segments; returns their ids (and those of its other
        segments not Flushed yet), after they are Flushed unless `wait` is False.

        Raises CollectionNotFound, FlushTimeout."""
        info = self._info(name)
        timeout = a.timeout(timeout)
        ids = self.dc.flush(info.collection_id)
        if wait and ids:
            self.dc.wait_flushed(ids, self.read_timeout if timeout is None else timeout)
        return ids

    def get_flush_state(self, segment_ids: list[int]) -> bool:
        return self.dc.flush_state(list(segment_ids))

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        return self.dc.get_segment_info(list(segment_ids))

    def list_segments(self, name: str) -> list[dict[str, Any]]:
        """Returns the info of every segment of the collection. Raises CollectionNotFound."""
        return self.dc.list_segments(self._info(name).collection_id)

    # -- reads -----------------------------------------------------------------------------
    def read_ts(self, info: CollectionInfo, at: ReadAt) -> int:
        """Waits until the query node can read `info` at the read's guarantee ts; returns the
        ts to read at: the guarantee ts, or (Bounded, Eventually) the node's tsafe then.

        A Strong read's "now" is rootcoord's `strong_ts`: the last tick when nothing was
        stamped since, so a read on a quiet cluster waits for no new tick and appends
        nothing. A Bounded read counts back from rootcoord's `bounded_ts` (in a process of
        the cluster mode, its block of timestamps: no RPC) and waits only if the node is more
        than the staleness bound behind that. Raises ConsistencyTimeout, InvalidArgument (an
        `as_of` in the future).
        """
        if at.as_of is not None and at.as_of > self.rc.now():
            raise InvalidArgument(f"as_of {at.as_of} is in the future: nothing is known there yet")
        level = at.consistency_level
        if level is None:
            level = collection_level(info.properties)
        g = guarantee(level, self.rc.strong_ts, at.session_ts, at.as_of, recent=self.rc.bounded_ts)
        ts = max(g.wait_for, info.created_ts, info.schema_ts)  # the node has every field
        tsafe = self.qn.tsafe(info.pchannels)
        if tsafe < ts:
            if at.as_of is not None:  # nothing stamped in (quiet tick, as_of]: same answer
                ts = max(min(ts, self.rc.strong_ts()), info.created_ts)
            self.rc.request_tick(ts)
            timeout = self.read_timeout if at.timeout is None else at.timeout
            self.qn.wait_tsafe(info.pchannels, ts, timeout)
            tsafe = self.qn.tsafe(info.pchannels)
        return max(tsafe, ts) if g.read_applied else ts

    def search(
        self,
        name: str,
        data: Any,
        limit: int = 10,
        output_fields: list[str] | None = None,
        partition_names: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
        options: SearchOptions = DEFAULT_SEARCH,
        ranker: Any = None,
    ) -> list[list[Hit]]:
        """Returns, per query vector, up to `limit` hits {id, distance, entity}: the hits of
        `search_result` (which see)."""
        return self.search_result(
            name, data, limit, output_fields, partition_names, at, options, ranker
        ).hits()

    def search_result(
        self,
        name: str,
        data: Any,
        limit: int = 10,
        output_fields: list[str] | None = None,
        partition_names: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
        options: SearchOptions = DEFAULT_SEARCH,
        ranker: Any = None,
    ) -> SearchResult:
        """Returns, per query vector, up to `limit` hits (ids, distances, the entities'
        output fields) (the `options`: filter, offset, group_by_field and group_size,
        search_params with a range search's radius / range_filter, anns_field); with a
        function `ranker` (function_rank.py), the hits reranked by it, as Milvus reranks
        the hits a search found. Raises InvalidArgument, InvalidExpression, RerankRefused
        before reading anything."""
        if (
            ranker is None
            and output_fields is None
            and partition_names is None
            and at.as_of is None
            and at.timeout is None
            and _common_options(options)
        ):
            found = self.search_common(
                name, data, limit, options.search_params, at.consistency_level, options.anns_field
            )
            if found is not None:
                return found
        info = self._info(name, at.as_of)
        specs = None if ranker is None else fr.specs_of(ranker)
        if ranker is not None and specs is None:
            raise InvalidArgument(f"a search's ranker must be a Function, not {ranker!r:.60}")
        rank = None if specs is None else fr.parse(specs, info.schema, 1)
        if rank is not None and options.group_by_field:
            raise InvalidArgument("vectorlog does not serve a function ranker in a grouping search")
        wanted = fr.with_input(output_fields, rank)
        plan = self._plan(info, data, limit, wanted, partition_names, options)
        plan = loaded.loaded_plan(self._now(info, at), plan)
        ts = self.read_ts(info, at)
        found = self._run(info, plan, ts, at)
        if rank is None and not plan.out.lift:
            return found
        hits = found.hits()
        if rank is not None:
            hits = [rank.fuse([q], [plan.metric], len(q)) for q in hits]
            fr.drop_input(hits, output_fields, rank)
        return SearchResult.of_hits(plan.out.hits(hits))

    def search_common(
        self,
        name: str,
        data: Any,
        limit: int,
        search_params: dict[str, Any] | None,
        consistency_level: str | None,
        anns_field: str | None = None,
    ) -> SearchResult | None:
        """Returns `search_result(name, data, limit, at=read_at(consistency_level),
        options=SearchOptions(search_params=search_params, anns_field=anns_field))` in one
        call where the common search allows (common_search.py), else None (the caller then
        calls `search_result`)."""
        return common_search.search(
            self, name, data, limit, search_params, consistency_level, anns_field
        )

    def hybrid_search(
        self,
        name: str,
        requests: list[Any],
        ranker: Any,
        limit: int = 10,
        output_fields: list[str] | None = None,
        partition_names: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
        offset: int = 0,
        grouping: Grouping | None = None,
    ) -> list[list[Hit]]:
        """Returns, per query, up to `limit` hits (after `offset`) of the ANN searches of
        `requests` (AnnSearchRequests) fused by `ranker` (RRFRanker, WeightedRanker), each
        with its fused score as its distance (rerank.py), all read at one ts; with
        `grouping`, the hits of `limit` groups (after `offset` groups) of the field's
        values (hybrid_groups.py). Raises InvalidArgument (Milvus's messages) before any
        search runs."""
        info = self._info(name, at.as_of)
        reqs = hybrid.requests(requests)
        lim = r.limit(limit)
        off = r.offset(offset, lim)
        specs = fr.specs_of(ranker)
        if specs is None:
            rank = Ranker.parse(ranker_spec(ranker), len(reqs))
        else:
            rank = fr.parse(specs, info.schema, len(reqs))
        wanted = fr.with_input(hybrid.with_group_field(output_fields, grouping), rank)
        plans = [
            self._plan(info, q.data, q.limit, wanted, partition_names, hybrid.options(q, grouping))
            for q in reqs
        ]
        nq = hybrid.same_nq([len(p.queries) for p in plans])
        now = self._now(info, at)
        plans = [loaded.loaded_plan(now, p) for p in plans]
        ts = self.read_ts(info, at)
        routes = [self._run(info, p, ts, at).hits() for p in plans]
        metrics = [p.metric for p in plans]
        per_query = [[hits[i] for hits in routes] for i in range(nq)]
        if grouping is None:
            fused = [rank.fuse(hits, metrics, lim, off) for hits in per_query]
        else:
            every = [rank.fuse(hits, metrics, sum(map(len, hits))) for hits in per_query]
            larger = rank.larger_is_better(metrics)
            fused = [grouped(hits, grouping, lim, off, larger) for hits in every]
            hybrid.drop_unasked(fused, output_fields, grouping)
        fr.drop_input(fused, output_fields, rank)
        return plans[0].out.hits(fused)

    def _plan(
        self,
        info: CollectionInfo,
        data: Any,
        limit: int,
        output_fields: list[str] | None,
        partition_names: list[str] | None,
        options: SearchOptions,
    ) -> hybrid.SearchPlan:
        """Returns a search's checked arguments (all but the vectors from the plan cache when
        the same arguments were checked against this collection version). Raises
        InvalidArgument, InvalidExpression."""
        key = plancache.search_key(info, limit, output_fields, partition_names, options)
        cached = self._plans.get(info, key)
        if cached is not None:
            queries = self._queries(cached.field, data)
            shape.nq(len(queries))
            return cached.with_queries(queries)
        plan = self._checked_plan(info, data, limit, output_fields, partition_names, options)
        if not isinstance(plan.queries, list):  # raw text (BM25) is analysed on every call
            self._plans.put(info, key, plan)
        return plan

    def _checked_plan(
        self,
        info: CollectionInfo,
        data: Any,
        limit: int,
        output_fields: list[str] | None,
        partition_names: list[str] | None,
        options: SearchOptions,
    ) -> hybrid.SearchPlan:
        """Returns a search's checked arguments. Raises InvalidArgument, InvalidExpression."""
        field = r.anns_field(info.schema, options.anns_field)
        queries = text_queries(info.schema, field, data) or self._queries(field, data)
        shape.nq(len(queries))
        lim = r.limit(limit)
        offset = r.offset(options.offset, lim)
        fields = self._output_fields(info, output_fields, default=[])
        metric = ix.search_metric(info, field)
        params = shape.range_params(r.search_params(options.search_params, metric), metric)
        if metric == "BM25":  # the index's k1 and b score growing rows too
            params = bm25_params(info.indexes, field) | params
        group_by = r.group_by_field(info.schema, options.group_by_field)
        size = shape.group_size(options.group_size)
        expr = r.expression(info.schema, options.filter, options.filter_params)
        parts = self._partitions(info, partition_names, expr)
        out = dynamic.output(info.schema, fields)
        return hybrid.SearchPlan(
            field, queries, lim, offset, out, metric, params, group_by, size, expr, parts
        )

    def _run(self, info: CollectionInfo, p: hybrid.SearchPlan, ts: int, at: ReadAt) -> SearchResult:
        """Returns the query node's result of a planned search at `ts`. Raises
        CollectionNotFound by the collection's name (as _named, without its generator: this
        runs once per search). A fan-out that coalesces searches may read one later than
        `ts` unless it is a time-travel read (runners.coalesce says why that is safe)."""
        later = {"read_later": at.as_of is None} if getattr(self.qn, "coalesces", False) else {}
        try:
            return self.qn.search(
                info.collection_id,
                p.queries,
                p.limit,
                ts,
                p.partitions,
                p.out.fields,
                expr=p.expr,
                offset=p.offset,
                group_by=p.group_by,
                params=p.params,
                metric=p.metric,
                group_size=p.group_size,
                expire_ts=_expired(info, at, ts),
                anns_field=p.field.name,
                **later,
            )
        except CollectionNotFound:
            raise CollectionNotFound(qualified(info.db, info.name)) from None

    def query(
        self,
        name: str,
        filter: str | None = "",  # noqa: A002 (MilvusClient's name)
        output_fields: list[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
        ids: Any = None,
        partition_names: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
        filter_params: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Returns the rows matching `filter` (or with the primary keys `ids`) in primary-key
        order, from the `offset`-th, at most `limit`; [{"count(*)": n}] for
        output_fields=["count(*)"]. An offset without a limit is ignored: every row is
        returned (Milvus's proxy reads the offset only with a limit). Raises InvalidArgument
        (as Milvus: ids with a filter, an empty filter without limit or ids, limit + offset >
        16384), InvalidExpression."""
        info = self._info(name, at.as_of)
        lim = r.query_limit(limit)
        off = 0 if lim is None else r.query_offset(offset, lim)
        fields = r.query_fields(info.schema, a.name_list("output_fields", "field", output_fields))
        expr = r.expression(info.schema, filter, filter_params)
        parts = self._partitions(info, partition_names, expr)
        keys = None if ids is None else self._keys(info, ids)
        if keys is not None and expr is not None:
            raise InvalidArgument("query takes ids= or filter=, not both (as Milvus)")
        if keys is None and expr is None and lim is None and fields is not None:
            raise InvalidArgument("empty expression should be used with limit")  # Milvus's words
        parts = loaded.read_partitions(self._now(info, at), parts, loaded.QUERY)
        ts = self.read_ts(info, at)
        cid, expired = info.collection_id, _expired(info, at, ts)
        with _named(info):
            if fields is None:
                n = self.qn.count(cid, ts, parts, expr, keys, expire_ts=expired)
                return [{r.COUNT: n}]
            out = dynamic.output(info.schema, fields)
            rows = self.qn.query(
                cid, ts, out.fields, parts, expr, keys, lim, off, expire_ts=expired
            )
            return out.rows(rows)

    def get(
        self,
        name: str,
        ids: Any,
        output_fields: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
    ) -> list[dict[str, Any]]:
        """Returns the entities with the given primary keys that are visible, in the order
        of `ids` (each key once)."""
        info = self._info(name, at.as_of)
        keys = self._keys(info, ids)
        fields = self._output_fields(info, output_fields, default=None)
        ts = self.read_ts(info, at)
        pk = info.schema.primary.name
        fields = [pk, *(f for f in fields if f != pk)]  # results name their key, first
        out = dynamic.output(info.schema, fields)
        parts = loaded.read_partitions(self._now(info, at), None, loaded.QUERY)
        with _named(info):
            expired = _expired(info, at, ts)
            if parts is None:
                rows = self.qn.get(info.collection_id, keys, ts, out.fields, expire_ts=expired)
            else:  # some partitions released: the loaded ones' rows, in the order of `ids`
                found = self.qn.query(
                    info.collection_id, ts, out.fields, parts, keys=keys, expire_ts=expired
                )
                rows = _in_order_of(keys, pk, found)
            return out.rows(rows)

    def count(self, name: str, at: ReadAt = COLLECTION_LEVEL, partition: str | None = None) -> int:
        """Returns the number of rows (of `partition`) visible at the read's guarantee ts:
        statistics, served loaded or released (Milvus's come from its data coordinator).
        Raises CollectionNotFound, InvalidArgument (no such partition)."""
        info = self._info(name, at.as_of)
        if partition is not None:
            partition = a.name("partition", partition)
        parts = None if partition is None else [self._read_partition(info, partition)]
        ts = self.read_ts(info, at)  # first: the replica may appear only once tsafe passes
        with _named(info):
            expired = _expired(info, at, ts)
            return self.qn.count(info.collection_id, ts, parts, expire_ts=expired)

    @staticmethod
    def _keys(info: CollectionInfo, ids: Any) -> list[Any]:
        """Returns the validated primary keys `ids`, each once. Raises SchemaMismatch."""
        keys = v.primary_keys(info.schema.primary, ids)
        return list(dict.fromkeys(keys.tolist() if isinstance(keys, np.ndarray) else keys))

    def _queries(self, field: FieldSchema, data: Any) -> Any:
        """Returns the query vectors `data` of vector `field` as a float32 matrix (a sparse
        field's: rows in Milvus's format, core/sparse.py). Raises InvalidArgument naming
        what is wrong with them."""
        if field.dtype is DataType.SPARSE_FLOAT_VECTOR:
            return v.sparse_queries(field, data)
        if field.dtype in HALF_TYPES:  # float16 / bfloat16 queries, searched as float32
            return v.half_queries(field, data)
        if field.dtype is DataType.BINARY_VECTOR:
            return v.binary_queries(field, data)
        if (
            type(data) is list
            and len(data) == 1
            and type(data[0]) is np.ndarray
            and data[0].ndim == 1
        ):
            data = data[0]  # one query vector: a view of it, not a list made an array
        if isinstance(data, np.ndarray) and data.ndim == 1:
            data = data[None, :]
        try:
            return v.vectors(field, data if isinstance(data, np.ndarray) else list(data))
        except TypeError:
            raise InvalidArgument(
                f"search data must be a list of vectors, not {data!r:.60}"
            ) from None
        except v.SchemaMismatch as exc:
            raise InvalidArgument(f"search data: {exc}") from None

    def _output_fields(
        self, info: CollectionInfo, fields: list[str] | None, default: list[str] | None
    ) -> list[str]:
        """Returns the fields to output: `default` (None: every field) when none are named,
        every field for "*". Raises InvalidArgument naming an unknown field."""
        names = a.name_list("output_fields", "field", fields)
        every = [f.name for f in info.schema.fields]
        return r.output_fields(info.schema, names, every if default is None else default)

    def _partitions(
        self, info: CollectionInfo, names: list[str] | None, expr: Expr | None = None
    ) -> list[int] | None:
        """Returns the partitions a read reads (None: every one): those named, or with a
        partition key those of the key values `expr` names. Raises InvalidArgument (an
        unknown partition, or partitions named on a partition-key collection)."""
        names = a.name_list("partition_names", "partition", names)
        if info.schema.partition_key is not None:
            return pkey.read_partitions(info, names, expr)
        return None if not names else [self._read_partition(info, n) for n in names]

    def _read_partition(self, info: CollectionInfo, name: str) -> int:
        """Returns the id of partition `name` of a read. Raises InvalidArgument in the
        words of Milvus's search and query (1100, not a write's 200)."""
        try:
            return self._partition(info, name)
        except PartitionNotFound:
            raise InvalidArgument(f"partition name {name} not found") from None

    def _now(self, info: CollectionInfo, at: ReadAt) -> CollectionInfo:
        """Returns the latest meta of a read's collection (`info` itself unless the read is
        a time-travel one): what its load state is checked against."""
        if at.as_of is None:
            return info
        try:
            now = self.rc.describe_collection(qualified(info.db, info.name))
        except CollectionNotFound:  # dropped or renamed since: the read then says so
            return info
        return now if now.collection_id == info.collection_id else info

    def _info(self, name: str, as_of: int | None = None) -> CollectionInfo:
        """Returns the collection (or alias target) as of `as_of`. Raises InvalidArgument
        for a malformed name or ts, CollectionNotFound."""
        return self.rc.describe_collection(a.name("collection", name), a.as_of(as_of))


def _common_options(o: SearchOptions) -> bool:
    """Returns whether search options leave all but search_params and anns_field at their
    defaults (the common search's)."""
    return (
        type(o.filter) is str
        and not o.filter
        and o.filter_params is None
        and type(o.offset) is int
        and o.offset == 0
        and o.group_by_field is None
        and o.group_size is None
    )


def _expired(info: CollectionInfo, at: ReadAt, ts: int) -> int:
    """Returns the ts at or before which rows expired for a read at `ts` (the collection's
    TTL; 0: none): counted back from `as_of`, else from now (a quiet cluster reads at its
    last tick, however old: rows expire all the same)."""
    if TTL_PROPERTY not in info.properties:  # no TTL: nothing expires (and no clock read)
        return 0
    now = ts if at.as_of is not None else max(ts, compose(wall_ms()))
    return expire_ts(info.properties, now)


def _in_order_of(keys: list[Any], pk: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns `rows` (each with primary key field `pk`) in the order of `keys`."""
    by_key = {row[pk]: row for row in rows}
    return [by_key[k] for k in keys if k in by_key]


@contextmanager
def _named(info: CollectionInfo) -> Iterator[None]:
    """Re-raises the query node's CollectionNotFound (by id) with the collection's name."""
    try:
        yield
    except CollectionNotFound:
        raise CollectionNotFound(qualified(info.db, info.name)) from None


def _same_collection(
    info: CollectionInfo, schema: CollectionSchema, shards_num: int, props: dict[str, str]
) -> bool:
    """Returns whether creating `schema` again would create `info` (Milvus's
    model.Collection.Equal: fields, description, dynamic field, shards, properties and the
    default partition only)."""
    new = replace(schema, name=info.name).validated()
    return (
        new.fields == info.schema.fields
        and new.description == info.schema.description
        and new.enable_dynamic_field == info.schema.enable_dynamic_field
        and shards_num == info.shards_num
        and collection_level(props) == collection_level(info.properties)
        and {k: v for k, v in props.items() if k != CONSISTENCY_PROPERTY}
        == {k: v for k, v in info.properties.items() if k != CONSISTENCY_PROPERTY}
        and list(info.partitions) == [DEFAULT_PARTITION]
    )
