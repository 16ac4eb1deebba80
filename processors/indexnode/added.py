"""A field added to a collection (add_collection_field) after some of a segment's writes: the
writes before the add hold no insert log of it, and their rows read as its default value, else
null (core/added_fields.py), as the query node reads them; a scalar index built over such a
segment covers those rows with that value (null rows are left out of every index)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from vectorlog.core.added_fields import absent_values
from vectorlog.core.model import ROW_ID_FIELD, FieldSchema
from vectorlog.processors.indexnode.state import SegmentRecord
from vectorlog.storage import InsertColumn, ObjectNotFound


def field_columns(
    seg: SegmentRecord,
    field_id: int,
    added: FieldSchema | None,
    read: Callable[[str], InsertColumn],
) -> Iterator[InsertColumn | list[Any]]:
    """Yields a field's columns in row order: each insert log's, read with `read`, and for
    `added` (the field, if it was added to the collection) a list of its default value (or
    None) per row of each write before the add. The segment's writes before the add are the
    first ones (log ids rise with time), so the field's logs are the last of them. Raises
    ObjectNotFound if a field not added (or one no write holds) has fewer logs than writes,
    and whatever `read` raises."""
    paths, row_logs = seg.paths(field_id), seg.paths(ROW_ID_FIELD)
    missing = len(row_logs) - len(paths)
    if (missing > 0 and added is None) or not (row_logs or paths):
        where = f"insert_log/{seg.collection_id}/{seg.partition_id}/{seg.segment_id}/{field_id}"
        raise ObjectNotFound(where, f"{max(missing, 1)} insert logs of the field not reported")
    for path in row_logs[: max(missing, 0)]:
        assert added is not None
        yield absent_values(added, len(read(path).values))
    for path in paths:
        yield read(path)
