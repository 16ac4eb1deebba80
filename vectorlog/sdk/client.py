"""`vectorlog.Client`: MilvusClient-style methods over an embedded or Kafka-backed cluster.

`Client("./my.db")` opens embedded mode (all state under that directory, like Milvus Lite);
`Client("kafka://host:9092")` runs the same processors on Kafka.
"""

from __future__ import annotations

import copy
from typing import Any

from vectorlog.config import Config
from vectorlog.core.databases import DEFAULT_DATABASE, in_database, split
from vectorlog.core.errors import (
    CollectionNotFound,
    CollectionNotLoaded,
    InvalidArgument,
    InvalidName,
    PartitionNotFound,
    PartitionNotLoaded,
)
from vectorlog.core.load_state import loaded_names
from vectorlog.core.model import (
    CollectionSchema,
    DataType,
    FieldSchema,
    partition_tag,
    quick_schema,
)
from vectorlog.core.scalar_index import shown_field
from vectorlog.core.types import (
    DeleteResult,
    IndexSpec,
    InsertResult,
    ReadAt,
    with_level,
)
from vectorlog.processors.proxy.service import ProxyService
from vectorlog.runners.standalone import Standalone
from vectorlog.sdk.admin import AdminCalls
from vectorlog.sdk.builders import IndexParams, SchemaBuilder, check_indexes, index_specs
from vectorlog.sdk.calls import Session
from vectorlog.sdk.describe import describe
from vectorlog.sdk.jobs import JobCalls
from vectorlog.sdk.privilege_groups import PrivilegeGroupCalls
from vectorlog.sdk.reads import ReadCalls


class Client(AdminCalls, PrivilegeGroupCalls, ReadCalls, JobCalls):
    """A connection to a vectorlog cluster; a context manager."""

    def __init__(self, uri: str | None = None, **settings: Any) -> None:
        """Opens `uri` (a directory, or kafka://host:port); without one, VECTORLOG_LOG or
        ./vectorlog-data. Collection calls address the database `db_name=` names (among
        `settings`; "" or none: default; see `use_database`); the other `settings` override
        Config fields (see vectorlog/config.py). Raises DatabaseNotFound (after closing the
        cluster) for a database that does not exist, as MilvusClient."""
        db_name = str(settings.pop("db_name", "") or "")
        self.cfg = Config.load(**settings) if uri is None else Config.load(log=uri, **settings)
        self._cluster = Standalone(self.cfg)
        self._proxy: ProxyService = self._cluster.proxy
        self._session = Session()
        self.db = DEFAULT_DATABASE
        if db_name:
            try:
                self.use_database(db_name)
            except BaseException:
                self.close()
                raise

    @classmethod
    def attached(cls, cluster: Any, cfg: Config) -> Client:
        """Returns a Client over a cluster another runner built (a proxy process of the
        cluster mode: it has Standalone's `proxy`, `log`, `topics`, `tso`, `bulk` and
        `compactor`); closing the client closes it."""
        client = cls.__new__(cls)
        client.cfg, client._cluster = cfg, cluster
        client._proxy, client._session = cluster.proxy, Session()
        client.db = DEFAULT_DATABASE
        return client

    def in_database(self, db_name: str) -> Client:
        """Returns a Client over the same cluster (and session) whose collection calls
        address database `db_name` (""/"default": default); closing either closes both.
        Names are not checked here: a call in a database that does not exist raises
        DatabaseNotFound."""
        client = copy.copy(self)
        client.db = db_name or DEFAULT_DATABASE
        return client

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def cluster(self) -> Standalone:
        """The embedded cluster this client runs: its log, topics and processors' services
        (for operators, replay tooling and tests; requests go through the Client)."""
        return self._cluster

    def close(self) -> None:
        self._cluster.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- collections ------------------------------------------------------------------------
    @staticmethod
    def create_schema(
        auto_id: bool = False, description: str = "", enable_dynamic_field: bool = False
    ) -> SchemaBuilder:
        """Returns a schema builder; `enable_dynamic_field` keeps unknown keys in `$meta`."""
        return SchemaBuilder(auto_id, description, enable_dynamic_field)

    def create_collection(
        self,
        collection_name: str,
        dimension: int | None = None,
        *,
        schema: SchemaBuilder | CollectionSchema | None = None,
        primary_field_name: str = "id",
        id_type: str = "int",
        vector_field_name: str = "vector",
        metric_type: str = "COSINE",
        auto_id: bool = False,
        num_shards: int = 1,
        max_length: int = 65_535,
        properties: dict[str, str] | None = None,
        index_params: IndexParams | None = None,
        enable_dynamic_field: bool = True,
        consistency_level: str | int | None = None,
        num_partitions: int = 0,
    ) -> None:
        """Creates a collection, as MilvusClient: quick setup with `dimension=` (primary key
        `primary_field_name`, vector field `vector_field_name`, an AUTOINDEX index on it with
        `metric_type`, COSINE by default, the dynamic field unless `enable_dynamic_field`
        is False), or a full `schema=` with the indexes of
        `index_params` created right after it (without an index, searches use the metric of
        the vector field, `metric_type`). Reads that name no consistency level read at
        `consistency_level` ("Strong", "Bounded", "Session", "Eventually"; None: Strong).
        With a partition key field in `schema`, the collection has `num_partitions`
        partitions (0: 16, as Milvus) and rows go to one by the hash of their key. Raises
        InvalidArgument (nothing is created if the schema or an index is bad),
        CollectionExists."""
        if schema is None:
            if dimension is None:
                raise InvalidArgument("create_collection needs dimension= or schema=")
            if index_params:
                raise InvalidArgument(
                    "index_params needs schema= (quick setup creates an AUTOINDEX index)"
                )
            specs = [IndexSpec(vector_field_name, "AUTOINDEX", metric_type)]
            built = quick_schema(
                dimension,
                metric_type,
                auto_id,
                primary_field_name,
                vector_field_name,
                id_type,
                max_length,
                enable_dynamic_field=enable_dynamic_field,  # on by default, as Milvus
            )
        else:
            specs = index_specs(index_params or [])
            built = schema.build(metric_type) if isinstance(schema, SchemaBuilder) else schema
        check_indexes(built.validated(), specs)
        props = with_level(properties, consistency_level)
        self._proxy.create_collection(
            self._q(collection_name), built, num_shards, props, num_partitions
        )
        for spec in specs:
            self._proxy.create_index(self._q(collection_name), spec)

    def drop_collection(self, collection_name: str) -> None:
        self._proxy.drop_collection(self._q(collection_name))

    def truncate_collection(self, collection_name: str) -> DeleteResult:
        """Removes every row of the collection, as Milvus's truncate_collection (its schema,
        partitions, indexes and aliases stay): one durable delete of every primary key
        visible now, in every partition, so a replay of the log truncates the same rows.
        Returns its {delete_count, timestamp}. Raises InvalidName, CollectionNotFound."""
        pk = self._proxy.describe_collection(self._q(collection_name)).schema.primary.name
        return self.delete(collection_name, filter=f"{pk} not in []")

    def rename_collection(self, old_name: str, new_name: str, target_db: str = "") -> None:
        """Renames a collection within its database. Raises InvalidArgument (a `target_db`
        other than its database: not supported), CollectionNotFound."""
        new = in_database(target_db or self.db, "collection", new_name)
        self._proxy.rename_collection(self._q(old_name), new)

    def alter_collection_properties(self, collection_name: str, properties: dict[str, Any]) -> None:
        """Sets collection properties (as MilvusClient): `collection.ttl.seconds` hides and
        lets compaction remove rows older than that; `mmap.enabled` is kept. Raises
        InvalidArgument (a value Milvus refuses, or none given), CollectionNotFound."""
        self._proxy.alter_collection_properties(self._q(collection_name), properties)

    def drop_collection_properties(self, collection_name: str, property_keys: list[str]) -> None:
        """Removes collection properties (a key the collection lacks is ignored). Raises
        InvalidArgument (no key given), CollectionNotFound."""
        self._proxy.alter_collection_properties(self._q(collection_name), {}, property_keys)

    def add_collection_field(
        self,
        collection_name: str,
        field_name: str | FieldSchema,
        data_type: DataType | None = None,
        desc: str = "",
        **kwargs: Any,
    ) -> None:
        """Adds a field to a collection, as MilvusClient: `kwargs` as `add_field`'s
        (`nullable=True` is required; `default_value`, `max_length`, `element_type`,
        `max_capacity`...), or a whole FieldSchema as `field_name`. Rows inserted before
        read as its default value, else None. Raises InvalidArgument (a vector, primary or
        partition key field, not nullable, a name the collection has, an unknown keyword),
        CollectionNotFound."""
        if isinstance(field_name, FieldSchema):
            field = field_name
        else:
            if data_type is None:
                raise InvalidArgument(f"add_collection_field: field {field_name!r} needs a type")
            try:
                builder = SchemaBuilder().add_field(
                    field_name, data_type, description=desc, **kwargs
                )
            except TypeError as exc:
                raise InvalidArgument(f"add_collection_field: {exc}") from None
            field = builder.fields[0]
        self._proxy.add_collection_field(self._q(collection_name), field)

    def has_collection(self, collection_name: str, as_of: int | None = None) -> bool:
        return self._proxy.has_collection(self._q(collection_name), as_of)

    def list_collections(self, as_of: int | None = None) -> list[str]:
        """Returns the names of this database's collections (as of a hybrid timestamp),
        sorted. Raises DatabaseNotFound (it was dropped)."""
        self._proxy.describe_database(self.db, as_of)
        return self._mine(self._proxy.list_collections(as_of))

    def _mine(self, names: list[str]) -> list[str]:
        """Returns the plain names of the qualified `names` in this client's database."""
        return [plain for db, plain in map(split, names) if db == self.db]

    def describe_collection(self, collection_name: str, as_of: int | None = None) -> dict[str, Any]:
        """Returns MilvusClient's description of a collection (or alias), as of `as_of`.

        Raises CollectionNotFound.
        """
        return describe(self._proxy.describe_collection(self._q(collection_name), as_of))

    # -- partitions -------------------------------------------------------------------------
    def create_partition(self, collection_name: str, partition_name: str) -> None:
        self._proxy.create_partition(self._q(collection_name), partition_name)

    def drop_partition(self, collection_name: str, partition_name: str) -> None:
        self._proxy.drop_partition(self._q(collection_name), partition_name)

    def has_partition(
        self, collection_name: str, partition_name: str, as_of: int | None = None
    ) -> bool:
        """Returns whether the collection has the partition. Raises InvalidName for a
        partition name Milvus's partition tag check refuses (empty, over 255 characters,
        or other than letters, digits, `_` and `-`), CollectionNotFound."""
        name = self._q(collection_name)
        partition_tag(partition_name)
        return partition_name in self._proxy.describe_collection(name, as_of).partitions

    # -- loading: a collection is loaded from its creation on; a release refuses its reads ----
    def load_collection(
        self, collection_name: str, timeout: float | None = None, replica_number: int = 1
    ) -> None:
        """As MilvusClient's: the collection's reads are served again after a release (a
        CollectionLoaded event; a new collection is loaded already). In cluster mode with
        query nodes, `replica_number` copies of each of its channels are served, each on
        another query node (returns once they are; raises NotEnoughQueryNodes after
        `timeout`, default 60 s); embedded, one query node serves everything and it is
        accepted, and it returns once the segment indexes built so far are served (as
        Milvus's load), or after `timeout` (default 60 s; segments whose index is not loaded
        yet are searched exactly meanwhile). Raises CollectionNotFound, InvalidArgument (a
        replica_number below 1)."""
        info = self._proxy.describe_collection(self._q(collection_name))
        if not isinstance(replica_number, int) or replica_number < 1:
            raise InvalidArgument(
                f"replica_number must be a positive integer, not {replica_number!r}"
            )
        self._proxy.load_collection(self._q(collection_name))
        configure = getattr(self._cluster, "configure_replicas", None)
        if configure is not None:
            configure(info.collection_id, info.pchannels, replica_number, timeout or 60.0)
        wait = getattr(self._cluster, "wait_indexes_served", None)
        if wait is not None:
            wait(info.collection_id, timeout or 60.0)

    def release_collection(self, collection_name: str, timeout: float | None = None) -> None:
        """Releases the collection, as Milvus: its searches, queries, gets and counts are
        refused (CollectionNotLoaded) until `load_collection` or `load_partitions`; writes go
        on. Raises CollectionNotFound."""
        self._proxy.release_collection(self._q(collection_name))

    def load_partitions(
        self, collection_name: str, partition_names: list[str] | str, timeout: float | None = None
    ) -> None:
        """Loads these partitions (of a released collection: only these are read). Raises
        CollectionNotFound, PartitionNotFound, LoadRefused (none named, partition keys)."""
        self._proxy.load_collection(self._q(collection_name), _names(partition_names))

    def release_partitions(
        self, collection_name: str, partition_names: list[str] | str, timeout: float | None = None
    ) -> None:
        """Releases these partitions: reads naming them are refused (PartitionsNotLoaded),
        reads naming none read the others; releasing the last loaded one releases the
        collection. Raises CollectionNotFound, PartitionNotFound, InvalidArgument (none
        named), LoadRefused (partition keys)."""
        self._proxy.release_collection(self._q(collection_name), _names(partition_names))

    def get_load_state(
        self, collection_name: str, partition_name: str = "", timeout: float | None = None
    ) -> dict[str, str]:
        """Returns {"state": "NotLoad"} for a released collection (or partition), else
        {"state": "Loaded"}; in cluster mode with the query nodes' assignment, "Loading"
        while a pchannel of the collection has no query node serving it and "NotLoad" if no
        query node could load one. Raises CollectionNotFound, PartitionNotFound."""
        info = self._proxy.describe_collection(self._q(collection_name))
        if partition_name and partition_name not in info.partitions:
            raise PartitionNotFound(collection_name, partition_name)
        loaded = loaded_names(info.load, info.partitions)
        released = partition_name not in loaded if partition_name else not loaded
        if released:
            return {"state": "NotLoad"}
        state = getattr(self._cluster, "load_state", None)
        if state is None:
            return {"state": "Loaded"}
        return {"state": state(info.pchannels)}

    def get_loading_progress(
        self, collection_name: str, partition_names: list[str] | None = None
    ) -> int:
        """Returns the loading progress in percent (Milvus's GetLoadingProgress): 100 once
        loaded. Raises CollectionNotFound, PartitionNotFound, PartitionNotLoaded (a named
        partition is released), CollectionNotLoaded (no partition named, none loaded)."""
        info = self._proxy.describe_collection(self._q(collection_name))
        loaded = loaded_names(info.load, info.partitions)
        for name in partition_names or []:
            if name not in info.partitions:
                raise PartitionNotFound(collection_name, name)
            if name not in loaded:
                raise PartitionNotLoaded(info.partitions[name])
        if not loaded:
            raise CollectionNotLoaded(info.collection_id)
        return 100

    def describe_replica(
        self, collection_name: str, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Returns the replicas of a loaded collection (MilvusClient's describe_replica): per
        replica its replica_id, collection_id, partition_ids, node_ids, resource_group and
        shards (channel_name, leader_id, leader_address, node_ids). In cluster mode, from
        the query coordinator's assignment (raises ReplicaNotFound for a collection never
        loaded, ChannelNotFound while a shard of a replica has no query node); embedded,
        one replica (the collection's id) on one query node (node id 1). Raises
        CollectionNotFound."""
        info = self._proxy.describe_collection(self._q(collection_name))
        partitions = sorted(info.partitions.values())
        found = self._cluster.replicas(
            info.collection_id, partitions, info.vchannels, info.pchannels
        )
        return list(found)

    def list_partitions(self, collection_name: str, as_of: int | None = None) -> list[str]:
        parts = self._proxy.describe_collection(self._q(collection_name), as_of).partitions
        return sorted(parts, key=lambda name: parts[name])

    # -- aliases -----------------------------------------------------------------------------
    def create_alias(self, collection_name: str, alias: str) -> None:
        self._proxy.create_alias(self._q(collection_name), self._q(alias))

    def drop_alias(self, alias: str) -> None:
        self._proxy.drop_alias(self._q(alias))

    def alter_alias(self, collection_name: str, alias: str) -> None:
        self._proxy.alter_alias(self._q(collection_name), self._q(alias))

    def describe_alias(self, alias: str) -> dict[str, str]:
        """Returns {"alias", "collection_name"}. Raises AliasNotFound."""
        return {"alias": alias, "collection_name": self._proxy.describe_alias(self._q(alias))}

    def list_aliases(self, collection_name: str = "", as_of: int | None = None) -> dict[str, Any]:
        """Returns {"aliases": [...], "collection_name"}: one collection's, or all."""
        if collection_name:
            return {
                "aliases": self._proxy.describe_collection(self._q(collection_name), as_of).aliases,
                "collection_name": collection_name,
            }
        return {"aliases": self._mine(self._proxy.list_aliases(as_of)), "collection_name": ""}

    # -- indexes ------------------------------------------------------------------------------
    @staticmethod
    def prepare_index_params() -> IndexParams:
        """Returns an empty IndexParams to `add_index` to (MilvusClient's)."""
        return IndexParams()

    def create_index(
        self, collection_name: str, index_params: IndexParams, timeout: float | None = None
    ) -> None:
        """Creates each index of `index_params` (ours or pymilvus's); the index node builds
        it on every Flushed segment. An index identical to an existing one is a no-op.
        Raises InvalidArgument (checked for every index before any is created), IndexExists
        (another index on the field or with the name), CollectionNotFound."""
        specs = index_specs(index_params)
        if not specs:
            raise InvalidArgument("index_params is empty: no index can be created")
        try:  # Milvus's CreateIndex looks the collection up without checking its name
            info = self._proxy.describe_collection(self._q(collection_name))
        except InvalidName:
            raise CollectionNotFound(self._q(collection_name)) from None
        check_indexes(info.schema, specs)
        for spec in specs:
            self._proxy.create_index(self._q(collection_name), spec)

    def drop_index(self, collection_name: str, index_name: str) -> None:
        """Drops an index (searches then use the vector field's metric); dropping one that
        does not exist is a no-op, as in Milvus. Raises CollectionNotFound."""
        self._proxy.drop_index(self._q(collection_name), index_name)

    def list_indexes(self, collection_name: str, field_name: str | None = "") -> list[str]:
        """Returns the names of the collection's indexes (on `field_name` only, if given)."""
        indexes = self._proxy.describe_collection(self._q(collection_name)).indexes
        return sorted(
            n
            for n, ix in indexes.items()
            if not field_name or field_name in (ix["field_name"], shown_field(ix))
        )

    def describe_index(
        self, collection_name: str, index_name: str, as_of: int | None = None
    ) -> dict[str, Any]:
        """Returns {index_type, metric_type, params, field_name, index_name, total_rows,
        indexed_rows, pending_index_rows, state} as Milvus: params as created, rows of the
        Flushed segments and how many are indexed, state "Finished" once all are (also with
        none). Raises IndexNotFound, CollectionNotFound."""
        return self._proxy.describe_index(self._q(collection_name), index_name, as_of)

    def get_collection_stats(self, collection_name: str) -> dict[str, int]:
        """Returns {"row_count": rows visible now}."""
        at = ReadAt(session_ts=self._session_ts)
        return {"row_count": self._proxy.count(self._q(collection_name), at)}

    def get_partition_stats(self, collection_name: str, partition_name: str) -> dict[str, int]:
        """Returns {"row_count": rows of the partition visible now}, loaded or released.
        Raises CollectionNotFound, InvalidArgument naming a partition that does not exist."""
        at = ReadAt(session_ts=self._session_ts)
        name = self._q(collection_name)
        return {"row_count": self._proxy.count(name, at, partition_name)}

    # -- flush and segments --------------------------------------------------------------------
    def flush(
        self, collection_name: str, timeout: float | None = None, wait: bool = True
    ) -> list[int]:
        """Seals every Growing segment of the collection and waits until its segments are
        Flushed (their binlogs written); returns their ids. With `wait=False` it returns the
        ids at once (seed 003's asynchronous flush). Raises CollectionNotFound, FlushTimeout."""
        return self._proxy.flush(self._q(collection_name), wait, timeout)

    def get_flush_state(self, segment_ids: list[int]) -> bool:
        """Returns whether every given segment is Flushed."""
        return self._proxy.get_flush_state(segment_ids)

    def get_segment_info(self, segment_ids: list[int]) -> list[dict[str, Any]]:
        """Returns per segment {segment_id, collection_id, partition_id, insert_channel,
        num_rows, state, start_position, dml_position, max_row_num, last_expire_time}."""
        return self._proxy.get_segment_info(segment_ids)

    def list_segments(self, collection_name: str) -> list[dict[str, Any]]:
        """Returns the info of every segment of a collection."""
        return self._proxy.list_segments(self._q(collection_name))

    # -- data ---------------------------------------------------------------------------------
    def insert(
        self, collection_name: str, data: Any, partition_name: str | None = None
    ) -> InsertResult:
        """Inserts rows; returns {insert_count, ids, timestamp} after the log made them durable."""
        res = self._proxy.insert(self._q(collection_name), data, partition_name)
        self._session_ts = max(self._session_ts, res["timestamp"])
        return res

    def upsert(
        self, collection_name: str, data: Any, partition_name: str | None = None
    ) -> dict[str, Any]:
        """Inserts rows or replaces the rows with the same primary keys (required, even with
        auto_id), atomically at one ts; returns {upsert_count, ids, timestamp} once durable."""
        res = self._proxy.insert(self._q(collection_name), data, partition_name, upsert=True)
        self._session_ts = max(self._session_ts, res["timestamp"])
        return {
            "upsert_count": res["insert_count"],
            "ids": res["ids"],
            "timestamp": res["timestamp"],
        }

    def delete(
        self,
        collection_name: str,
        ids: Any = None,
        *,
        filter: str | None = None,  # noqa: A002 (MilvusClient's name)
        partition_name: str | None = None,
        filter_params: dict[str, Any] | None = None,
    ) -> DeleteResult:
        """Deletes the rows with primary keys `ids`, or the rows matching `filter` now
        (exactly one of the two); returns {delete_count, timestamp} once durable.

        A filter delete reads the matching keys at a Strong ts and appends their key
        deletes, so replaying the log deletes the same rows; delete_count is their number
        (for `ids`, the number of keys given). Raises InvalidArgument, InvalidExpression."""
        res = self._proxy.delete(
            self._q(collection_name), ids, partition_name, filter, filter_params
        )
        self._session_ts = max(self._session_ts, res["timestamp"])
        return res


def _names(partition_names: list[str] | str) -> list[str]:
    """Returns MilvusClient's `partition_names` argument (a name or a list) as a list."""
    return [partition_names] if isinstance(partition_names, str) else partition_names
