"""The live collections of a cluster as its ddl topic says, for commands that write to the
log without running the cluster (`vectorlog ingest` checks rows against a schema before it
sends them): names, aliases and schemas, replayed from the ddl snapshot and records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vectorlog.core.errors import CollectionNotFound
from vectorlog.core.model import CollectionSchema
from vectorlog.schemas.serde import EventSerde
from vectorlog.streams.log.base import Log
from vectorlog.streams.snapshots import Blobs, read_whole


@dataclass
class Catalog:
    """Collections by name (id and schema) and aliases (alias -> id)."""

    names: dict[str, int] = field(default_factory=dict)
    schemas: dict[int, dict[str, Any]] = field(default_factory=dict)
    aliases: dict[str, int] = field(default_factory=dict)

    def schema(self, name: str) -> CollectionSchema:
        """Returns the schema of collection (or alias) `name`. Raises CollectionNotFound."""
        cid = self.names.get(name, self.aliases.get(name))
        if cid is None or cid not in self.schemas:
            raise CollectionNotFound(name)
        return CollectionSchema.from_avro(self.schemas[cid])

    def apply(self, kind: str, body: dict[str, Any]) -> None:
        """Folds one ddl event in (the kinds that name, rename, drop or alias a collection)."""
        if kind == "CollectionCreated":
            self.names[body["collection_name"]] = int(body["collection_id"])
            self.schemas[int(body["collection_id"])] = body["schema"]
        elif kind == "CollectionDropped":
            self.names.pop(body["collection_name"], None)
            self.schemas.pop(int(body["collection_id"]), None)
        elif kind == "CollectionRenamed":
            self.names.pop(body["old_name"], None)
            self.names[body["new_name"]] = int(body["collection_id"])
        elif kind in ("AliasCreated", "AliasAltered"):
            self.aliases[body["alias"]] = int(body["collection_id"])
        elif kind == "AliasDropped":
            self.aliases.pop(body["alias"], None)


def read_catalog(log: Log, ddl: str, serde: EventSerde, blobs: Blobs | None) -> Catalog:
    """Returns the catalog the whole ddl topic builds (undecodable records skipped: the
    rootcoord dead-letters them). Raises SnapshotMissing, LogError."""
    catalog = Catalog()
    for rec in read_whole(log, ddl, blobs):
        try:
            event = serde.decode(rec.value)
        except Exception:  # noqa: BLE001 - a corrupt ddl record changes no collection
            continue
        catalog.apply(event.type, event.body)
    return catalog
