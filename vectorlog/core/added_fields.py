"""Fields added to an existing collection (Milvus 2.6's add_collection_field): the rules a new
field must pass, the schema it makes, and the value rows written before it read as.

A field added at ts A is nullable (it may also have a default value): rows inserted before A
carry no value of it, and read as its default value, or null without one, in every output and
filter (Milvus's null semantics). Its field id is one above the collection's highest; it is
placed before the dynamic field `$meta`, which stays last.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import CollectionSchema, FieldSchema

#: Milvus's proxy.maxFieldNum: the fields a collection may have (`$meta` not counted)
MAX_FIELDS = 64


def added_field(schema: CollectionSchema, new: FieldSchema) -> FieldSchema:
    """Returns `new` with its field id (the collection's highest + 1) if it may be added to a
    collection of `schema`. Raises InvalidArgument with Milvus's message otherwise: too many
    fields, a vector, primary key or partition key field, not nullable, auto_id, a name
    or settings create_collection refuses, a name the collection has."""
    name = new.name
    if len(schema.user_fields) >= MAX_FIELDS:
        raise InvalidArgument(f"The number of fields has reached the maximum value {MAX_FIELDS}")
    if new.is_vector:
        raise InvalidArgument(f"not support to add vector field, field name = {name}")
    if new.is_primary:
        raise InvalidArgument(f"not support to add pk field, field name = {name}")
    if new.is_partition_key:
        raise InvalidArgument(f"not support to add partition key field, field name  = {name}")
    if new.nullable is not True:
        raise InvalidArgument(f"added field must be nullable, please check it, field name = {name}")
    if new.auto_id:
        raise InvalidArgument(
            f"only primary field can speficy AutoID with true, field name = {name}"
        )
    if new.is_dynamic:
        raise InvalidArgument(f"not support to add a dynamic field, field name = {name}")
    new.validate()
    if any(f.name == name for f in schema.fields):
        raise InvalidArgument(f"duplicate field name: {name}")
    return replace(new, field_id=max(f.field_id for f in schema.fields) + 1)


def with_field(schema: CollectionSchema, new: FieldSchema) -> CollectionSchema:
    """Returns `schema` with field `new` (its id assigned) before `$meta`. Idempotent: a
    schema already holding a field of `new`'s id is returned as it is."""
    if any(f.field_id == new.field_id for f in schema.fields):
        return schema
    user = tuple(f for f in schema.fields if not f.is_dynamic)
    dynamic = tuple(f for f in schema.fields if f.is_dynamic)
    return replace(schema, fields=(*user, new, *dynamic))


def absent_values(f: FieldSchema, n: int) -> list[Any]:
    """Returns what `n` rows written without field `f` (before it was added) hold: its
    default value, else None. Raises InvalidArgument if `f` can hold neither (a field every
    row must carry)."""
    if f.default_value is None and not f.nullable:
        raise InvalidArgument(f"rows lack field {f.name!r}, which has no default and no null")
    return [f.default_value] * n


def fillable(f: FieldSchema) -> bool:
    """Returns whether rows may leave field `f` out (it is nullable or has a default)."""
    return not f.is_vector and not f.is_dynamic and (f.nullable or f.default_value is not None)
