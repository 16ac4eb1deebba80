"""Checking ingest records against a collection before they are produced (`vectorlog
ingest`): each record decoded and fitted as the ingest consumer would, its rows validated as
the proxy's insert validates them; returns what is wrong with each bad record."""

from __future__ import annotations

from collections.abc import Sequence

from vectorlog.core.errors import InvalidArgument, NotFound
from vectorlog.core.model import CollectionSchema
from vectorlog.processors.proxy.ingest.config import IngestRoute
from vectorlog.processors.proxy.ingest.formats import UPSERT, Change, decode
from vectorlog.processors.proxy.ingest.rows import fit_row, known_fields, primary_key
from vectorlog.processors.proxy.validation import primary_keys, rows_to_columns
from vectorlog.streams.log.base import Record

#: what a record may be refused for (anything else is a bug, not bad input)
_REFUSED = (InvalidArgument, NotFound)


def check_records(
    schema: CollectionSchema, route: IngestRoute, records: Sequence[Record]
) -> dict[int, str]:
    """Returns {index in `records`: why it would be refused} for the records the ingest
    consumer would dead-letter; a batch that fits as a whole is checked in one pass."""
    rows, bad = [], {}
    for i, rec in enumerate(records):
        try:
            changes = decode(rec, route)
            check_deletes(schema, [c for c in changes if c.kind != UPSERT])
            rows += [(i, c) for c in changes if c.kind == UPSERT]
        except _REFUSED as exc:
            bad[i] = str(exc)
    fitted = _fitted(schema, route, rows, bad)
    try:
        rows_to_columns(schema, [row for _, row in fitted], upsert=True)
        return bad
    except _REFUSED:
        pass  # some row is wrong: find which, one at a time
    for i, row in fitted:
        if i not in bad:
            try:
                rows_to_columns(schema, [row], upsert=True)
            except _REFUSED as exc:
                bad[i] = _unrowed(str(exc))
    return bad


def check_deletes(schema: CollectionSchema, changes: Sequence[Change]) -> None:
    """Raises InvalidArgument if a delete's key is not a primary key of `schema`."""
    if not changes:
        return
    primary_keys(schema.primary, [primary_key(schema, c.item) for c in changes])


def _fitted(
    schema: CollectionSchema,
    route: IngestRoute,
    rows: list[tuple[int, Change]],
    bad: dict[int, str],
) -> list[tuple[int, dict[str, object]]]:
    out = []
    for i, change in rows:
        try:
            out.append(
                (i, known_fields(schema, fit_row(schema, change.item, change.json_text), route))
            )
        except _REFUSED as exc:
            bad.setdefault(i, str(exc))
    return out


def _unrowed(message: str) -> str:
    """Returns a one-row validation message without its "row 0: " prefix."""
    return message.removeprefix("row 0: ")
