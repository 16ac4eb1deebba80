"""`SharedTailLog`: one reader per topic in a process, whose records every reader of that topic
in the process is served from (issue 24: an idle cluster's broker CPU).

A process tails the `coord` topic with several readers (the data node's, the query
coordination's, the index loader's, ...), each a Kafka consumer fetching the same partition:
each record is fetched once per reader, and every idle reader sends the broker a long poll
every 500 ms. Through this view of the log, the readers of a shared topic are `TailReader`s
served by one `SharedTail`: a reader of the underlying log that starts where the first of them
starts and keeps the records it read since in memory (the last WINDOW of each partition).

Each TailReader keeps what a reader of the underlying log gives its caller: its own positions,
records in offset order from the position it was made with or sought to, and its own
`LeaseFence` (seeded as any reader's: `lease_fence.seeded`). A reader whose position lies
before the window (it starts further back, or fell WINDOW records behind) reads with a
reader of its own until it reaches the window, then from the window. The shared reader's
records and those of a TailReader's own reader pass no fence (`lease_fence.Unfenceable`):
only the TailReader's, so it hides what a reader of its own, seeded alike, would. A failure
of the shared reader (the broker gone) is raised to the TailReaders polling it with nothing
to return; it goes on polling, and a poll that succeeds ends the failure.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from vectorlog.streams.errors import LogClosed, TopicPartitionNotFound
from vectorlog.streams.log.base import KnowsFetchedEnds, Log, Reader, Record
from vectorlog.streams.log.lease_fence import FenceState, LeaseFence, Unfenceable

#: records of each partition a SharedTail keeps (a TailReader further behind reads alone)
WINDOW = 20_000
#: seconds the shared reader waits in one poll (its long poll is the backend's)
POLL_S = 0.5
#: seconds the shared reader pauses after a failed poll
RETRY_S = 0.2
#: seconds a SharedTail with no reader left goes on reading (a reader made again soon after
#: finds it); then it closes (one read of a topic keeps no consumer for good)
LINGER_S = 10.0


def unfenced(reader: Reader) -> Reader:
    """Returns `reader`, its fence dropped where it has one (lease_fence.Unfenceable)."""
    if isinstance(reader, Unfenceable):
        reader.drop_fence()
    return reader


class SharedTail:
    """Reads `topic`'s partitions from `positions` on, on a thread of its own, and keeps the
    last WINDOW records of each partition for the TailReaders of the process."""

    def __init__(
        self, inner: Log, topic: str, positions: dict[int, int], retire: Callable[[], bool]
    ) -> None:
        """`retire()`: called while no reader is left for LINGER_S; True: close."""
        self.topic, self._retire = topic, retire
        #: TailReaders open on this tail, and time.monotonic() when the last one closed
        self.readers, self.left_at = 0, time.monotonic()
        self._reader = unfenced(inner.reader(topic, positions))
        self._cond = threading.Condition()
        self._offsets: dict[int, list[int]] = {p: [] for p in positions}
        self._records: dict[int, list[Record]] = {p: [] for p in positions}
        self._next = dict(positions)  # the offset the shared reader reads next, per partition
        self._error: Exception | None = None
        self._closed = False
        self._wakes = 0  # `wake` calls so far
        self._thread = threading.Thread(target=self._run, name=f"tail-{topic}", daemon=True)
        self._thread.start()

    def covers(self, positions: dict[int, int]) -> bool:
        """Returns whether every one of `positions` is in the window or after it."""
        with self._cond:
            return all(p in self._next and off >= self._start(p) for p, off in positions.items())

    def _start(self, p: int) -> int:
        """Returns the first offset of partition `p` the window serves."""
        return self._offsets[p][0] if self._offsets[p] else self._next[p]

    def read(
        self, positions: dict[int, int], max_records: int, timeout: float
    ) -> list[Record] | None:
        """Returns up to `max_records` records at or after `positions`, waiting up to
        `timeout` s for the first; None if a position fell out of the window. Raises what the
        shared reader last raised while there is nothing to return."""
        deadline = time.monotonic() + timeout
        with self._cond:
            wakes = self._wakes
            while True:
                if not all(off >= self._start(p) for p, off in positions.items()):
                    return None
                out = self._slice(positions, max_records)
                left = deadline - time.monotonic()
                if out or left <= 0 or self._closed or self._wakes != wakes:
                    return out
                if self._error is not None:
                    raise self._error
                self._cond.wait(left)

    def _slice(self, positions: dict[int, int], max_records: int) -> list[Record]:
        out: list[Record] = []
        for p, off in positions.items():
            i = bisect.bisect_left(self._offsets[p], off)
            out += self._records[p][i : i + max_records - len(out)]
        return out

    def fetched_ends(self) -> dict[int, int]:
        """Returns the shared reader's fetched ends ({} if it knows none)."""
        reader = self._reader
        return reader.fetched_ends() if isinstance(reader, KnowsFetchedEnds) else {}

    def _run(self) -> None:
        """Reads until closed or retired, then closes the shared reader (this thread's)."""
        try:
            self._follow()
        finally:
            self._reader.close()

    def _follow(self) -> None:
        while not self._closed:
            if not self.readers and time.monotonic() - self.left_at > LINGER_S and self._retire():
                self._closed = True
                return
            try:
                got = self._reader.poll(1000, POLL_S)
            except Exception as exc:  # the broker gone: told to the readers polling
                if self._closed:
                    return
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                time.sleep(RETRY_S)
                continue
            if got or self._error is not None:
                self._keep(got)

    def _keep(self, got: list[Record]) -> None:
        """Adds `got` to the window (dropping its oldest past WINDOW) and wakes the readers."""
        with self._cond:
            self._error = None
            for r in got:
                self._offsets[r.partition].append(r.offset)
                self._records[r.partition].append(r)
                self._next[r.partition] = r.offset + 1
            for p, offsets in self._offsets.items():
                if len(offsets) > WINDOW:
                    del offsets[: len(offsets) - WINDOW]
                    del self._records[p][: len(self._records[p]) - WINDOW]
            self._cond.notify_all()

    def wake(self) -> None:
        """Makes the TailReaders waiting now return what they have."""
        with self._cond:
            self._wakes += 1
            self._cond.notify_all()

    def close(self) -> None:
        """Stops the thread, which closes the shared reader (waits up to one poll more)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(POLL_S + 5.0)


class TailReader:
    """A reader of one topic served by the process's SharedTail of it (module docstring)."""

    def __init__(self, shared: SharedTailLog, topic: str, positions: dict[int, int]) -> None:
        self._shared, self._topic = shared, topic
        self._pos = dict(positions)
        self._fence = LeaseFence()
        self._tail = shared.tail(topic, positions)
        self._own: Reader | None = None
        self._closed = False
        try:
            if not self._tail.covers(self._pos):
                self._own = unfenced(shared.inner.reader(topic, self._pos))
        except BaseException:
            shared.leave(self._tail)
            raise

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[Record]:
        """Returns the next records (up to `max_records`), waiting up to `timeout` s for the
        first. Raises LogClosed once closed, or what the shared reader raised."""
        if self._closed:
            raise LogClosed(f"reader of {self._topic}")
        if max_records < 1:
            return []
        got = None if self._own is not None else self._tail.read(self._pos, max_records, timeout)
        if got is None:
            got = self._read_own(max_records, timeout)
        for r in got:
            self._pos[r.partition] = r.offset + 1
        return self._fence.admit(got)

    def _read_own(self, max_records: int, timeout: float) -> list[Record]:
        """Reads with a reader of its own (made where it is missing), closed once the
        positions are back in the window."""
        if self._own is None:
            self._own = unfenced(self._shared.inner.reader(self._topic, self._pos))
        got = self._own.poll(max_records, timeout)
        after = dict(self._pos) | {r.partition: r.offset + 1 for r in got}
        if self._tail.covers(after):
            self._own.close()
            self._own = None
        return got

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Moves `partition`'s position to `offset`. Raises TopicPartitionNotFound for a topic
        or partition this reader does not read."""
        if topic != self._topic or partition not in self._pos:
            raise TopicPartitionNotFound(topic, partition)
        self._pos[partition] = offset
        self._fence.forget(partition)
        if self._own is not None:
            self._own.seek(topic, partition, offset)

    def seed_fence(self, state: FenceState) -> None:
        """Gives the fence the state at this reader's start (lease_fence.seeded)."""
        self._fence.seed(state)

    def fetched_ends(self) -> dict[int, int]:
        """Returns {partition: an offset every record below which was in the log when the
        shared reader (or this one's own) last fetched}, for this reader's partitions."""
        own = self._own
        ends = (
            own.fetched_ends() if isinstance(own, KnowsFetchedEnds) else self._tail.fetched_ends()
        )
        return {p: e for p, e in ends.items() if p in self._pos}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._shared.leave(self._tail)
        if self._own is not None:
            self._own.close()
            self._own = None


class SharedTailLog:
    """`inner` whose readers of `topics` (None: of every topic) are TailReaders (module
    docstring); everything else is `inner`'s."""

    def __init__(self, inner: Log, topics: Collection[str] | None) -> None:
        self.inner, self.topics = inner, None if topics is None else frozenset(topics)
        self._tails: dict[str, SharedTail] = {}
        self._lock = threading.Lock()

    def reader(self, topic: str, positions: dict[int, int]) -> Reader:
        """Returns a reader of `topic` over {partition: next offset to read}: a TailReader
        for a shared topic. Raises TopicPartitionNotFound for a partition the topic lacks."""
        if self.topics is not None and topic not in self.topics:
            return self.inner.reader(topic, positions)
        n = self.inner.partitions(topic)
        for p in positions:
            if not 0 <= p < n:
                raise TopicPartitionNotFound(topic, p)
        return TailReader(self, topic, positions)

    def tail(self, topic: str, positions: dict[int, int]) -> SharedTail:
        """Returns the SharedTail of `topic`, a reader more counted on it; started at
        `positions` if there is none (one of every partition of the topic: the first
        reader's for those it reads)."""
        with self._lock:
            if topic not in self._tails:
                start = self.inner.end_offsets(topic) | positions
                self._tails[topic] = SharedTail(
                    self.inner, topic, start, lambda: self._retire(topic)
                )
            tail = self._tails[topic]
            tail.readers += 1
            return tail

    def leave(self, tail: SharedTail) -> None:
        """Counts a reader of `tail` fewer."""
        with self._lock:
            tail.readers -= 1
            if not tail.readers:
                tail.left_at = time.monotonic()

    def _retire(self, topic: str) -> bool:
        """Forgets `topic`'s SharedTail if no reader is left on it; returns whether it did."""
        with self._lock:
            tail = self._tails.get(topic)
            if tail is None or tail.readers:
                return False
            del self._tails[topic]
            return True

    def wake_readers(self) -> None:
        """Wakes the readers waiting in `poll`, the backend's too (WakesReaders)."""
        for t in list(self._tails.values()):
            t.wake()
        wake = getattr(self.inner, "wake_readers", None)
        if wake is not None:
            wake()

    def close(self) -> None:
        with self._lock:
            tails, self._tails = list(self._tails.values()), {}
        for t in tails:
            t.close()
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def shared_tails(inner: Log, topics: Collection[str]) -> Log:
    """Returns `inner` with one shared reader per topic of `topics` in this process (typed
    as the Log it stands in for)."""
    return SharedTailLog(inner, topics)
