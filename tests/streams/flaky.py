"""Test helpers: a Log whose appends to one topic fail while it is `down` (a dead-letter topic
that cannot be written), and a dead-letter sink that fails a given number of times."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from vectorlog.streams.errors import LogError
from vectorlog.streams.log.base import Append, Log, Reader, Record


class FlakyLog:
    """Wraps a Log; `append` to `topic` raises LogError while `down` is set, counting."""

    def __init__(self, log: Log, topic: str) -> None:
        self._log, self.topic = log, topic
        self.max_message_bytes = log.max_message_bytes
        self.down = threading.Event()
        self.failures = 0

    def create_topic(
        self,
        topic: str,
        partitions: int,
        compacted: bool = False,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
    ) -> None:
        self._log.create_topic(topic, partitions, compacted, retention_ms, retention_bytes)

    def partitions(self, topic: str) -> int:
        return self._log.partitions(topic)

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        if topic == self.topic and self.down.is_set():
            self.failures += 1
            raise LogError(f"{topic} cannot be written (test)")
        return self._log.append(topic, records)

    def reader(self, topic: str, positions: dict[int, int]) -> Reader:
        return self._log.reader(topic, positions)

    def end_offsets(self, topic: str) -> dict[int, int]:
        return self._log.end_offsets(topic)

    def close(self) -> None:
        """The wrapped log belongs to the test's fixture."""


class FailingSink:
    """A dead-letter sink that raises LogError `failures` times, then records letters; it
    remembers their positions like DeadLetterWriter (`seen`)."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.letters: list[tuple[Record, str]] = []
        self.positions: set[tuple[int, int]] = set()

    def __call__(self, record: Record, reason: str) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise LogError("the dead-letter topic cannot be written (test)")
        self.letters.append((record, reason))
        self.positions.add((record.partition, record.offset))

    def seen(self, record: Record) -> bool:
        return (record.partition, record.offset) in self.positions
