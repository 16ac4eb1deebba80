"""Prometheus metrics of the REST server: requests per endpoint and code, their latency, and
the cluster's log end offsets, segment states and dead letters; one registry per app."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as CounterMetric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from vectorlog.client import Client
from vectorlog.errors import VectorlogError
from vectorlog.streams.deadletter import read_dead_letters


class _Cluster(Collector):
    """The cluster's state, read at scrape time: each topic partition's log end offset, the
    segments by state, and the dead letters on the dlq topic."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def collect(self) -> Iterator[GaugeMetricFamily]:
        cluster = self.client.cluster
        ends = GaugeMetricFamily(
            "vectorlog_log_end_offset",
            "end offset per topic partition",
            labels=["topic", "partition"],
        )
        topics = cluster.topics
        for topic in (topics.ddl, topics.dml, topics.coord, topics.dlq):
            with contextlib.suppress(VectorlogError):  # a scrape never fails
                for partition, end in sorted(cluster.log.end_offsets(topic).items()):
                    ends.add_metric([topic, str(partition)], end)
        yield ends
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
