"""The meta table (seed 001 s.10.4) on `SnapshotKV`: collections and names, readable as of any ts.

It is a derived view of the `ddl` topic: `apply(event, position)` turns one DDL event into
snapshot writes stamped with the event's ts, in one atomic write with the consumed position.
The latest state is also kept in memory for validation on the request path.

Key layout (under the SnapshotKV namespace):
    COLLECTION_KEY + id      -> JSON collection record (schema, channels, partitions, ...)
    COLLECTION_NAME_KEY + n  -> collection id
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from processors.errors import CollectionExists, CollectionNotFound
from processors.model import CollectionInfo, CollectionSchema
from processors.rootcoord.snapshotkv import KeyNotFound, SnapshotKV
from schemas.serde import Event

COLLECTION_KEY = "collection/"
COLLECTION_NAME_KEY = "collection-name/"

Saves = dict[str, bytes]
Removals = list[str]


def collection_key(collection_id: int) -> str:
    return f"{COLLECTION_KEY}{collection_id}"


def name_key(name: str) -> str:
    return f"{COLLECTION_NAME_KEY}{name}"


def record_of(body: dict[str, Any], ts: int) -> dict[str, Any]:
    """Returns the stored record of a CollectionCreated event body."""
    return {
        "collection_id": body["collection_id"], "name": body["collection_name"],
        "schema": body["schema"], "shards_num": body["shards_num"],
        "vchannels": body["vchannels"], "pchannels": body["pchannels"], "created_ts": ts,
        "partitions": {p["partition_name"]: p["partition_id"] for p in body["partitions"]},
        "properties": body.get("properties") or {},
    }


def info_of(rec: dict[str, Any]) -> CollectionInfo:
    """Returns the CollectionInfo of a stored record."""
    return CollectionInfo(
        rec["collection_id"], rec["name"], CollectionSchema.from_avro(rec["schema"]),
        rec["shards_num"], rec["vchannels"], rec["pchannels"], rec["created_ts"],
        dict(rec["partitions"]), dict(rec["properties"]),
    )


def _dump(rec: Any) -> bytes:
    return json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()


class MetaTable:
    """Collections by id and name, latest in memory, history in the SnapshotKV."""

    def __init__(self, kv: SnapshotKV) -> None:
        self.kv = kv
        self._lock = threading.RLock()
        self._records: dict[int, dict[str, Any]] = {}
        self._names: dict[str, int] = {}
        self._appliers: dict[str, Callable[[Event], tuple[Saves, Removals]]] = {
            "CollectionCreated": self._created, "CollectionDropped": self._dropped,
        }
        self._load_latest()

    def _load_latest(self) -> None:
        _, values = self.kv.load_prefix(COLLECTION_KEY)
        for raw in values:
            rec = json.loads(raw)
            self._records[rec["collection_id"]] = rec
            self._names[rec["name"]] = rec["collection_id"]

    # -- reads ------------------------------------------------------------------------
    def get(self, name: str, ts: int | None = None) -> CollectionInfo:
        """Returns the collection called `name` (as of `ts`). Raises CollectionNotFound."""
        return info_of(self.record(name, ts))

    def record(self, name: str, ts: int | None = None) -> dict[str, Any]:
        """Returns the stored record of `name` (as of `ts`). Raises CollectionNotFound."""
        if ts is None:
            with self._lock:
                cid = self._names.get(name)
                if cid is None:
                    raise CollectionNotFound(name)
                return self._records[cid]
        try:
            cid = int(self.kv.load(name_key(name), ts))
            return json.loads(self.kv.load(collection_key(cid), ts))  # type: ignore[no-any-return]
        except KeyNotFound:
            raise CollectionNotFound(name) from None

    def by_id(self, collection_id: int) -> dict[str, Any] | None:
        """Returns the latest record of a live collection, or None."""
        with self._lock:
            return self._records.get(collection_id)

    def has(self, name: str, ts: int | None = None) -> bool:
        try:
            self.record(name, ts)
            return True
        except CollectionNotFound:
            return False

    def names(self, ts: int | None = None) -> list[str]:
        """Returns the names of the collections that exist (as of `ts`), sorted."""
        if ts is None:
            with self._lock:
                return sorted(self._names)
        keys, _ = self.kv.load_prefix(COLLECTION_NAME_KEY, ts)
        return sorted(k[len(COLLECTION_NAME_KEY):] for k in keys)

    # -- writes -----------------------------------------------------------------------
    def apply(self, event: Event, extra: list[tuple[bytes, bytes]]) -> bool:
        """Applies one DDL event at its ts, atomically with `extra` (the log position).

        Returns False, writing nothing, for events that change no meta (the caller then
        stores its position by itself).
        """
        applier = self._appliers.get(event.type)
        if applier is None:
            return False
        with self._lock:
            saves, removals = applier(event)
            self.kv.multi_save_and_remove(saves, removals, ts=event.ts, extra=extra)
            self._refresh(saves, removals)
            return True

    def _created(self, event: Event) -> tuple[Saves, Removals]:
        rec = record_of(event.body, event.ts)
        if rec["name"] in self._names:
            raise CollectionExists(rec["name"])
        return {collection_key(rec["collection_id"]): _dump(rec),
                name_key(rec["name"]): str(rec["collection_id"]).encode()}, []

    def _dropped(self, event: Event) -> tuple[Saves, Removals]:
        cid, name = event.body["collection_id"], event.body["collection_name"]
        if cid not in self._records:
            raise CollectionNotFound(name)
        return {}, [collection_key(cid), name_key(name)]

    def _refresh(self, saves: Saves, removals: Removals) -> None:
        for key, raw in saves.items():
            if key.startswith(COLLECTION_KEY):
                rec = json.loads(raw)
                self._records[rec["collection_id"]] = rec
                self._names[rec["name"]] = rec["collection_id"]
        for key in removals:
            if key.startswith(COLLECTION_KEY):
                rec = self._records.pop(int(key[len(COLLECTION_KEY):]), None)
                if rec and self._names.get(rec["name"]) == rec["collection_id"]:
                    del self._names[rec["name"]]
