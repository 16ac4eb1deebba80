"""Prometheus metrics of `vectorlog serve`: REST requests per endpoint and code, their latency,
and the cluster's log end offsets, consumer lag per processor, segment states and dead letters;
one registry per app (gRPC's request metrics join it: grpc_metrics.py)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client import Counter as CounterMetric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from vectorlog.core.errors import VectorlogError
from vectorlog.sdk.client import Client
from vectorlog.server.milvus_metrics import REST_FUNCTIONS, ProxyMetrics, datacoord_families
from vectorlog.streams.deadletter import DeadLetter, Position, is_dead_letter, parse
from vectorlog.streams.log.base import Log
from vectorlog.streams.scan import read_all

#: the dead-letter count is read again at most this often (a scrape does not read the dlq)
DEAD_LETTERS_EVERY_S = 5.0
#: the newest dead letters whose summaries are kept for the console (the count covers all)
KEEP_LETTERS = 10_000
#: the cluster's processors that consume the log (the proxy consumes nothing: it appends)
PROCESSORS = ("rootcoord", "datacoord", "datanode", "indexnode", "querynode")
#: a dead letter's preview shows at most this many of its first bytes
PREVIEW_BYTES = 200


class _Cluster(Collector):
    """The cluster's state, read at scrape time: each topic partition's log end offset, the
    segments by state, and the dead letters on the dlq topic (DeadLetterCount)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.dead_letters = DeadLetterCount(client.cluster.log, client.cluster.topics.dlq)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        cluster = self.client.cluster
        family = GaugeMetricFamily(
            "vectorlog_log_end_offset",
            "end offset per topic partition",
            labels=["topic", "partition"],
        )
        ends = log_ends(cluster)
        for (topic, partition), end in sorted(ends.items()):
            family.add_metric([topic, str(partition)], end)
        yield family
        yield consumer_lag(cluster, ends)
        yield self._segments()
        dead = self.dead_letters.count()
        yield GaugeMetricFamily("vectorlog_dead_letters", "dead letters on the dlq", dead)
        yield from datacoord_families(self.client)

    def _segments(self) -> GaugeMetricFamily:
        states: Counter[str] = Counter()
        with contextlib.suppress(VectorlogError):  # a collection dropped meanwhile
            for name in self.client.list_collections():
                states.update(s["state"] for s in self.client.list_segments(name))
        family = GaugeMetricFamily("vectorlog_segments", "segments by state", labels=["state"])
        for state, count in sorted(states.items()):
            family.add_metric([state], count)
        return family


class DeadLetterCount:
    """The dead letters on the dlq topic (as `read_dead_letters` counts them: each
    processor's letter of a source record once), read incrementally: a refresh reads only
    the records appended since the last one, and runs at most every `every_s` seconds (a
    call in between gets them as of the last refresh). Keeps the summaries (no bytes but a
    short preview) of the newest `keep` letters for the console's dead-letter page: a flood
    of bad records cannot grow the server's memory by their previews (`vectorlog
    dead-letters` reads them all)."""

    def __init__(
        self,
        log: Log,
        topic: str,
        every_s: float = DEAD_LETTERS_EVERY_S,
        keep: int = KEEP_LETTERS,
    ) -> None:
        self.log, self.topic, self.every_s = log, topic, every_s
        self._next: dict[int, int] = {}
        self._seen: set[tuple[str, Position]] = set()
        self._letters: deque[dict[str, Any]] = deque(maxlen=keep)
        self._count = 0
        self._refreshed = -math.inf
        self._lock = threading.Lock()

    def count(self) -> int:
        """Returns the count, refreshed first if the last refresh is `every_s` old (a topic
        not there yet, or not readable now, leaves the count as it was). Raises nothing."""
        with self._lock:
            self._maybe_refresh()
            return self._count

    def page(self, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """Returns (the count, the summaries of letters `offset` to `offset + limit`, newest
        first, among the newest `keep`): {reason, processor, topic, partition, offset, bytes,
        preview}. Raises nothing."""
        with self._lock:
            self._maybe_refresh()
            newest_first = list(reversed(self._letters))
            return self._count, newest_first[offset : offset + limit]

    def _maybe_refresh(self) -> None:
        if time.monotonic() - self._refreshed >= self.every_s:
            with contextlib.suppress(VectorlogError):
                self._refresh()
            self._refreshed = time.monotonic()

    def _refresh(self) -> None:
        for rec in read_all(self.log, self.topic, timeout=2.0, start=dict(self._next)):
            self._next[rec.partition] = rec.offset + 1
            if not is_dead_letter(rec):
                continue
            letter = parse(rec)
            who = (letter.processor, letter.source)
            if letter.offset < 0 or who not in self._seen:
                self._seen.add(who)
                self._letters.append(summary(letter))
                self._count += 1


def summary(letter: DeadLetter) -> dict[str, Any]:
    """Returns what the console shows of a dead letter: its reason, processor, source
    position, size and a text preview of its first bytes (None for binary bytes)."""
    return {
        "reason": letter.reason,
        "processor": letter.processor,
        "topic": letter.topic,
        "partition": letter.partition,
        "offset": letter.offset,
        "bytes": letter.size,
        "preview": text_preview(letter.value[:PREVIEW_BYTES]),
    }


def text_preview(raw: bytes) -> str | None:
    """Returns `raw` decoded as UTF-8 (a multi-byte character cut at the end dropped) if it
    is printable text (tabs and line breaks allowed), else None."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        if exc.start < len(raw) - 3:
            return None
        text = raw[: exc.start].decode()
    if not text or not all(c.isprintable() or c in "\t\n\r" for c in text):
        return None
    return text


def log_ends(cluster: Any) -> dict[tuple[str, int], int]:
    """Returns each (topic, partition)'s log end offset of the cluster's ddl, dml, coord and
    dlq topics (a topic that cannot be read now is left out). Raises nothing."""
    topics = cluster.topics
    ends: dict[tuple[str, int], int] = {}
    for topic in (topics.ddl, topics.dml, topics.coord, topics.dlq):
        with contextlib.suppress(VectorlogError):  # a scrape never fails
            ends.update(((topic, p), e) for p, e in cluster.log.end_offsets(topic).items())
    return ends


def consumer_positions(cluster: Any, ends: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    """Returns, per running processor and (topic, partition) it consumes, {processor, topic,
    partition, position (its next offset), end, lag}: lag = end - position, never below 0
    (a Kafka high watermark may lag the real end: DESIGN.md s.8). Raises nothing."""
    rows: list[dict[str, Any]] = []
    for name in PROCESSORS:
        next_offsets = getattr(getattr(cluster, name, None), "next_offsets", None)
        if next_offsets is None:
            continue  # not running (e.g. no data node), or it consumes nothing
        with contextlib.suppress(VectorlogError):  # its store closed meanwhile
            for (topic, partition), nxt in sorted(next_offsets().items()):
                if (topic, partition) in ends:
                    end = ends[topic, partition]
                    rows.append(
                        {
                            "processor": name,
                            "topic": topic,
                            "partition": partition,
                            "position": nxt,
                            "end": end,
                            "lag": max(0, end - nxt),
                        }
                    )
    return rows


def consumer_lag(cluster: Any, ends: dict[tuple[str, int], int]) -> GaugeMetricFamily:
    """Returns `vectorlog_consumer_lag{processor, topic, partition}` (consumer_positions'
    lag)."""
    family = GaugeMetricFamily(
        "vectorlog_consumer_lag",
        "log end offset minus the processor's next position",
        labels=["processor", "topic", "partition"],
    )
    for row in consumer_positions(cluster, ends):
        family.add_metric([row["processor"], row["topic"], str(row["partition"])], row["lag"])
    return family


class Metrics:
    """The app's registry: `vectorlog_rest_requests_total{endpoint, code}`,
    `vectorlog_rest_request_seconds{endpoint}`, the cluster's gauges (_Cluster), Milvus's
    names of the proxy's and datacoord's quantities (milvus_metrics.py) and
    prometheus_client's process_*, python_info and python_gc_* metrics."""

    def __init__(self, client: Client) -> None:
        self.registry = CollectorRegistry()
        self.requests = CounterMetric(
            "vectorlog_rest_requests",
            "REST v2 requests by endpoint and Milvus code",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "vectorlog_rest_request_seconds",
            "REST v2 request latency by endpoint",
            ["endpoint"],
            registry=self.registry,
        )
        self.cluster = _Cluster(client)
        self.registry.register(self.cluster)
        self.milvus = ProxyMetrics(self.registry)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.registry.register(GC_COLLECTOR)

    def observe(self, endpoint: str, code: int, seconds: float, vectors: int = 0) -> None:
        """Counts one request of `endpoint` answered with Milvus code `code`, carrying
        `vectors` insert or search vectors (under Milvus's names when it is a MilvusService
        function)."""
        self.requests.labels(endpoint, str(code)).inc()
        self.seconds.labels(endpoint).observe(seconds)
        if endpoint in REST_FUNCTIONS:
            self.milvus.observe(REST_FUNCTIONS[endpoint], code == 0, seconds, vectors)

    def render(self) -> bytes:
        """Returns the Prometheus text exposition of every metric."""
        return bytes(generate_latest(self.registry))
