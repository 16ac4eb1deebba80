"""The meta table (seed 001 s.10.4) on `SnapshotKV`: collections, partitions, aliases and index
descriptions, readable as of any timestamp.

It is a derived view of the `ddl` topic: `apply(event, txn)` turns one DDL event into
snapshot writes stamped with the event's ts and commits them with what the caller staged in
`txn` (the consumed log position) in one synced write. Each applier is pure: it computes the
writes from the latest state, raising a VectorlogError if the event breaks a rule, so
`check(event)` validates a request before it is appended with exactly the code that later
applies it.

Key layout (under the SnapshotKV namespace):
    COLLECTION_KEY + id      -> JSON collection record (schema, channels, partitions, aliases,
                                indexes, properties, created ts, database, load state)
    COLLECTION_NAME_KEY + n  -> collection id of the live collection whose qualified name
                                (core/databases.py: `db.name`, or `name` in default) is n
    ALIAS_KEY + a            -> collection id qualified alias a names
    DATABASE_KEY + d         -> JSON database record (id, name, properties, created ts);
                                `default` exists without one until its properties are altered
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from vectorlog.core.added_fields import added_field, with_field
from vectorlog.core.databases import (
    DEFAULT_DATABASE,
    DEFAULT_DATABASE_ID,
    MAX_DATABASES,
    database_of,
    qualified,
)
from vectorlog.core.errors import (
    AliasCollectionConflict,
    AliasExists,
    AliasNotFound,
    CollectionExists,
    CollectionNotFound,
    DatabaseExists,
    DatabaseLimitExceeded,
    DatabaseNotFound,
    DatabaseRefused,
    IndexExists,
    IndexNotFound,
    InvalidArgument,
    LimitExceeded,
    PartitionExists,
    PartitionNotFound,
)
from vectorlog.core.load_state import LOADED, after_drop, after_load, after_release
from vectorlog.core.model import (
    DEFAULT_PARTITION,
    ROW_ID_FIELD,
    TIMESTAMP_FIELD,
    CollectionHistory,
    CollectionInfo,
    CollectionSchema,
    FieldSchema,
)
from vectorlog.core.scalar_index import index_target
from vectorlog.processors.rootcoord.rbac_meta import RbacMeta
from vectorlog.processors.rootcoord.snapshotkv import KeyNotFound, SnapshotKV
from vectorlog.schemas.serde import Event
from vectorlog.state.base import Transaction

COLLECTION_KEY = "collection/"
COLLECTION_NAME_KEY = "collection-name/"
ALIAS_KEY = "alias/"
DATABASE_KEY = "database/"
MAX_PARTITIONS = 1024

#: row id and timestamp, present in every collection (seed 004: binlog fields 0 and 1)
SYSTEM_FIELDS = [
    {"field_id": ROW_ID_FIELD, "name": "RowID", "data_type": "INT64"},
    {"field_id": TIMESTAMP_FIELD, "name": "Timestamp", "data_type": "INT64"},
]

Record = dict[str, Any]
Writes = tuple[dict[str, bytes], list[str]]  # saves, exact-key removals

#: Milvus's messages for an index that cannot be created (datacoord's canCreateIndex)
DISTINCT = "at most one distinct index is allowed per field"
SAME_FIELD = "CreateIndex failed: creating multiple indexes on same field is not supported"


def collection_key(collection_id: int) -> str:
    return f"{COLLECTION_KEY}{collection_id}"


def name_key(name: str) -> str:
    return f"{COLLECTION_NAME_KEY}{name}"


def alias_key(alias: str) -> str:
    return f"{ALIAS_KEY}{alias}"


def database_key(name: str) -> str:
    return f"{DATABASE_KEY}{name}"


def default_database() -> Record:
    """Returns the record of `default` before anything altered it."""
    return {
        "db_id": DEFAULT_DATABASE_ID,
        "name": DEFAULT_DATABASE,
        "properties": {},
        "created_ts": 0,
    }


def qualified_name(rec: Record, name: str | None = None) -> str:
    """Returns the qualified name of collection record `rec` (or of `name` in its database)."""
    return qualified(rec.get("db", DEFAULT_DATABASE), rec["name"] if name is None else name)


def _dump(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def record_of(body: dict[str, Any], ts: int) -> Record:
    """Returns the stored record of a CollectionCreated event body."""
    return {
        "collection_id": body["collection_id"],
        "name": body["collection_name"],
        "schema": body["schema"],
        "shards_num": body["shards_num"],
        "vchannels": body["vchannels"],
        "pchannels": body["pchannels"],
        "created_ts": ts,
        "partitions": {p["partition_name"]: p["partition_id"] for p in body["partitions"]},
        "properties": body.get("properties") or {},
        "aliases": [],
        "indexes": {},
        "system_fields": SYSTEM_FIELDS,
        "db": body.get("db_name") or DEFAULT_DATABASE,
    }


def info_of(rec: Record, schema: CollectionSchema | None = None) -> CollectionInfo:
    """Returns the CollectionInfo of a stored record (with `schema` its already parsed
    schema: CollectionSchema is immutable, so one parse is shared by every read)."""
    return CollectionInfo(
        rec["collection_id"],
        rec["name"],
        schema or CollectionSchema.from_avro(rec["schema"]),
        rec["shards_num"],
        rec["vchannels"],
        rec["pchannels"],
        rec["created_ts"],
        dict(rec["partitions"]),
        dict(rec["properties"]),
        list(rec["aliases"]),
        copy.deepcopy(rec["indexes"]),
        rec.get("db", DEFAULT_DATABASE),
        rec.get("schema_ts") or rec["created_ts"],
        copy.deepcopy(rec.get("load", LOADED)),
    )


class MetaTable:
    """Latest state in memory (for validation), history in the SnapshotKV (for as-of reads)."""

    def __init__(self, kv: SnapshotKV) -> None:
        self.kv = kv
        self._lock = threading.RLock()
        self._records: dict[int, Record] = {}
        self._names: dict[str, int] = {}
        self._aliases: dict[str, int] = {}
        self._databases: dict[str, Record] = {DEFAULT_DATABASE: default_database()}
        self.rbac = RbacMeta()
        #: collection id -> (the stored schema object, its parse): reads skip the parse
        self._schemas: dict[int, tuple[Any, CollectionSchema]] = {}
        self._infos: dict[int, tuple[Record, CollectionInfo]] = {}  # by latest record version
        self._appliers: dict[str, Callable[[Event], Writes]] = {
            "CollectionCreated": self._created,
            "CollectionDropped": self._dropped,
            "CollectionRenamed": self._renamed,
            "PartitionCreated": self._partition_created,
            "PartitionDropped": self._partition_dropped,
            "AliasCreated": self._alias_created,
            "AliasDropped": self._alias_dropped,
            "AliasAltered": self._alias_altered,
            "IndexCreated": self._index_created,
            "IndexDropped": self._index_dropped,
            "CollectionPropertiesAltered": self._properties_altered,
            "CollectionFieldAdded": self._field_added,
            "CollectionLoaded": self._loaded,
            "CollectionReleased": self._released,
            "DatabaseCreated": self._database_created,
            "DatabaseDropped": self._database_dropped,
            "DatabasePropertiesAltered": self._database_altered,
            **self.rbac.appliers,
        }
        self._load_latest()

    def _load_latest(self) -> None:
        for key, raw in zip(*self.kv.load_prefix(""), strict=True):
            self._remember(key, raw)

    # -- reads ------------------------------------------------------------------------------
    def resolve(self, name: str, ts: int | None = None) -> int:
        """Returns the id of the collection `name` or alias `name` names (as of `ts`).

        Raises DatabaseNotFound (its database does not exist), CollectionNotFound.
        """
        self.database(database_of(name), ts)
        if ts is None:
            with self._lock:
                cid = self._names.get(name, self._aliases.get(name))
            if cid is None:
                raise CollectionNotFound(name)
            return cid
        for key in (name_key(name), alias_key(name)):
            try:
                return int(self.kv.load(key, ts))
            except KeyNotFound:
                continue
        raise CollectionNotFound(name)

    def record(self, name: str, ts: int | None = None) -> Record:
        """Returns the record of the collection `name` (or alias) names, as of `ts`."""
        cid = self.resolve(name, ts)
        if ts is None:
            with self._lock:
                return self._records[cid]
        rec: Record = json.loads(self.kv.load(collection_key(cid), ts))
        return rec

    def get(self, name: str, ts: int | None = None) -> CollectionInfo:
        """Returns the collection `name` (or alias) names, as of `ts` (the latest: one shared
        CollectionInfo per record version, which callers must not change). Raises
        CollectionNotFound."""
        rec = self._latest(name) if ts is None else None
        if rec is None:
            rec = self.record(name, ts)
        if ts is not None:
            return info_of(rec)
        cached = self._infos.get(rec["collection_id"])
        if cached is not None and cached[0] is rec:
            return cached[1]  # records are replaced, never changed: one info per version
        info = info_of(rec, self._schema(rec))
        self._infos[rec["collection_id"]] = (rec, info)
        return info

    def _latest(self, name: str) -> Record | None:
        """Returns the latest record of the collection `name` (or alias) names, read under
        one lock; None if it or its database is missing (`record` then raises why)."""
        with self._lock:
            cid = self._names.get(name, self._aliases.get(name))
            if cid is None or database_of(name) not in self._databases:
                return None
            return self._records.get(cid)

    def _schema(self, rec: Record) -> CollectionSchema:
        """Returns the parsed schema of a latest record, parsing it once per record version."""
        cached = self._schemas.get(rec["collection_id"])
        if cached is not None and cached[0] is rec["schema"]:
            return cached[1]
        schema = CollectionSchema.from_avro(rec["schema"])
        self._schemas[rec["collection_id"]] = (rec["schema"], schema)
        return schema

    def by_id(self, collection_id: int) -> Record | None:
        """Returns the latest record of a live collection, or None."""
        with self._lock:
            return self._records.get(collection_id)

    def has(self, name: str, ts: int | None = None) -> bool:
        """Returns whether a collection is called `name` (aliases do not count). Raises
        DatabaseNotFound (its database does not exist)."""
        self.database(database_of(name), ts)
        if ts is None:
            with self._lock:
                return name in self._names
        try:
            self.kv.load(name_key(name), ts)
            return True
        except KeyNotFound:
            return False

    def names(self, ts: int | None = None) -> list[str]:
        """Returns the names of the live collections (as of `ts`), sorted."""
        if ts is None:
            with self._lock:
                return sorted(self._names)
        keys, _ = self.kv.load_prefix(COLLECTION_NAME_KEY, ts)
        return sorted(k[len(COLLECTION_NAME_KEY) :] for k in keys)

    def aliases(self, ts: int | None = None) -> dict[str, int]:
        """Returns {alias: collection id} (as of `ts`)."""
        if ts is None:
            with self._lock:
                return dict(self._aliases)
        keys, values = self.kv.load_prefix(ALIAS_KEY, ts)
        return {k[len(ALIAS_KEY) :]: int(v) for k, v in zip(keys, values, strict=True)}

    def database(self, name: str, ts: int | None = None) -> Record:
        """Returns the record of database `name` (as of `ts`). Raises DatabaseNotFound."""
        if ts is None:
            with self._lock:
                rec = self._databases.get(name)
        else:
            rec = self._stored_database(name, ts)
        if rec is None:
            raise DatabaseNotFound(name)
        return rec

    def _stored_database(self, name: str, ts: int) -> Record | None:
        try:
            stored: Record = json.loads(self.kv.load(database_key(name), ts))
            return stored
        except KeyNotFound:
            return default_database() if name == DEFAULT_DATABASE else None

    def databases(self, ts: int | None = None) -> list[Record]:
        """Returns the records of the databases (as of `ts`), `default` included, by id."""
        if ts is None:
            with self._lock:
                recs = dict(self._databases)
        else:
            keys, values = self.kv.load_prefix(DATABASE_KEY, ts)
            recs = {DEFAULT_DATABASE: default_database()}
            recs |= {
                k[len(DATABASE_KEY) :]: json.loads(v) for k, v in zip(keys, values, strict=True)
            }
        return sorted(recs.values(), key=lambda r: r["db_id"])

    def histories(self) -> list[CollectionHistory]:
        """Returns the history of every collection with a version still stored, by id: its
        schema, created ts, drop ts and partition drops (a partition named by an older
        version and absent from a newer one was dropped at the newer one's ts)."""
        out = []
        for versions in self.kv.history(COLLECTION_KEY).values():
            records = [(ts, json.loads(raw)) for ts, raw in versions if raw is not None]
            if records:
                out.append(_history(records, versions[-1]))
        return sorted(out, key=lambda h: h.collection_id)

    # -- writes -------------------------------------------------------------------------------
    def check(self, event: Event) -> None:
        """Raises the VectorlogError `apply(event)` would raise; writes nothing."""
        with self._lock:
            self._writes(event)

    def apply(self, event: Event, txn: Transaction) -> bool:
        """Applies one DDL event at its ts: stages its writes in `txn`, commits `txn` (with
        what the caller staged there: the log position), then updates the in-memory view.

        Returns False for events that change no meta (`txn` is committed all the same).
        Raises a VectorlogError if the event breaks a rule (`txn` is not committed), or what
        `txn.commit()` raises; either way the in-memory view is unchanged.
        """
        if event.type not in self._appliers:
            txn.commit()
            return False
        with self._lock:
            saves, removals = self._writes(event)
            self.kv.multi_save_and_remove(saves, removals, ts=event.ts, batch=txn)
            try:
                txn.commit()
            except BaseException:
                self.kv.refresh()  # the staged ts may not have landed: reuse it on replay
                raise
            for key in removals:
                self._forget(key)
            for key, raw in saves.items():
                self._remember(key, raw)
            return True

    def _writes(self, event: Event) -> Writes:
        applier = self._appliers.get(event.type)
        if applier is None:
            raise InvalidArgument(f"{event.type} is not a DDL event: it changes no meta")
        return applier(event)

    def _remember(self, key: str, raw: bytes) -> None:
        if self.rbac.owns(key):
            self.rbac.remember(key, raw)
        elif key.startswith(COLLECTION_KEY):
            rec = json.loads(raw)
            self._records[rec["collection_id"]] = rec
        elif key.startswith(COLLECTION_NAME_KEY):
            self._names[key[len(COLLECTION_NAME_KEY) :]] = int(raw)
        elif key.startswith(ALIAS_KEY):
            self._aliases[key[len(ALIAS_KEY) :]] = int(raw)
        elif key.startswith(DATABASE_KEY):
            self._databases[key[len(DATABASE_KEY) :]] = json.loads(raw)

    def _forget(self, key: str) -> None:
        if self.rbac.owns(key):
            self.rbac.forget(key)
        elif key.startswith(COLLECTION_KEY):
            self._records.pop(int(key[len(COLLECTION_KEY) :]), None)
            self._schemas.pop(int(key[len(COLLECTION_KEY) :]), None)
            self._infos.pop(int(key[len(COLLECTION_KEY) :]), None)
        elif key.startswith(COLLECTION_NAME_KEY):
            self._names.pop(key[len(COLLECTION_NAME_KEY) :], None)
        elif key.startswith(ALIAS_KEY):
            self._aliases.pop(key[len(ALIAS_KEY) :], None)
        elif key.startswith(DATABASE_KEY):
            name = key[len(DATABASE_KEY) :]
            if name == DEFAULT_DATABASE:
                self._databases[name] = default_database()
            else:
                self._databases.pop(name, None)

    # -- appliers: event -> writes, or a VectorlogError -----------------------------------------
    def _live(self, collection_id: int, name: object = None) -> Record:
        rec = self._records.get(collection_id)
        if rec is None:
            raise CollectionNotFound(name if name is not None else collection_id)
        # appliers change only these members: fresh containers keep the stored record intact
        return {
            **rec,
            "partitions": dict(rec["partitions"]),
            "aliases": list(rec["aliases"]),
            "indexes": dict(rec["indexes"]),
            "properties": dict(rec["properties"]),
        }

    def _free_name(self, name: str) -> None:
        if name in self._names:
            raise CollectionExists(name)
        if name in self._aliases:
            raise CollectionExists(name, "alias")

    def _created(self, e: Event) -> Writes:
        rec = record_of(e.body, e.ts)
        if rec["db"] not in self._databases:
            raise DatabaseNotFound(rec["db"])
        self._free_name(qualified_name(rec))
        return {
            collection_key(rec["collection_id"]): _dump(rec),
            name_key(qualified_name(rec)): str(rec["collection_id"]).encode(),
        }, []

    def _dropped(self, e: Event) -> Writes:
        rec = self._live(e.body["collection_id"], e.body["collection_name"])
        if rec["aliases"]:
            raise InvalidArgument(
                f"collection {rec['name']!r} has aliases {rec['aliases']}; drop them first"
            )
        return {}, [collection_key(rec["collection_id"]), name_key(qualified_name(rec))]

    def _renamed(self, e: Event) -> Writes:
        rec = self._live(e.body["collection_id"], e.body["old_name"])
        new = e.body["new_name"]
        self._free_name(qualified_name(rec, new))
        old, rec["name"] = qualified_name(rec), new
        return {
            collection_key(rec["collection_id"]): _dump(rec),
            name_key(qualified_name(rec)): str(rec["collection_id"]).encode(),
        }, [name_key(old)]

    def _partition_created(self, e: Event) -> Writes:
        rec = self._live(e.body["collection_id"])
        name = e.body["partition_name"]
        if name in rec["partitions"]:
            raise PartitionExists(rec["name"], name)
        if len(rec["partitions"]) >= MAX_PARTITIONS:
            raise LimitExceeded(
                f"collection {rec['name']!r} has {MAX_PARTITIONS} partitions, "
                "the most a collection may have"
            )
        rec["partitions"][name] = e.body["partition_id"]
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    def _partition_dropped(self, e: Event) -> Writes:
        rec = self._live(e.body["collection_id"])
        name = e.body["partition_name"]
        if name == DEFAULT_PARTITION:
            raise InvalidArgument("default partition cannot be deleted")  # Milvus's words
        if rec["partitions"].get(name) != e.body["partition_id"]:
            raise PartitionNotFound(rec["name"], name)
        del rec["partitions"][name]
        if rec.get("load"):
            rec["load"] = after_drop(rec["load"], name, rec["partitions"])
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    def _alias_created(self, e: Event) -> Writes:
        rec = self._live(e.body["collection_id"])
        alias = qualified_name(rec, e.body["alias"])
        if alias in self._names:
            raise AliasCollectionConflict(alias)
        if alias in self._aliases:
            named = self._live(self._aliases[alias])["name"]
            raise AliasExists(alias, named)
        rec["aliases"] = sorted([*rec["aliases"], e.body["alias"]])
        return {
            collection_key(rec["collection_id"]): _dump(rec),
            alias_key(alias): str(rec["collection_id"]).encode(),
        }, []

    def _alias_dropped(self, e: Event) -> Writes:
        rec = self._records.get(e.body["collection_id"])
        alias = e.body["alias"] if rec is None else qualified_name(rec, e.body["alias"])
        if self._aliases.get(alias) != e.body["collection_id"]:
            raise AliasNotFound(alias)
        rec = self._live(e.body["collection_id"])
        rec["aliases"] = [a for a in rec["aliases"] if a != e.body["alias"]]
        return {collection_key(rec["collection_id"]): _dump(rec)}, [alias_key(alias)]

    def _alias_altered(self, e: Event) -> Writes:
        prev_id, plain = e.body["previous_collection_id"], e.body["alias"]
        prev, rec = self._live(prev_id), self._live(e.body["collection_id"])
        alias = qualified_name(prev, plain)
        if self._aliases.get(alias) != prev_id:
            raise AliasNotFound(alias)
        if qualified_name(rec, plain) != alias:
            raise InvalidArgument(
                f"alias {plain!r} and collection {rec['name']!r} are in different databases"
            )
        if prev["collection_id"] == rec["collection_id"]:
            raise InvalidArgument(f"alias {plain!r} already names collection {rec['name']!r}")
        prev["aliases"] = [a for a in prev["aliases"] if a != plain]
        rec["aliases"] = sorted([*rec["aliases"], plain])
        return {
            collection_key(prev_id): _dump(prev),
            collection_key(rec["collection_id"]): _dump(rec),
            alias_key(alias): str(rec["collection_id"]).encode(),
        }, []

    def _index_created(self, e: Event) -> Writes:
        """Raises IndexExists with Milvus's message (datacoord's canCreateIndex) for another
        index of the name, or a second index of the field (of the JSON path)."""
        rec, b = self._live(e.body["collection_id"]), e.body
        if b["index_name"] in rec["indexes"]:
            raise IndexExists(rec["name"], f"called {b['index_name']!r}", DISTINCT)
        if any(index_target(ix) == index_target(b) for ix in rec["indexes"].values()):
            raise IndexExists(rec["name"], f"on field {b['field_name']!r}", SAME_FIELD)
        rec["indexes"][b["index_name"]] = {
            k: b[k]
            for k in (
                "index_id",
                "index_name",
                "field_id",
                "field_name",
                "index_type",
                "metric_type",
                "params",
            )
        } | {"created_ts": e.ts}
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    def _index_dropped(self, e: Event) -> Writes:
        rec, name = self._live(e.body["collection_id"]), e.body["index_name"]
        if name not in rec["indexes"]:
            raise IndexNotFound(rec["name"], name)
        del rec["indexes"][name]
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    def _properties_altered(self, e: Event) -> Writes:
        rec = self._live(e.body["collection_id"])
        for key in e.body.get("delete_keys") or []:
            rec["properties"].pop(key, None)
        rec["properties"].update(e.body.get("properties") or {})
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    def _field_added(self, e: Event) -> Writes:
        rec = self._live(e.body["collection_id"])
        schema = CollectionSchema.from_avro(rec["schema"])
        new = FieldSchema.from_avro(e.body["field"])
        if added_field(schema, replace(new, field_id=0)).field_id != new.field_id:
            raise InvalidArgument(f"field {new.name!r} has id {new.field_id}, not the next one")
        rec["schema"], rec["schema_ts"] = with_field(schema, new).to_avro(), e.ts
        rec["added_fields"] = [*rec.get("added_fields", []), new.field_id]
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    def _loaded(self, e: Event) -> Writes:
        """Loads the collection (no partition names) or the partitions named."""
        rec = self._live(e.body["collection_id"])
        names = self._named_partitions(rec, e.body.get("partition_names") or [])
        rec["load"] = after_load(rec.get("load", LOADED), names)
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    def _released(self, e: Event) -> Writes:
        """Releases the collection (no partition names) or the partitions named."""
        rec = self._live(e.body["collection_id"])
        names = self._named_partitions(rec, e.body.get("partition_names") or [])
        rec["load"] = after_release(rec.get("load", LOADED), names, rec["partitions"])
        return {collection_key(rec["collection_id"]): _dump(rec)}, []

    @staticmethod
    def _named_partitions(rec: Record, names: list[str]) -> list[str]:
        """Returns `names`; raises PartitionNotFound for the first the collection lacks."""
        for name in names:
            if name not in rec["partitions"]:
                raise PartitionNotFound(rec["name"], name)
        return names

    def _database_created(self, e: Event) -> Writes:
        name = e.body["db_name"]
        if name in self._databases:
            raise DatabaseExists(name)
        if len(self._databases) > MAX_DATABASES:  # default not counted, as Milvus
            raise DatabaseLimitExceeded(MAX_DATABASES)
        rec = {
            "db_id": e.body["db_id"],
            "name": name,
            "properties": dict(e.body.get("properties") or {}),
            "created_ts": e.ts,
        }
        return {database_key(name): _dump(rec)}, []

    def _database_dropped(self, e: Event) -> Writes:
        name = e.body["db_name"]
        if name == DEFAULT_DATABASE:
            raise DatabaseRefused("can not drop default database")
        rec = self._databases.get(name)
        if rec is None or rec["db_id"] != e.body["db_id"]:
            raise DatabaseNotFound(name)
        if any(r.get("db", DEFAULT_DATABASE) == name for r in self._records.values()):
            raise DatabaseRefused(
                f"database:{name} not empty, must drop all collections before drop database"
            )
        return {}, [database_key(name)]

    def _database_altered(self, e: Event) -> Writes:
        name = e.body["db_name"]
        rec = copy.deepcopy(self._databases.get(name))
        if rec is None:
            raise DatabaseNotFound(name)
        for key in e.body.get("delete_keys") or []:
            rec["properties"].pop(key, None)
        rec["properties"].update(e.body.get("properties") or {})
        return {database_key(name): _dump(rec)}, []


def _history(
    records: list[tuple[int, Record]], last: tuple[int, bytes | None]
) -> CollectionHistory:
    """Returns a collection's history from its stored record versions (oldest first) and
    its newest version (a deletion: the drop); its schema is the newest version's (rows
    written before a field was added read as its default, core/added_fields.py)."""
    first, newest = records[0][1], records[-1][1]
    drops: dict[int, int] = {}
    seen: set[int] = set()
    for ts, rec in records:
        ids = set(rec["partitions"].values())
        for gone in seen - ids:
            drops.setdefault(gone, ts)
        seen |= ids
    return CollectionHistory(
        first["collection_id"],
        CollectionSchema.from_avro(newest["schema"]),  # with every field added since
        first["created_ts"],
        last[0] if last[1] is None else None,
        drops,
        frozenset(seen),
    )
