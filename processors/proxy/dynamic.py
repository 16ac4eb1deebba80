"""Output of a collection with the dynamic field, as Milvus gives it: `$meta` is never shown
as such; its keys are flattened into the entity. "*", no output fields (query, get) and
"$meta" itself give every key of the row; another name outside the schema gives that key
where the row has it (a row without it just lacks it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vectorlog.core.model import META, CollectionSchema
from vectorlog.core.types import Hit


@dataclass(frozen=True)
class Output:
    """What to ask the query node for (`fields`) and which `$meta` keys to lift into each
    entity (`keys`; None: all of them) when `lift`."""

    fields: list[str]
    keys: tuple[str, ...] | None = None
    lift: bool = False

    def rows(self, entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Returns `entities` (query, get) with `$meta` flattened into each, in place."""
        if self.lift:
            for e in entities:
                self._flatten(e)
        return entities

    def hits(self, results: list[list[Hit]]) -> list[list[Hit]]:
        """Returns search `results` with `$meta` flattened into each hit's entity, in place."""
        if self.lift:
            for hits in results:
                for hit in hits:
                    self._flatten(hit["entity"])
        return results

    def _flatten(self, entity: dict[str, Any]) -> None:
        meta = entity.pop(META, None)
        if not isinstance(meta, dict):
            return
        if self.keys is None:
            entity.update(meta)
            return
        for key in self.keys:
            if key in meta:
                entity[key] = meta[key]


def output(schema: CollectionSchema, names: list[str]) -> Output:
    """Returns the Output of `names` (checked output fields, see reads.output_fields): the
    schema's fields as they are; `$meta` and names outside the schema read `$meta`."""
    if schema.dynamic is None:
        return Output(list(names))
    known = {f.name for f in schema.user_fields}
    fields = [n for n in names if n in known]
    keys = [n for n in names if n not in known and n != META]
    if META not in names and not keys:
        return Output(fields)
    return Output([*fields, META], None if META in names else tuple(keys), True)
