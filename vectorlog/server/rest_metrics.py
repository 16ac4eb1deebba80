"""Prometheus metrics of `vectorlog serve`: REST requests per endpoint and code, their latency,
and the cluster's log end offsets, consumer lag per processor, segment states and dead letters;
one registry per app (gRPC's request metrics join it: grpc_metrics.py)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import Counter
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
from vectorlog.streams.deadletter import Position, is_dead_letter, parse
from vectorlog.streams.log.base import Log
from vectorlog.streams.scan import read_all

#: the dead-letter count is read again at most this often (a scrape does not read the dlq)
DEAD_LETTERS_EVERY_S = 5.0
#: the cluster's processors that consume the log (the proxy consumes nothing: it appends)
PROCESSORS = ("rootcoord", "datacoord", "datanode", "indexnode", "querynode")


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
        topics = cluster.topics
        ends: dict[tuple[str, int], int] = {}
        for topic in (topics.ddl, topics.dml, topics.coord, topics.dlq):
            with contextlib.suppress(VectorlogError):  # a scrape never fails
                ends.update(((topic, p), e) for p, e in cluster.log.end_offsets(topic).items())
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
    """The number of dead letters on the dlq topic (as `read_dead_letters` counts them: each
    processor's letter of a source record once), read incrementally: a refresh reads only
    the records appended since the last one, and runs at most every `every_s` seconds (a
    scrape in between gets the count as of the last refresh)."""

    def __init__(self, log: Log, topic: str, every_s: float = DEAD_LETTERS_EVERY_S) -> None:
        self.log, self.topic, self.every_s = log, topic, every_s
        self._next: dict[int, int] = {}
        self._seen: set[tuple[str, Position]] = set()
        self._count = 0
        self._refreshed = -math.inf
        self._lock = threading.Lock()

    def count(self) -> int:
        """Returns the count, refreshed first if the last refresh is `every_s` old (a topic
        not there yet, or not readable now, leaves the count as it was). Raises nothing."""
        with self._lock:
            if time.monotonic() - self._refreshed >= self.every_s:
                with contextlib.suppress(VectorlogError):
                    self._refresh()
                self._refreshed = time.monotonic()
            return self._count

    def _refresh(self) -> None:
        for rec in read_all(self.log, self.topic, timeout=2.0, start=dict(self._next)):
            self._next[rec.partition] = rec.offset + 1
            if not is_dead_letter(rec):
                continue
            letter = parse(rec)
            who = (letter.processor, letter.source)
            if letter.offset < 0 or who not in self._seen:
                self._seen.add(who)
                self._count += 1


def consumer_lag(cluster: Any, ends: dict[tuple[str, int], int]) -> GaugeMetricFamily:
    """Returns `vectorlog_consumer_lag{processor, topic, partition}`: the log end offset minus
    the processor's next position (its `next_offsets()`), never below 0 (a Kafka high
    watermark may lag the real end: DESIGN.md s.8)."""
    family = GaugeMetricFamily(
        "vectorlog_consumer_lag",
        "log end offset minus the processor's next position",
        labels=["processor", "topic", "partition"],
    )
    for name in PROCESSORS:
        next_offsets = getattr(getattr(cluster, name, None), "next_offsets", None)
        if next_offsets is None:
            continue  # not running (e.g. no data node), or it consumes nothing
        with contextlib.suppress(VectorlogError):  # its store closed meanwhile
            for (topic, partition), nxt in sorted(next_offsets().items()):
                if (topic, partition) in ends:
                    lag = max(0, ends[topic, partition] - nxt)
                    family.add_metric([name, topic, str(partition)], lag)
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
        self.registry.register(_Cluster(client))
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
