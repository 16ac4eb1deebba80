"""`/healthz` and Prometheus `/metrics` of one process of the cluster mode, on its own port.

`/healthz` answers 200 "ok" once the process's processors are started (200 "standby" while a
standby waits for its role's lease: it is alive) and 503 "starting" or "stopping" otherwise,
to anyone (a liveness probe); `/metrics`, with the cluster's token, only to a scrape that
sends it as `Authorization: Bearer TOKEN` (401 otherwise), has
`vectorlog_process_up{role}` and, per processor the process runs,
`vectorlog_consumer_next_offset{processor, topic, partition}`; in a process that follows the
query assignment (datacoord, proxy) the gauges of query_metrics.py; in a process serving RPCs,
`vectorlog_rpc_served_total{service, method}` (calls served since it started); in a process
following the `ddl` topic (not rootcoord), `vectorlog_ddl_catch_ups_total` (look-ups of the
latest meta that waited for the watch to reach the topic's end); in an ingest worker,
`vectorlog_ingest_batches_total` (batches of records applied); in a proxy,
`vectorlog_proxy_coalescible_searches_total`, `vectorlog_proxy_search_batches_total` and
`vectorlog_proxy_searches_coalesced_total` (searches that could be coalesced, the searches
sent to the query nodes for them, and those sent in a batch of several)."""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from vectorlog.runners.query_metrics import assignment_gauges, data_channel_gauge

PROCESSORS = ("rootcoord", "datacoord", "querynode", "datanode", "indexnode")


class _Gauges(Collector):
    def __init__(self, role: str, runner: Callable[[], Any]) -> None:
        self.role, self.runner = role, runner

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        runner = self.runner()
        up = GaugeMetricFamily("vectorlog_process_up", "1 once started", labels=["role"])
        up.add_metric([self.role], 1 if runner is not None else 0)
        yield up
        family = GaugeMetricFamily(
            "vectorlog_consumer_next_offset",
            "the next offset a processor of this process reads",
            labels=["processor", "topic", "partition"],
        )
        for name in PROCESSORS:
            next_offsets = getattr(getattr(runner, name, None), "next_offsets", None)
            if next_offsets is None:
                continue
            try:
                offsets = next_offsets()
            except Exception:  # a scrape never fails: the store closed meanwhile
                continue
            for (topic, partition), nxt in sorted(offsets.items()):
                family.add_metric([name, topic, str(partition)], nxt)
        yield family
        routing = getattr(runner, "routing", None)  # the query assignment, if it follows it
        if routing is not None:
            yield from assignment_gauges(routing.assignment, runner.topics.dml_partitions)
        for name in ("datachannels", "indexchannels"):  # datacoord's divisions
            channels = getattr(runner, name, None)
            if channels is not None:
                yield data_channel_gauge(channels.role, channels.fence.owners)
        rpc = getattr(runner, "rpc", None)
        if rpc is not None:
            yield _served(rpc.served.counts())
        yield from _ingest_counters(runner)
        yield from _search_batches(runner)


def _ingest_counters(runner: Any) -> Iterator[CounterMetricFamily]:
    """Yields the ddl watches' catch-ups and the ingest worker's batches, where there are."""
    watches = getattr(runner, "ddl_watches", None)
    if watches:
        yield CounterMetricFamily(
            "vectorlog_ddl_catch_ups",
            "look-ups of the latest meta that waited for the ddl watch to reach the topic's end",
            value=sum(w.catch_ups for w in watches),
        )
        yield CounterMetricFamily(
            "vectorlog_ddl_end_queries",
            "queries to the broker for the ddl topic's end (made while no DDL lease is valid)",
            value=sum(w.end_queries for w in watches),
        )
    ingest = getattr(runner, "ingest", None)
    if ingest is not None:
        yield CounterMetricFamily(
            "vectorlog_ingest_batches", "batches of ingest records applied", value=ingest.batches
        )


def _search_batches(runner: Any) -> Iterator[CounterMetricFamily]:
    """Yields a proxy's searches sent to the query nodes and the searches that went in a
    batch of several (runners.coalesce), where the process has a proxy."""
    coalescer = getattr(getattr(getattr(runner, "proxy", None), "qn", None), "coalescer", None)
    if coalescer is None:
        return
    yield CounterMetricFamily(
        "vectorlog_proxy_coalescible_searches",
        "searches a proxy asked of the query nodes that could go in a batch (runners.coalesce)",
        value=coalescer.searches,
    )
    yield CounterMetricFamily(
        "vectorlog_proxy_search_batches",
        "searches a proxy sent to the query nodes for those (a batch counts once)",
        value=coalescer.batches,
    )
    yield CounterMetricFamily(
        "vectorlog_proxy_searches_coalesced",
        "searches a proxy sent in a batch of several (runners.coalesce)",
        value=coalescer.coalesced,
    )


def _served(counts: dict[tuple[str, str], int]) -> CounterMetricFamily:
    """Returns the counter of the RPCs this process served, by service and method."""
    family = CounterMetricFamily(
        "vectorlog_rpc_served", "RPCs served by this process", labels=["service", "method"]
    )
    for (service, method), n in sorted(counts.items()):
        family.add_metric([service, method], n)
    return family


class HealthServer:
    """Serves /healthz and /metrics on `port` (0: any free one) in a daemon thread."""

    def __init__(self, role: str, host: str, port: int, token: str | None = None) -> None:
        """`token`: the cluster's token /metrics asks for (None: none)."""
        self.state, self.runner = "starting", None
        wanted = f"Bearer {token}".encode() if token else None
        registry = CollectorRegistry()
        registry.register(_Gauges(role, lambda: self.runner))
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/healthz":
                    ok = outer.state in ("ok", "standby")
                    self._send(200 if ok else 503, outer.state.encode(), "text/plain")
                elif self.path == "/metrics" and not self._authorized():
                    self._send(401, b"the cluster's token is required", "text/plain")
                elif self.path == "/metrics":
                    self._send(200, generate_latest(registry), "text/plain; version=0.0.4")
                else:
                    self._send(404, b"not found", "text/plain")

            def _authorized(self) -> bool:
                given = (self.headers.get("Authorization") or "").strip().encode()
                return wanted is None or hmac.compare_digest(given, wanted)

            def _send(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer((host, port), Handler)
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
