"""Reading dml back: how many whole writes applied each source record of an ingest topic (the
ingest consumer tags each write with the source positions it applies, `applied`)."""

from __future__ import annotations

from collections import Counter

from vectorlog.processors.proxy.ingest.applied import SOURCE_HEADER, parse_sources
from vectorlog.streams.log.base import PART_HEADER, Log
from vectorlog.streams.scan import read_all


def whole_writes_per_source(log: Log, dml: str, topic: str) -> Counter[tuple[int, int]]:
    """Returns, per (partition, offset) of `topic`, how many whole dml writes applied it."""
    parts: dict[str, set[bytes]] = {}
    sources: dict[str, list[tuple[int, int, int]]] = {}
    for rec in read_all(log, dml):
        raw, part = rec.header(SOURCE_HEADER), rec.header(PART_HEADER)
        if raw is not None and part is not None:
            attempt, by_tp = parse_sources(raw)
            sources[attempt] = [
                (p, lo, hi) for (t, p), rs in by_tp.items() if t == topic for lo, hi in rs
            ]
            parts.setdefault(attempt, set()).add(part)
    whole = [a for a, seen in parts.items() if len(seen) == int(next(iter(seen)).split(b"/")[1])]
    return Counter((p, o) for a in whole for p, lo, hi in sources[a] for o in range(lo, hi + 1))
