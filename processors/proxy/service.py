"""What the proxy offers clients (the SDK today, Milvus's gRPC and REST servers later): every
request of a MilvusClient, in vectorlog's own types. Clients depend on this only."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from vectorlog.core.model import CollectionInfo
from vectorlog.core.results import SearchResult
from vectorlog.core.types import (
    COLLECTION_LEVEL,
    DEFAULT_SEARCH,
    DeleteResult,
    Hit,
    InsertResult,
    ReadAt,
    SearchOptions,
)
from vectorlog.processors.proxy.batches import split_rows as split_rows
from vectorlog.processors.proxy.batches import take as take
from vectorlog.processors.proxy.compaction_requests import CompactionConflict as CompactionConflict
from vectorlog.processors.proxy.credentials import Credentials
from vectorlog.processors.proxy.hybrid_groups import Grouping as Grouping
from vectorlog.processors.proxy.importfiles import ImportFileError as ImportFileError
from vectorlog.processors.proxy.importfiles import ImportUnit as ImportUnit
from vectorlog.processors.proxy.importfiles import plan_units as plan_units
from vectorlog.processors.proxy.importfiles import read_unit as read_unit
from vectorlog.processors.proxy.imports import all_paths as all_paths
from vectorlog.processors.proxy.imports import delete_quietly as delete_quietly
from vectorlog.processors.proxy.validation import check_unique as check_unique
from vectorlog.processors.rootcoord.service import DatabaseService, DdlService
from vectorlog.streams.log.base import Headers


class ProxyService(DdlService, DatabaseService, Protocol):
    """The entry of every request: DDL (forwarded to rootcoord), DML and reads."""

    #: users, roles and grants: passwords checked and hashed here, the rest rootcoord's
    credentials: Credentials

    # -- meta reads ----------------------------------------------------------------------------
    def describe_collection(self, name: str, as_of: int | None = None) -> CollectionInfo:
        """Returns the collection (or alias target) as of `as_of`. Raises CollectionNotFound."""
        ...

    def has_collection(self, name: str, as_of: int | None = None) -> bool: ...
    def list_collections(self, as_of: int | None = None) -> list[str]: ...

    def describe_alias(self, alias: str) -> str:
        """Returns the name of the collection `alias` points to. Raises AliasNotFound."""
        ...

    def list_aliases(self, as_of: int | None = None) -> list[str]:
        """Returns every alias as of `as_of`, sorted."""
        ...

    def describe_index(
        self, collection: str, index_name: str, as_of: int | None = None
    ) -> dict[str, Any]:
        """Returns the index's description with Milvus's keys (index_type, metric_type,
        params, field_name, index_name, total_rows, indexed_rows, pending_index_rows, state).
        Raises CollectionNotFound, IndexNotFound."""
        ...

    # -- flush and segments ---------------------------------------------------------------
    def commit_import(
        self,
        name: str,
        partition_name: str | None,
        segments: list[dict[str, Any]],
        job_id: int,
    ) -> int:
        """Makes a bulk insert's written segments visible at one stamped ts; returns it once
        durable on the log. Raises CollectionNotFound, PartitionNotFound, InvalidArgument."""
        ...

    def compaction_groups(self, name: str, horizon: int) -> list[dict[str, Any]]:
        """Returns the groups of Flushed segments worth merging, with their files. Raises
        CollectionNotFound."""
        ...

    def commit_compaction(
        self,
        name: str,
        group: dict[str, Any],
        result: dict[str, Any],
        plan_id: int,
        horizon: int,
    ) -> int:
        """Swaps a merge's segment in for the group's at one stamped ts; returns it once
        durable. Raises CollectionNotFound, CompactionConflict."""
        ...

    def flush(self, name: str, wait: bool = True, timeout: float | None = None) -> list[int]:
        """Seals the collection's Growing segments and (unless `wait` is False) waits until
        they are Flushed; returns their ids. Raises CollectionNotFound, FlushTimeout."""
        ...

    def get_flush_state(self, segment_ids: list[int]) -> bool: ...
    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]: ...
    def list_segments(self, name: str) -> list[dict[str, Any]]: ...

    # -- DML and reads -------------------------------------------------------------------------
    def meta_point(self, fresh: bool = True) -> AbstractContextManager[None]:
        """Returns a block within which this thread's look-ups of collections see every DDL
        acknowledged before the block began, making sure of it once (a unit of work, such
        as an ingest batch, pays one wait for a cluster process's ddl watch); not `fresh`:
        the meta read so far, no wait (work made before an earlier fresh block began)."""
        ...

    def insert(
        self,
        name: str,
        rows: Any,
        partition_name: str | None = None,
        upsert: bool = False,
        headers: Headers = (),
    ) -> InsertResult:
        """Returns once the log made the rows durable; every dml record written carries
        `headers`. Raises InvalidArgument, SchemaMismatch."""
        ...

    def delete(
        self,
        name: str,
        ids: Any = None,
        partition_name: str | None = None,
        filter: str | None = None,  # noqa: A002 (MilvusClient's name)
        filter_params: dict[str, Any] | None = None,
        headers: Headers = (),
    ) -> DeleteResult:
        """Deletes the rows with primary keys `ids`, or those matching `filter` at a Strong
        read (exactly one of the two); returns once the log made the delete durable; its dml
        records carry `headers`."""
        ...

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
        """Returns, per query vector, up to `limit` hits (filtered, offset, grouped as the
        `options` say; reranked by a function `ranker`). Raises InvalidArgument,
        InvalidExpression, RerankRefused, ConsistencyTimeout."""
        ...

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
        """Returns what `search` does as a SearchResult (arrays: ids, distances, per-query
        offsets, output field columns). Raises as `search`."""
        ...

    def search_common(
        self,
        name: str,
        data: Any,
        limit: int,
        search_params: dict[str, Any] | None,
        consistency_level: str | None,
        anns_field: str | None = None,
    ) -> SearchResult | None:
        """Returns what `search_result` returns for this search (every other argument at
        its default) where it is answered in one call (the common search: its shape checked
        before, no filter, output fields, partitions, offset, grouping or waiting), else
        None: the caller then calls `search_result`."""
        ...

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
        """Returns, per query, up to `limit` hits of the ANN searches of `requests` fused by
        `ranker` (RRF or weighted), read at one ts (with `grouping`, of `limit` groups).
        Raises InvalidArgument (nothing runs), InvalidExpression, ConsistencyTimeout."""
        ...

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
        """Returns the rows matching `filter` or with primary keys `ids`, in primary-key
        order, paged by `offset` and `limit`; [{"count(*)": n}] for output_fields
        ["count(*)"]. Raises InvalidArgument, InvalidExpression, ConsistencyTimeout."""
        ...

    def get(
        self,
        name: str,
        ids: Any,
        output_fields: list[str] | None = None,
        at: ReadAt = COLLECTION_LEVEL,
    ) -> list[dict[str, Any]]:
        """Returns the visible entities with these primary keys."""
        ...

    def count(self, name: str, at: ReadAt = COLLECTION_LEVEL, partition: str | None = None) -> int:
        """Returns the number of rows (of `partition`) visible at the read's guarantee ts,
        loaded or released (statistics)."""
        ...
