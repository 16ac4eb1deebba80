"""Decodes of large log records shared by the readers of one process: in `vectorlog serve` the
data node, the query node and their loaders each read every dml record and each decoded it
(an event's Avro arrays of numbers cost ~0.3 ms per 1,000 values, per reader). The first
reader's decode is kept, by the record's log position, for the next ones: a reader whose
bytes at that position are the same (compared in full, so a position of another log, or a
rewritten one, only misses) gets the same event, in its own envelope with its own top-level
body dict; the nested values are shared and read-only, as decoded bodies are to every
applier. Small records (ticks, coord events) decode faster than they would be looked up, and
a topic with one reader in the process (a cluster's node process) keeps nothing. A reader
that comes to a record another is decoding waits for that decode instead of making its own
(`decoded`): the appliers of `serve` often read a record within the same millisecond."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vectorlog.schemas.serde import Event

#: records under this size are not kept (decoding them costs microseconds)
MIN_BYTES = 16 << 10
#: the record bytes kept at most (the oldest go first): a reader this far behind decodes again
BUDGET_BYTES = 64 << 20


class SharedDecodes:
    """The recent decodes of large records, by log position `where` = (topic, partition,
    offset), kept while a topic has two readers or more (`join`); thread-safe."""

    def __init__(self, budget_bytes: int = BUDGET_BYTES, min_bytes: int = MIN_BYTES) -> None:
        self.budget_bytes, self.min_bytes = budget_bytes, min_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, int, int], tuple[bytes, Event]] = OrderedDict()
        self._bytes = 0
        self._readers: dict[str, int] = {}  # topic -> readers joined
        self._flying: dict[tuple[str, int, int], _Flight] = {}  # decodes under way
        self.hits = 0  # decodes saved so far

    def join(self, topic: str) -> None:
        """Counts one more reader of `topic` (decodes are kept once it has two)."""
        with self._lock:
            self._readers[topic] = self._readers.get(topic, 0) + 1

    def leave(self, topic: str) -> None:
        """Counts one reader of `topic` less."""
        with self._lock:
            self._readers[topic] = max(0, self._readers.get(topic, 0) - 1)

    def decoded(
        self, where: tuple[str, int, int], data: bytes, decode: Callable[[bytes], Event]
    ) -> Event:
        """Returns `decode(data)` for the record at `where`: a copy of the kept decode of these
        very bytes there, or of the one another reader is making of them (waited for), else
        its own (kept for the other readers). Raises what `decode` raises."""
        event = self.get(where, data)
        if event is not None:
            return event
        flight, mine = self._flight(where, data)
        if flight is None:
            return self.put(where, data, decode(data))
        if not mine:
            flight.done.wait()
            got = flight.event
            if got is None or flight.data != data:  # its decode failed, or other bytes
                return self.put(where, data, decode(data))
            self.hits += 1
            return envelope_copy(got)
        try:
            flight.event = decode(data)
            return self.put(where, data, flight.event)
        finally:
            with self._lock:
                self._flying.pop(where, None)
            flight.done.set()

    def _flight(self, where: tuple[str, int, int], data: bytes) -> tuple[_Flight | None, bool]:
        """Returns (the decode under way at `where`, whether the caller makes it: a new
        one), or (None, False) for a record not shared (small, or one reader)."""
        if not self.min_bytes <= len(data) <= self.budget_bytes:
            return None, False
        with self._lock:
            if self._readers.get(where[0], 0) < 2:
                return None, False
            flight = self._flying.get(where)
            if flight is not None:
                return flight, False
            flight = self._flying[where] = _Flight(data)
            return flight, True

    def get(self, where: tuple[str, int, int], data: bytes) -> Event | None:
        """Returns a copy of the event decoded from these very bytes at `where`, or None."""
        if len(data) < self.min_bytes:
            return None
        with self._lock:
            kept = self._kept.get(where)
        if kept is None or kept[0] != data:  # identity, else one memcmp
            return None
        self.hits += 1
        return envelope_copy(kept[1])

    def put(self, where: tuple[str, int, int], data: bytes, event: Event) -> Event:
        """Keeps `event`, decoded from `data` at `where`, if `data` is large and its topic
        has another reader; returns a copy for the caller (the kept one is never handed out)."""
        if len(data) < self.min_bytes or len(data) > self.budget_bytes:
            return event
        with self._lock:
            if self._readers.get(where[0], 0) < 2:
                return event
            old = self._kept.pop(where, None)
            if old is not None:
                self._bytes -= len(old[0])
            self._kept[where] = (data, event)
            self._bytes += len(data)
            while self._bytes > self.budget_bytes:
                _, (gone, _) = self._kept.popitem(last=False)
                self._bytes -= len(gone)
        return envelope_copy(event)


class _Flight:
    """A decode one reader is making of `data`; `done` set once `event` (None: failed) is."""

    __slots__ = ("data", "done", "event")

    def __init__(self, data: bytes) -> None:
        self.data, self.done, self.event = data, threading.Event(), None

    data: bytes
    done: threading.Event
    event: Event | None


def envelope_copy(event: Event) -> Event:
    """Returns `event` in a new envelope with a copy of its top-level body (no source)."""
    return type(event)(event.type, event.ts, dict(event.body), event.collection_id, event.vchannel)
