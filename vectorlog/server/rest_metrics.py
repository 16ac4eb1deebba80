"""Prometheus metrics of `vectorlog serve`: REST requests per endpoint and code, their latency,
and the cluster's log end offsets, consumer lag per processor, segment states and dead letters;
one registry per app (gRPC's request metrics join it: grpc_metrics.py)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as CounterMetric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from vectorlog.client import Client
from vectorlog.errors import VectorlogError
from vectorlog.streams.deadletter import read_dead_letters

#: the cluster's processors that consume the log (the proxy consumes nothing: it appends)
PROCESSORS = ("rootcoord", "datacoord", "datanode", "indexnode", "querynode")


class _Cluster(Collector):
    """The cluster's state, read at scrape time: each topic partition's log end offset, the
    segments by state, and the dead letters on the dlq topic."""

    def __init__(self, client: Client) -> None:
        self.client = client

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
        dead = 0
        with contextlib.suppress(VectorlogError):  # no dlq topic yet: none
            dead = len(read_dead_letters(cluster.log, topics.dlq, timeout=2.0))
        yield GaugeMetricFamily("vectorlog_dead_letters", "dead letters on the dlq", dead)

    def _segments(self) -> GaugeMetricFamily:
        states: Counter[str] = Counter()
        with contextlib.suppress(VectorlogError):  # a collection dropped meanwhile
            for name in self.client.list_collections():
                states.update(s["state"] for s in self.client.list_segments(name))
        family = GaugeMetricFamily("vectorlog_segments", "segments by state", labels=["state"])
        for state, count in sorted(states.items()):
            family.add_metric([state], count)
        return family


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
    `vectorlog_rest_request_seconds{endpoint}` and the cluster's gauges (_Cluster)."""

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

    def observe(self, endpoint: str, code: int, seconds: float) -> None:
        """Counts one request of `endpoint` answered with Milvus code `code`."""
        self.requests.labels(endpoint, str(code)).inc()
        self.seconds.labels(endpoint).observe(seconds)

    def render(self) -> bytes:
        """Returns the Prometheus text exposition of every metric."""
        return bytes(generate_latest(self.registry))
