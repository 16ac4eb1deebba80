"""The ingest-topic benchmark's freshness probe: one row produced every `every_s` with its
produce time noted; the reader polls Strong queries and the ingest consumer's committed
positions, so each row gets two latencies: produce -> consumed (the position passed its
offset) and produce -> visible (the first Strong query that returned it came back)."""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any

import numpy as np

from vectorlog import Client
from vectorlog.producer import IngestProducer, IngestTopic, json_row
from vectorlog.streams.log.base import Append

#: a row not visible this long after the last produce is counted as never seen
GIVE_UP_S = 30.0
#: the reader's pause between reads: each latency is an upper bound, by up to this much
READ_EVERY_S = 0.002


class FreshnessProbe:
    """Produces rows of `name` to `topic` on a thread, reads them back on the caller's."""

    def __init__(self, client: Client, name: str, topic: IngestTopic, every_s: float) -> None:
        self.client, self.name, self.topic, self.every_s = client, name, topic, every_s
        self.produced: dict[int, float] = {}
        self.offsets: dict[int, int] = {}
        self.consumed: dict[int, float] = {}
        self.seen: dict[int, float] = {}
        self.reads: list[float] = []
        self.warm = 0  # the first rows, produced to warm the producer up: not counted
        self._done = threading.Event()
        self._finished = threading.Event()

    def run(self, seconds: float, x: np.ndarray) -> dict[str, Any]:
        """Produces for `seconds` while reading; returns the latency percentiles (ms)."""
        thread = threading.Thread(target=self._produce, args=(seconds, x), daemon=True)
        watcher = threading.Thread(target=self._watch, daemon=True)
        thread.start()
        watcher.start()
        while not self._done.is_set() or len(self.seen) < len(self.produced):
            self._read()
            time.sleep(READ_EVERY_S)  # a reader spinning on queries would starve the consumer
            last = max(self.produced, default=0)
            if self._done.is_set() and time.perf_counter() - self.produced[last] > GIVE_UP_S:
                break
        self._finished.set()
        thread.join()
        watcher.join()
        return self._summary()

    def _watch(self) -> None:
        """Notes when the consumer's committed position passes each row (its own thread: a
        Strong query can wait up to a tick, which would delay these notes)."""
        while not self._finished.is_set():
            at = self.client.cluster.ingest.positions().get((self.topic.name, 0), 0)
            now = time.perf_counter()
            for i, off in list(self.offsets.items()):
                if off < at and i not in self.consumed:
                    self.consumed[i] = now
            time.sleep(READ_EVERY_S)

    def _read(self) -> None:
        asked = time.perf_counter()
        found = self.client.query(
            self.name,
            filter=f"id >= {len(self.seen)}",
            output_fields=["id"],
            consistency_level="Strong",
        )
        now = time.perf_counter()
        self.reads.append((now - asked) * 1000)
        self.seen.update({r["id"]: now for r in found if r["id"] not in self.seen})

    def _produce(self, seconds: float, x: np.ndarray) -> None:
        """Produces row i at start + i * every_s, noting when each produce was called."""
        cfg = self.client.cfg
        kafka = IngestProducer(cfg.bootstrap, {"linger.ms": 0}) if cfg.is_kafka else None
        if kafka is not None:  # a long-lived producer's connection and producer id are ready
            self.produced[0], self.warm = time.perf_counter(), 1
            kafka.produce(
                json_row(self.topic, {"id": 0, "vector": x[0]}), partial(self._delivered, 0)
            )
            kafka.flush()
        start, i = time.perf_counter(), len(self.produced)
        while time.perf_counter() - start < seconds:
            record = json_row(self.topic, {"id": i, "vector": x[i % len(x)]})
            self.produced[i] = time.perf_counter()
            if kafka is not None:
                kafka.produce(record, partial(self._delivered, i))
            else:
                append = Append(0, record.value or b"", record.key, record.headers)
                (self.offsets[i],) = self.client.cluster.log.append(self.topic.name, [append])
            i += 1
            time.sleep(max(0.0, start + (i - self.warm) * self.every_s - time.perf_counter()))
        if kafka is not None:
            kafka.close()
        self._done.set()

    def _delivered(self, i: int, _err: Any, msg: Any) -> None:
        self.offsets[i] = msg.offset()

    def _summary(self) -> dict[str, Any]:
        ids = sorted(i for i in self.produced if i >= self.warm)
        late = [(self.seen[i] - self.produced[i]) * 1000 for i in ids if i in self.seen]
        taken = [(self.consumed[i] - self.produced[i]) * 1000 for i in ids if i in self.consumed]
        return {
            "rows": len(ids),
            "seen": len(late),
            "p50_ms": _pct(late, 50),
            "p99_ms": _pct(late, 99),
            "max_ms": max(late, default=float("nan")),
            "consumed_p50_ms": _pct(taken, 50),
            "consumed_p99_ms": _pct(taken, 99),
            "strong_query_p50_ms": _pct(self.reads, 50),
            "strong_query_p99_ms": _pct(self.reads, 99),
        }


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")
