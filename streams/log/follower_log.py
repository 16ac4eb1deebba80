"""`FollowerLog`: the read side of the `Log` protocol over an embedded log that another process
(a running `vectorlog serve`) holds, through a RocksDB secondary instance
(`streams/log/secondary.py`). The read-only tools (`vectorlog dead-letters`, `replay`) use it,
so they run beside a server without taking its lock; it refuses every write."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from vectorlog.streams.errors import LogError, OffsetOutOfRange, TopicPartitionNotFound
from vectorlog.streams.log.base import Append, PartitionCursor, Record
from vectorlog.streams.log.embedded import DEFAULT_MAX_MESSAGE_BYTES
from vectorlog.streams.log.lease_fence import FenceState, LeaseFence
from vectorlog.streams.log.secondary import EmbeddedFollower

#: a poll that found nothing catches up with the primary this often until its timeout
_RECHECK_S = 0.05


class FollowerLogReadOnly(LogError):
    """A write was asked of a follower, which only reads."""


class FollowerLog:
    """Reads an embedded log directory (`<data dir>/log`) that may be open in another
    process. Raises FollowerError at construction if it holds no log."""

    def __init__(
        self,
        path: str | Path,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        recheck_s: float = _RECHECK_S,
    ):
        """`recheck_s`: how often a poll that found nothing catches up until its timeout."""
        self.path = str(path)
        self.max_message_bytes = max_message_bytes
        self.recheck_s = recheck_s
        self._follower = EmbeddedFollower(path)

    def create_topic(
        self,
        topic: str,
        partitions: int,
        compacted: bool = False,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
    ) -> None:
        """Raises FollowerLogReadOnly: a follower creates nothing."""
        raise FollowerLogReadOnly(f"embedded log {self.path} is open read-only: no {topic!r}")

    def append(self, topic: str, records: Sequence[Append]) -> list[int]:
        """Raises FollowerLogReadOnly: a follower appends nothing."""
        raise FollowerLogReadOnly(f"embedded log {self.path} is open read-only: cannot append")

    def partitions(self, topic: str) -> int:
        """Returns the partition count of `topic` now. Raises TopicNotFound."""
        self._follower.catch_up()
        return self._follower.partitions(topic)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: 1 + its last offset} as of now. Raises TopicNotFound."""
        n = self.partitions(topic)
        f = self._follower
        return {p: max(f.end(topic, p), f.start(topic, p)) for p in range(n)}

    def start_offsets(self, topic: str) -> dict[int, int]:
        """Returns {partition: its first offset still held}. Raises TopicNotFound."""
        n = self.partitions(topic)
        return {p: self._follower.start(topic, p) for p in range(n)}

    def reader(self, topic: str, positions: dict[int, int]) -> FollowerReader:
        """Returns a reader of `topic` from `positions`. Raises TopicPartitionNotFound."""
        n = self.partitions(topic)
        for p in positions:
            if not 0 <= p < n:
                raise TopicPartitionNotFound(topic, p)
        return FollowerReader(self._follower, topic, positions, self.recheck_s)

    def close(self) -> None:
        self._follower.close()


class FollowerReader(PartitionCursor):
    """Reads partitions of one topic through a follower, catching up while it finds none."""

    def __init__(
        self,
        follower: EmbeddedFollower,
        topic: str,
        positions: dict[int, int],
        recheck_s: float = _RECHECK_S,
    ):
        super().__init__(topic, positions)
        self._follower, self._recheck_s = follower, recheck_s
        self._fence = LeaseFence()  # hides a fenced leader's late appends (lease_fence)

    def seed_fence(self, state: FenceState) -> None:
        """Gives the fence the state at this reader's start (lease_fence.seeded)."""
        self._fence.seed(state)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        super().seek(topic, partition, offset)
        self._fence.forget(partition)

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        """Returns up to `max_records` next records, waiting up to `timeout` for new ones.
        Raises OffsetOutOfRange for a position retention deleted."""
        deadline = time.monotonic() + timeout
        while True:
            out = self._collect(max_records)
            if out or time.monotonic() >= deadline:
                return self._fence.admit(out)
            time.sleep(min(self._recheck_s, max(0.0, deadline - time.monotonic())))
            self._follower.catch_up()

    def _read(self, partition: int, offset: int, max_records: int) -> list[Record]:
        start = self._follower.start(self._topic, partition)
        if offset < start:
            raise OffsetOutOfRange(self._topic, partition, offset, start)
        return list(self._follower.scan(self._topic, partition, offset, offset + max_records))

    def close(self) -> None:
        """Nothing to release: the follower belongs to its FollowerLog."""
