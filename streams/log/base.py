"""The `Log` protocol: partitioned, append-only topics with offsets, shared by every backend.

A backend guarantees: `append` returns only after the records are durable (embedded: fsync'd
RocksDB write; Kafka: acks=all from an idempotent producer), offsets in a partition are
dense and start at 0, and a `Reader` returns records of a partition in offset order starting
at the position its caller stored. Consumer-group offsets are never used as the truth.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vectorlog.streams.errors import LogError, TopicPartitionNotFound

#: Kafka record headers: (name, value) pairs, in order; names need not be unique
Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One record read from the log, with its position."""

    topic: str
    partition: int
    offset: int
    value: bytes
    key: bytes | None = None
    headers: Headers = ()

    def header(self, name: str) -> bytes | None:
        """Returns the value of the last header called `name`, or None."""
        found = [v for n, v in self.headers if n == name]
        return found[-1] if found else None


@dataclass(frozen=True, slots=True)
class Append:
    """One record to append: the partition it goes to, its value, optional key and headers."""

    partition: int
    value: bytes
    key: bytes | None = None
    headers: Headers = ()


#: added by `with_headers`: "i/n", the record's place among the n records of one append, so a
#: reader can tell whether a (non-atomic, Kafka) append landed whole
PART_HEADER = "vectorlog-append-part"


def with_headers(records: list[Append], headers: Headers) -> list[Append]:
    """Returns `records`, each carrying `headers` and its PART_HEADER (the same list when
    `headers` is empty)."""
    if not headers:
        return records
    n = len(records)
    return [
        Append(
            r.partition, r.value, r.key, (*r.headers, *headers, (PART_HEADER, f"{i}/{n}".encode()))
        )
        for i, r in enumerate(records)
    ]


@runtime_checkable
class Reader(Protocol):
    """Reads a fixed set of partitions from caller-supplied positions, in offset order."""

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        """Returns up to `max_records` next records (possibly none after `timeout` seconds)."""
        ...

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Moves the position of one assigned partition; the next poll starts there."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class KnowsFetchedEnds(Protocol):
    """A reader that knows, without asking the broker, how far its partitions reached when it
    last fetched from them."""

    def fetched_ends(self) -> dict[int, int]:
        """Returns {partition: an offset such that every record below it was in the log when
        this reader last fetched} (partitions not fetched yet are absent)."""
        ...


@runtime_checkable
class Log(Protocol):
    """A partitioned append-only log. Every backend passes tests/streams/test_log_conformance."""

    max_message_bytes: int

    def create_topic(
        self,
        topic: str,
        partitions: int,
        compacted: bool = False,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
    ) -> None:
        """Creates `topic` if it does not exist, with `retention_ms` and `retention_bytes` (per
        partition) as the broker's time and size retention where the backend has one (the
        embedded log's is `streams.retention`). Raises LogError on a partition-count clash."""
        ...

    def partitions(self, topic: str) -> int:
        """Returns the number of partitions of `topic`. Raises TopicNotFound."""
        ...

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        """Appends records (any partitions) durably; returns their offsets, in input order.

        Raises TopicNotFound, TopicPartitionNotFound, RecordTooLarge (nothing appended), or a
        LogError from the backend (records may or may not be durable; not acknowledged).
        """
        ...

    def reader(self, topic: str, positions: dict[int, int]) -> Reader:
        """Returns a Reader of `topic` over {partition: next offset to read}."""
        ...

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: end} for every partition of `topic`, reading nothing and
        appending nothing. Embedded: exact, the offset the next append gets. Kafka: the
        broker's high watermark, which may lag the real end (DESIGN.md s.8): a reader that
        must see everything reads up to it, then on until idle (`streams.scan.read_all`).

        Raises TopicNotFound, or a LogError from the backend.
        """
        ...

    def close(self) -> None: ...


def check_sizes(records: Iterable[Append], limit: int) -> None:
    """Raises RecordTooLarge for the first record larger than `limit` bytes (value, key and
    headers)."""
    from vectorlog.streams.errors import RecordTooLarge

    for r in records:
        size = len(r.value) + (len(r.key) if r.key else 0)
        size += sum(len(n) + len(v) for n, v in r.headers)
        if size > limit:
            raise RecordTooLarge(size, limit)


@runtime_checkable
class StartKnown(Protocol):
    """A log that knows where each partition starts: the first offset it still holds after
    deletions (the embedded log's `truncate`, Kafka's retention: its low watermark)."""

    def start_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: its first offset still held}. Raises TopicNotFound."""
        ...


@runtime_checkable
class Truncatable(StartKnown, Protocol):
    """A log whose records below an offset can be deleted (the embedded log; Kafka deletes
    by its topics' retention settings instead)."""

    def truncate(self, topic: str, partition: int, before: int) -> int:
        """Deletes the partition's records below `before`; returns its new start."""
        ...

    def bytes_from(self, topic: str, partition: int, offset: int) -> int:
        """Returns the bytes the partition holds at `offset` (or its start) and after."""
        ...


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: the arguments of `Log.create_topic`. Raises LogError for an empty
    name or fewer than one partition (a backend may refuse other names when creating)."""

    topic: str
    partitions: int
    compacted: bool = False
    retention_ms: int | None = None
    retention_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.partitions < 1 or not self.topic:
            raise LogError(f"invalid topic {self.topic!r} with {self.partitions} partitions")


@runtime_checkable
class CreatesTopics(Protocol):
    """A log that creates several topics in one round trip (Kafka: one CreateTopics request
    and a metadata request per topic, instead of two full metadata listings each)."""

    def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Creates each topic that does not exist, as `Log.create_topic` does one."""
        ...


def create_topics(log: Log, specs: Sequence[TopicSpec]) -> None:
    """Creates each topic of `specs` that does not exist (see `Log.create_topic`), in one
    request where the log can. Raises LogError on a partition-count clash."""
    if isinstance(log, CreatesTopics):
        log.create_topics(specs)
        return
    for s in specs:
        log.create_topic(s.topic, s.partitions, s.compacted, s.retention_ms, s.retention_bytes)


@runtime_checkable
class WakesReaders(Protocol):
    """A log whose readers wait for appends in the process (the embedded log) and can be
    woken: a closing runner wakes them once its consumers were asked to stop, so they need
    not wait out their poll timeouts."""

    def wake_readers(self) -> None:
        """Makes every reader waiting in `poll` now return what it has (maybe nothing)."""
        ...


def start_offsets(log: Log, topic: str) -> dict[int, int]:
    """Returns {partition: its first offset still held}: 0 for logs that never delete."""
    if isinstance(log, StartKnown):
        return log.start_offsets(topic)
    return dict.fromkeys(range(log.partitions(topic)), 0)


class PartitionCursor(ABC):
    """The positions a reader of one topic holds, per partition, and the round-robin read
    that advances them: a reader supplies `_read(partition, offset, max_records)`."""

    def __init__(self, topic: str, positions: dict[int, int]) -> None:
        self._topic, self._pos = topic, dict(positions)

    @abstractmethod
    def _read(self, partition: int, offset: int, max_records: int) -> list[Record]:
        """Returns up to `max_records` records of `partition` from `offset` (its backend's)."""

    def _collect(self, max_records: int) -> list[Record]:
        """Returns up to `max_records` next records over the partitions, advancing them."""
        out: list[Record] = []
        for p, off in self._pos.items():
            if len(out) >= max_records:
                break
            got = self._read(p, off, max_records - len(out))
            if got:
                self._pos[p] = got[-1].offset + 1
                out.extend(got)
        return out

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Moves `partition`'s position to `offset`. Raises TopicPartitionNotFound for a
        topic or partition this reader does not read."""
        if topic != self._topic or partition not in self._pos:
            raise TopicPartitionNotFound(topic, partition)
        self._pos[partition] = offset
