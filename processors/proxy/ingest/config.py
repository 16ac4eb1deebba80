"""Ingest routes: which topic feeds which collection, in which format, with which per-topic
settings (`ingest_topics`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from vectorlog.core.errors import InvalidArgument

#: "auto" detects each record's format from its bytes; the others require that format
FORMATS = ("auto", "json", "avro", "debezium")
#: what a row's fields unknown to the collection do: go to the dynamic field (a collection
#: without one refuses the row: it is dead-lettered), are dropped with a warning, or
#: dead-letter the record even where a dynamic field would take them
UNKNOWN_POLICIES = ("dynamic", "drop", "dead-letter")
#: the readers of a batch of JSON rows (`IngestRoute.json_reader`)
JSON_READERS = ("orjson", "arrow")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
_SYNTAX = "topic=collection[:format][;unknown=...][;batch_size=N][;linger_ms=N]"


@dataclass(frozen=True)
class IngestRoute:
    """Records of `topic` go to `collection` (None: named by each record's header or key).

    `batch_size` records at most are applied as one write, gathered for up to `linger_ms`.
    """

    topic: str
    collection: str | None
    format: str = "auto"
    unknown: str = "dynamic"
    batch_size: int = 2000
    linger_ms: int = 0
    #: what reads a batch of JSON rows: "orjson" (the default), or "arrow": pyarrow's JSON
    #: reader, which parses without the GIL (see `columnar._arrow_batch`)
    json_reader: str = "orjson"


def parse_routes(text: str) -> tuple[IngestRoute, ...]:
    """Returns the routes of `topic=collection[:format][;key=value...]` entries separated by
    commas. Raises InvalidArgument naming a malformed entry, an unknown format or setting,
    or a topic mapped twice."""
    routes: list[IngestRoute] = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        route = _route(entry)
        if any(r.topic == route.topic for r in routes):
            raise InvalidArgument(f"ingest topic {route.topic!r} is mapped twice")
        routes.append(route)
    return tuple(routes)


def _route(entry: str) -> IngestRoute:
    head, *options = (s.strip() for s in entry.split(";"))
    topic, eq, target = (s.strip() for s in head.partition("="))
    collection, _, fmt = (s.strip() for s in target.partition(":"))
    if not eq or not _TOPIC.fullmatch(topic) or not _NAME.fullmatch(collection):
        raise InvalidArgument(f"ingest topic entry {entry!r}: must be {_SYNTAX}")
    if fmt and fmt not in FORMATS:
        raise InvalidArgument(f"ingest topic entry {entry!r}: format must be one of {FORMATS}")
    route = IngestRoute(topic, collection, fmt or "auto")
    for option in filter(None, options):
        route = _with_option(route, option, entry)
    return route


def _with_option(route: IngestRoute, option: str, entry: str) -> IngestRoute:
    key, eq, value = (s.strip() for s in option.partition("="))
    if key == "unknown" and eq and value in UNKNOWN_POLICIES:
        return replace(route, unknown=value)
    number = int(value) if eq and value.isdigit() else -1
    if key == "batch_size" and 1 <= number <= 100_000:
        return replace(route, batch_size=number)
    if key == "linger_ms" and 0 <= number <= 60_000:
        return replace(route, linger_ms=number)
    raise InvalidArgument(
        f"ingest topic entry {entry!r}: bad setting {option!r} (unknown= one of"
        f" {UNKNOWN_POLICIES}, batch_size=1..100000, linger_ms=0..60000)"
    )
