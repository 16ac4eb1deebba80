"""Milvus's metric names (pkg/metrics of milvus-io/milvus) for the quantities vectorlog has, so
Milvus's Grafana dashboards and alerts work on `vectorlog serve`'s /metrics: the proxy's
request counts and latencies (gRPC and REST v2 calls, by MilvusService function name), its
search and insert vector counts, and datacoord's segment, collection and stored-row gauges.

Milvus's Go client exposes a counter under its own name (`milvus_proxy_req_count`), where
Python's prometheus_client would add `_total`; so the counters here are exposed as untyped
samples under Milvus's exact names. Latencies are histograms in milliseconds with Milvus's
buckets (1, 2, 4 ... 131072 ms)."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vectorlog.core.errors import VectorlogError

#: the node_id label of every proxy metric (one proxy per `vectorlog serve` process)
NODE_ID = "1"
#: Milvus's latency buckets, in ms: prometheus.ExponentialBuckets(1, 2, 18)
BUCKETS_MS = tuple(float(2**i) for i in range(18))
#: Milvus's status label values of milvus_proxy_req_count
TOTAL, SUCCESS, FAIL = "total", "success", "fail"
#: the query_type of milvus_proxy_sq_latency and the msg_type of milvus_proxy_mutation_latency
QUERY_TYPES = {"Search": "search", "HybridSearch": "search", "Query": "query"}
MSG_TYPES = {"Insert": "insert", "Upsert": "upsert", "Delete": "delete"}
#: the REST v2 endpoints that are MilvusService functions, by Milvus's function name
REST_FUNCTIONS = {
    "entities/insert": "Insert",
    "entities/upsert": "Upsert",
    "entities/delete": "Delete",
    "entities/search": "Search",
    "entities/query": "Query",
    "entities/get": "Query",
    "collections/create": "CreateCollection",
    "collections/drop": "DropCollection",
    "collections/describe": "DescribeCollection",
    "collections/has": "HasCollection",
    "collections/list": "ShowCollections",
    "collections/load": "LoadCollection",
    "collections/release": "ReleaseCollection",
    "collections/get_stats": "GetCollectionStatistics",
    "collections/flush": "Flush",
    "collections/rename": "RenameCollection",
    "collections/get_load_state": "GetLoadState",
    "indexes/create": "CreateIndex",
    "indexes/drop": "DropIndex",
    "indexes/describe": "DescribeIndex",
    "partitions/create": "CreatePartition",
    "partitions/drop": "DropPartition",
    "partitions/list": "ShowPartitions",
}


class UntypedCounter(Collector):
    """A counter exposed under exactly `name` (as Milvus's Go client does), as an untyped
    metric; thread-safe."""

    def __init__(self, name: str, doc: str, labels: tuple[str, ...]) -> None:
        self.name, self.doc, self.labels = name, doc, labels
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, values: tuple[str, ...], amount: float = 1.0) -> None:
        """Adds `amount` to the sample with label values `values`."""
        with self._lock:
            self._values[values] = self._values.get(values, 0.0) + amount

    def inc_each(self, each: tuple[tuple[str, ...], ...]) -> None:
        """Adds 1 to each sample of label values in `each` (under one hold of the lock)."""
        with self._lock:
            for values in each:
                self._values[values] = self._values.get(values, 0.0) + 1.0

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.doc, "unknown")
        with self._lock:
            for values, total in sorted(self._values.items()):
                family.add_sample(self.name, dict(zip(self.labels, values, strict=True)), total)
        yield family


class ProxyMetrics:
    """Milvus's proxy metrics in `registry`: milvus_proxy_req_count{node_id, function_name,
    status}, milvus_proxy_req_latency{node_id, function_name}, milvus_proxy_sq_latency
    {node_id, query_type}, milvus_proxy_mutation_latency{node_id, msg_type},
    milvus_proxy_search_vectors_count{node_id} and milvus_proxy_insert_vectors_count{node_id}."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = UntypedCounter(
            "milvus_proxy_req_count",
            "count of operation executed",
            ("node_id", "function_name", "status"),
        )
        self.searched = UntypedCounter(
            "milvus_proxy_search_vectors_count",
            "counter of vectors successfully searched",
            ("node_id",),
        )
        self.inserted = UntypedCounter(
            "milvus_proxy_insert_vectors_count",
            "counter of vectors successfully inserted",
            ("node_id",),
        )
        for counter in (self.requests, self.searched, self.inserted):
            registry.register(counter)
        self.latency = _histogram(
            registry, "req_latency", "latency of each request", "function_name"
        )
        self.sq = _histogram(
            registry, "sq_latency", "latency of search or query successfully", "query_type"
        )
        self.mutation = _histogram(
            registry, "mutation_latency", "latency of insert or delete successfully", "msg_type"
        )
        self._functions: dict[str, FunctionMetrics] = {}

    def function(self, name: str) -> FunctionMetrics:
        """Returns the metrics of MilvusService function `name` (made once per name: the
        callers' names are MilvusService's and REST's, a bounded set)."""
        made = self._functions.get(name)
        if made is None:
            made = self._functions[name] = FunctionMetrics(self, name)
        return made

    def observe(self, function: str, ok: bool, seconds: float, vectors: int = 0) -> None:
        """Counts one call of MilvusService `function` (ok: answered with code 0) that took
        `seconds`, carrying `vectors` search or insert vectors."""
        self.function(function).observe(ok, seconds, vectors)


class FunctionMetrics:
    """ProxyMetrics of one function, its label values and children looked up once (a series
    appears at its first sample, as when each call looked it up)."""

    def __init__(self, proxy: ProxyMetrics, name: str) -> None:
        self.proxy, self.name = proxy, name
        self._total, self._success = (NODE_ID, name, TOTAL), (NODE_ID, name, SUCCESS)
        self._fail = (NODE_ID, name, FAIL)
        self._latency = proxy.latency.labels(NODE_ID, name)
        self._ok: tuple[Any, Any, UntypedCounter | None] | None = None

    def observe(self, ok: bool, seconds: float, vectors: int = 0) -> None:
        """Counts one call (ok: answered with code 0) that took `seconds`, carrying
        `vectors` search or insert vectors."""
        ms = seconds * 1000
        self.proxy.requests.inc_each((self._total, self._success if ok else self._fail))
        self._latency.observe(ms)
        if not ok:
            return
        if self._ok is None:
            self._ok = self._ok_metrics()
        sq, mutation, vector_count = self._ok
        if sq is not None:
            sq.observe(ms)
        if mutation is not None:
            mutation.observe(ms)
        if vector_count is not None and vectors:
            vector_count.inc((NODE_ID,), vectors)

    def _ok_metrics(self) -> tuple[Any, Any, UntypedCounter | None]:
        """Returns the (sq latency, mutation latency, vector counter) children a successful
        call of this function records into (None: not of this function)."""
        proxy, name = self.proxy, self.name
        sq = proxy.sq.labels(NODE_ID, QUERY_TYPES[name]) if name in QUERY_TYPES else None
        mutation = proxy.mutation.labels(NODE_ID, MSG_TYPES[name]) if name in MSG_TYPES else None
        vector_count = None
        if name in ("Search", "HybridSearch"):
            vector_count = proxy.searched
        elif name in ("Insert", "Upsert"):
            vector_count = proxy.inserted
        return sq, mutation, vector_count


def _histogram(registry: CollectorRegistry, name: str, doc: str, label: str) -> Histogram:
    return Histogram(
        f"milvus_proxy_{name}", doc, ["node_id", label], registry=registry, buckets=BUCKETS_MS
    )


def grpc_vectors(function: str, request: Any) -> int:
    """Returns the vectors a gRPC request carries: an insert's or upsert's rows, a search's
    nq (0 for other calls)."""
    if function in ("Insert", "Upsert"):
        return int(getattr(request, "num_rows", 0))
    if function == "Search":
        return int(getattr(request, "nq", 0))
    return 0


def rest_vectors(function: str, body: Any) -> int:
    """Returns the vectors a REST v2 body carries: the rows of an insert or upsert, the
    query vectors of a search."""
    if function not in ("Insert", "Upsert", "Search") or not isinstance(body, dict):
        return 0
    data = body.get("data")
    return len(data) if isinstance(data, list) else 0


def datacoord_families(client: Any) -> Iterator[GaugeMetricFamily]:
    """Yields milvus_datacoord_collection_num, milvus_datacoord_segment_num{segment_state,
    segment_level} and milvus_datacoord_stored_rows_num{db_name, collection_id,
    collection_name, segment_state} as of now, over every database (a collection or
    database dropped meanwhile is skipped)."""
    states: Counter[str] = Counter()
    rows: Counter[tuple[str, str, str, str]] = Counter()
    collections = 0
    for db, names in _collections(client):
        collections += len(names)
        for name in names:
            with contextlib.suppress(VectorlogError):
                for s in client.in_database(db).list_segments(name):
                    states[s["state"]] += 1
                    rows[(db, str(s["collection_id"]), name, s["state"])] += s["num_rows"]
    yield GaugeMetricFamily("milvus_datacoord_collection_num", "number of collections", collections)
    segments = GaugeMetricFamily(
        "milvus_datacoord_segment_num",
        "number of segments",
        labels=["segment_state", "segment_level"],
    )
    for state, count in sorted(states.items()):
        segments.add_metric([state, "L1"], count)
    yield segments
    stored = GaugeMetricFamily(
        "milvus_datacoord_stored_rows_num",
        "number of stored rows of healthy segment",
        labels=["db_name", "collection_id", "collection_name", "segment_state"],
    )
    for (db, cid, name, state), count in sorted(rows.items()):
        stored.add_metric([db, cid, name, state], count)
    yield stored


def _collections(client: Any) -> list[tuple[str, list[str]]]:
    """Returns (database, its collections' names) of every database."""
    out = []
    with contextlib.suppress(VectorlogError):
        for db in client.list_databases():
            with contextlib.suppress(VectorlogError):
                out.append((db, client.in_database(db).list_collections()))
    return out
