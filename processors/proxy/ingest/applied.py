"""Exactly-once from ingest to dml: each dml record the ingest consumer writes carries the
source positions of the records it applies and an attempt id (a `vectorlog-ingest-source`
header), and its place in that append (PART_HEADER); after a crash between those writes and
the commit of its positions, the consumer reads the dml tail since its last mark and skips
the source records of every attempt found whole there instead of applying them twice. An
attempt found in part (a Kafka append that failed between partitions) is applied again.

The mark is a set of dml end offsets taken before the commit that stores it, so every write
after that commit lies at or past it; marks are refreshed every `MARK_EVERY_S` seconds (a
Kafka end-offset query costs a round trip: asked on a thread of its own, `MarkQuery`, and
stored by the first commit after it answered), bounding how much dml a recovery reads. One dml
append is atomic on the embedded log, so there every attempt found is whole.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
from collections.abc import Iterable

from vectorlog.streams.log.base import PART_HEADER, Log, Record
from vectorlog.streams.scan import read_all

logger = logging.getLogger(__name__)
SOURCE_HEADER = "vectorlog-ingest-source"
#: attempt ids: this process's random prefix and a counter (uuid4 per write cost ~8 ms here:
#: urandom per call)
_PROCESS = os.urandom(8).hex()
_ATTEMPTS = itertools.count()
MARK_EVERY_S = 10.0
TopicPartition = tuple[str, int]


class MarkQuery:
    """The dml end offsets asked on a daemon thread of its own, so the consumer goes on
    meanwhile (one query, a Kafka round trip, took 150 ms of the consumer thread at the end
    of a topic under load: py-spy); a later commit stores them: taken before that commit,
    they are still a floor under every write made after it."""

    def __init__(self, log: Log, topic: str) -> None:
        self._done = threading.Event()
        self._ends: dict[int, int] = {}
        self._error: BaseException | None = None
        args = (log, topic)
        threading.Thread(target=self._run, args=args, name="ingest-mark", daemon=True).start()

    def _run(self, log: Log, topic: str) -> None:
        try:
            self._ends = log.end_offsets(topic)
        except BaseException as exc:  # handed to the consumer's thread by `result`
            self._error = exc
        finally:
            self._done.set()

    def ready(self) -> bool:
        """Returns whether the answer (or the query's error) came back."""
        return self._done.is_set()

    def result(self) -> dict[int, int]:
        """Returns {dml partition: end offset} once `ready`. Raises what the query raised."""
        if self._error is not None:
            raise self._error
        return dict(self._ends)


def source_header(records: Iterable[Record]) -> tuple[str, bytes]:
    """Returns the header of one write attempt applying `records`: {"attempt": a new id,
    "sources": {topic: {partition: [[lo, hi], ...]}}} with inclusive offset ranges."""
    by_tp: dict[str, dict[str, list[int]]] = {}
    for rec in records:
        by_tp.setdefault(rec.topic, {}).setdefault(str(rec.partition), []).append(rec.offset)
    ranges = {t: {p: _ranges(sorted(o)) for p, o in ps.items()} for t, ps in by_tp.items()}
    doc = {"attempt": f"{_PROCESS}-{next(_ATTEMPTS)}", "sources": ranges}
    return SOURCE_HEADER, json.dumps(doc, separators=(",", ":")).encode()


def _ranges(offsets: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for off in offsets:
        if out and off == out[-1][1] + 1:
            out[-1][1] = off
        else:
            out.append([off, off])
    return out


def parse_sources(raw: bytes) -> tuple[str, dict[TopicPartition, list[tuple[int, int]]]]:
    """Returns (the attempt id, {(topic, partition): inclusive offset ranges}) of a source
    header. Raises ValueError, KeyError or TypeError on a malformed one."""
    doc = json.loads(raw)
    sources = {
        (topic, int(p)): [(int(lo), int(hi)) for lo, hi in ranges]
        for topic, parts in doc["sources"].items()
        for p, ranges in parts.items()
    }
    return str(doc["attempt"]), sources


def applied_since(
    log: Log, dml: str, marks: dict[int, int], committed: dict[TopicPartition, int]
) -> dict[TopicPartition, set[int]]:
    """Returns the source offsets at or past the `committed` positions that whole attempts in
    the dml records from `marks` on applied. Raises LogError if the dml tail cannot be read."""
    parts: dict[str, set[str]] = {}
    sources: dict[str, dict[TopicPartition, list[tuple[int, int]]]] = {}
    for rec in read_all(log, dml, timeout=60.0, start=marks):
        raw, part = rec.header(SOURCE_HEADER), rec.header(PART_HEADER)
        if raw is None or part is None:
            continue
        try:
            attempt, sources[attempt] = parse_sources(raw)
        except (ValueError, KeyError, TypeError, AttributeError):
            logger.warning(
                "dml %s[%d]@%d: malformed %s header", dml, rec.partition, rec.offset, SOURCE_HEADER
            )
            continue
        parts.setdefault(attempt, set()).add(part.decode())
    out: dict[TopicPartition, set[int]] = {}
    for attempt, seen in parts.items():
        if len(seen) == int(next(iter(seen)).split("/")[1]):  # every part of it landed
            _add(out, sources[attempt], committed)
    return {tp: offsets for tp, offsets in out.items() if offsets}


def _add(
    out: dict[TopicPartition, set[int]],
    sources: dict[TopicPartition, list[tuple[int, int]]],
    committed: dict[TopicPartition, int],
) -> None:
    for tp, ranges in sources.items():
        floor = committed.get(tp, 0)
        for lo, hi in ranges:
            out.setdefault(tp, set()).update(range(max(lo, floor), hi + 1))
