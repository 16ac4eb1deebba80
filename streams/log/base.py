"""The `Log` protocol: partitioned, append-only topics with offsets, shared by every backend.

A backend guarantees: `append` returns only after the records are durable (embedded: fsync'd
RocksDB write; Kafka: acks=all from an idempotent producer), offsets in a partition are
dense and start at 0, and a `Reader` returns records of a partition in offset order starting
at the position its caller stored. Consumer-group offsets are never used as the truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Record:
    """One record read from the log, with its position."""

    topic: str
    partition: int
    offset: int
    value: bytes
    key: bytes | None = None


@dataclass(frozen=True, slots=True)
class Append:
    """One record to append: the partition it goes to, its value and optional key."""

    partition: int
    value: bytes
    key: bytes | None = None


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
class Log(Protocol):
    """A partitioned append-only log. Every backend passes tests/streams/test_log_conformance."""

    max_message_bytes: int

    def create_topic(self, topic: str, partitions: int, compacted: bool = False) -> None:
        """Creates `topic` if it does not exist. Raises LogError on a partition-count clash."""
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
    """Raises RecordTooLarge for the first record larger than `limit` bytes (value + key)."""
    from vectorlog.streams.errors import RecordTooLarge

    for r in records:
        size = len(r.value) + (len(r.key) if r.key else 0)
        if size > limit:
            raise RecordTooLarge(size, limit)
