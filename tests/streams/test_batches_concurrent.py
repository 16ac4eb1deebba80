"""Acknowledged batches from concurrent writers are never judged torn (both backends).

Several writers (each its own producer on Kafka) append multi-partition batches with large
parts and then their ticks, as proxies do; tick-aligned readers tail the topic. Every batch
was acknowledged before its writer ticked past it, so every reader must deliver every part
and dead-letter nothing. On Tansu a reader was once handed a later produce's records before
an earlier one's and skipped the earlier ones (`streams.log.kafkagaps`): a part of an
acknowledged insert was missed, its batch judged torn and its rows dropped.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.streams.test_batches import Letters
from tests.streams.test_msgstream_poison import rows
from tests.support import on_backends, unique_topic, wait_until
from vectorlog.core.hybridts import compose, wall_ms
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.batches import batched
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.log.kafka import KafkaLog
from vectorlog.streams.msgstream import StreamPosition, TickPolicy, TtMsgStream

SERDE = EventSerde()
PARTITIONS = 2
#: (parts per partition, padding bytes per part) of each writer's batches
WRITERS = [(2, 300_000), (1, 100), (1, 100), (2, 150_000)]
SECONDS = {"kafka": 30.0, "embedded": 3.0}


class Clock:
    """Strictly increasing hybrid timestamps shared by the writers (the oracle)."""

    def __init__(self) -> None:
        self._last, self._lock = 0, threading.Lock()

    def now(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, compose(wall_ms()))
            return self._last


def tick(ts: int, source: str) -> list[Append]:
    body = SERDE.encode(Event("TimeTick", ts, {"source": source}))
    return [Append(p, body) for p in range(PARTITIONS)]


class Writer(threading.Thread):
    """Appends batches, each followed by its writer's tick at the batch's ts."""

    def __init__(self, log: Log, topic: str, i: int, clock: Clock, stop: threading.Event):
        super().__init__(name=f"writer-{i}")
        self.log, self.topic, self.source, self.clock, self.stop = log, topic, f"w{i}", clock, stop
        self.parts, self.pad = WRITERS[i]
        self.appended = 0

    def first_tick(self) -> None:
        self.log.append(self.topic, tick(self.clock.now(), self.source))

    def run(self) -> None:
        pad = (("pad", b"x" * self.pad),)
        while not self.stop.is_set():
            ts = self.clock.now()
            value = SERDE.encode(rows(ts))
            parts = [Append(p, value, None, pad) for p in range(PARTITIONS)] * self.parts
            self.log.append(self.topic, batched(parts))
            self.appended += len(parts)
            self.log.append(self.topic, tick(self.clock.now(), self.source))


def writer_logs(log: Log, n: int) -> list[Log]:
    """Returns a log per writer: a producer of its own on Kafka, else `log`."""
    if isinstance(log, KafkaLog):
        return [KafkaLog(log.bootstrap, max_message_bytes=log.max_message_bytes) for _ in range(n)]
    return [log] * n


@pytest.mark.slow
@on_backends()
def test_concurrent_writers_acknowledged_batches_are_delivered_whole_to_every_reader(
    log: Log,
) -> None:
    topic, clock, stop = unique_topic(), Clock(), threading.Event()
    log.create_topic(topic, PARTITIONS)
    logs = writer_logs(log, len(WRITERS))
    writers = [Writer(wl, topic, i, clock, stop) for i, wl in enumerate(logs)]
    for w in writers:
        w.first_tick()  # every source is heard before any batch: none joins late
    start = {p: StreamPosition() for p in range(PARTITIONS)}
    policy = TickPolicy(liveness_ms=600_000)  # a writer starved by the load stays live
    letters = [Letters() for _ in range(2)]
    streams = [TtMsgStream(log, topic, start, SERDE, d, d.contains, ticks=policy) for d in letters]
    got, total = [0] * len(streams), -1  # total: known once the writers stopped

    def read() -> bool:
        """Reads what came; returns whether every part came to each reader, or a letter."""
        for i, s in enumerate(streams):
            got[i] += sum(len(p.events) for p in s.consume(timeout=0.02))
        return min(got) >= total or any(d.got for d in letters)

    for w in writers:
        w.start()
    deadline = time.monotonic() + SECONDS["kafka" if isinstance(log, KafkaLog) else "embedded"]
    while time.monotonic() < deadline:
        read()
    stop.set()
    for w in writers:
        w.join()
    for w in writers:  # a last tick past every batch
        w.first_tick()
    total = sum(w.appended for w in writers)
    wait_until(read, 120, "every part delivered to each reader, or a dead letter")
    for s in streams:
        s.close()
    for wl in logs:
        if wl is not log:
            wl.close()
    assert [[why for _, why in d.got] for d in letters] == [[], []] and got == [total, total]
