"""`MemoryLog`: an in-memory twin of the `Log` protocol, for unit tests of the processor loop.

Topics are lists per partition; readers see records appended after they were opened. A test
can make the next `fail_polls` polls raise (the log failing under a consumer). It is never
what a user runs.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from vectorlog.streams.errors import LogError, TopicNotFound
from vectorlog.streams.log.base import Append, Record


class MemoryLog:
    """A partitioned append-only log held in memory."""

    max_message_bytes = 1 << 20

    def __init__(self) -> None:
        self.topics: dict[str, list[list[Record]]] = {}
        self.fail_polls = 0
        self.readers_opened = 0
        self._cond = threading.Condition()

    def create_topic(
        self,
        topic: str,
        partitions: int,
        compacted: bool = False,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
    ) -> None:
        with self._cond:
            self.topics.setdefault(topic, [[] for _ in range(partitions)])

    def partitions(self, topic: str) -> int:
        return len(self._topic(topic))

    def _topic(self, topic: str) -> list[list[Record]]:
        if topic not in self.topics:
            raise TopicNotFound(topic)
        return self.topics[topic]

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        with self._cond:
            parts, out = self._topic(topic), []
            for r in records:
                offset = len(parts[r.partition])
                parts[r.partition].append(
                    Record(topic, r.partition, offset, r.value, r.key, r.headers)
                )
                out.append(offset)
            self._cond.notify_all()
        return out

    def reader(self, topic: str, positions: dict[int, int]) -> MemoryReader:
        self._topic(topic)
        self.readers_opened += 1
        return MemoryReader(self, topic, positions)

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {p: len(records) for p, records in enumerate(self._topic(topic))}

    def close(self) -> None:
        return None


class MemoryReader:
    """Reads some partitions of a MemoryLog topic from given offsets."""

    def __init__(self, log: MemoryLog, topic: str, positions: dict[int, int]) -> None:
        self._log, self._topic, self._at = log, topic, dict(positions)
        self.closed = False

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        with self._log._cond:
            if self._log.fail_polls > 0:
                self._log.fail_polls -= 1
                raise LogError("the memory log was told to fail this poll")
            out = self._take(max_records)
            if not out and timeout > 0:
                self._log._cond.wait(timeout)
                out = self._take(max_records)
        return out

    def _take(self, max_records: int) -> list[Record]:
        out: list[Record] = []
        for p, at in self._at.items():
            got = self._log.topics[self._topic][p][at : at + max_records - len(out)]
            out += got
            self._at[p] = at + len(got)
        return out

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._at[partition] = offset

    def close(self) -> None:
        self.closed = True
