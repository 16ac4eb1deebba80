"""Ingest routes: which topic feeds which collection, in which format (`ingest_topics`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vectorlog.errors import InvalidArgument

#: "auto" detects each record's format from its bytes; the others require that format
FORMATS = ("auto", "json", "debezium")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


@dataclass(frozen=True)
class IngestRoute:
    """Records of `topic` go to `collection` (None: named by each record's key)."""

    topic: str
    collection: str | None
    format: str = "auto"


def parse_routes(text: str) -> tuple[IngestRoute, ...]:
    """Returns the routes of `topic=collection[:format]` entries separated by commas.

    Raises InvalidArgument naming a malformed entry, an unknown format or a topic mapped twice.
    """
    routes: list[IngestRoute] = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        topic, eq, target = (s.strip() for s in entry.partition("="))
        collection, _, fmt = (s.strip() for s in target.partition(":"))
        if not eq or not _TOPIC.fullmatch(topic) or not _NAME.fullmatch(collection):
            raise InvalidArgument(
                f"ingest topic entry {entry!r}: must be topic=collection[:format]"
            )
        if fmt and fmt not in FORMATS:
            raise InvalidArgument(f"ingest topic entry {entry!r}: format must be one of {FORMATS}")
        if any(r.topic == topic for r in routes):
            raise InvalidArgument(f"ingest topic {topic!r} is mapped twice")
        routes.append(IngestRoute(topic, collection, fmt or "auto"))
    return tuple(routes)
