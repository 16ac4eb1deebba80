"""Milvus's metric names on /metrics (both backends), as Milvus's Grafana dashboards query
them: milvus_proxy_req_count by function and status under its exact name (no `_total`),
request, search and mutation latency histograms, inserted and searched vector counts over
gRPC (pymilvus) and REST v2, datacoord's collection, segment and stored-row gauges; the
process metrics; and every metric the shipped Grafana dashboard queries exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pymilvus import MilvusException

from tests.vectorlog.server.rest_support import unique
from tests.vectorlog.server.test_metrics import DIM, Metered, metered, scrape

__all__ = ["metered"]  # the module-scoped served cluster of test_metrics

DASHBOARD = Path(__file__).parents[3] / "docs" / "grafana" / "vectorlog-dashboard.json"
NODE = ("node_id", "1")


def req_count(samples: dict, function: str, status: str) -> float:
    labels = (("function_name", function), NODE, ("status", status))
    return float(samples.get(("milvus_proxy_req_count", labels), 0.0))


def counter(samples: dict, name: str) -> float:
    return float(samples.get((name, (NODE,)), 0.0))


def test_proxy_requests_latencies_and_vectors_under_milvus_names(metered: Metered) -> None:
    name = unique("mv")
    before = scrape(metered.http)
    metered.milvus.create_collection(name, dimension=DIM)
    rows = [{"id": i, "vector": [float(i), 0.0, 0.0, 1.0]} for i in range(5)]
    metered.milvus.insert(name, rows)
    metered.milvus.search(name, [[1.0, 0, 0, 0], [0, 1.0, 0, 0]], limit=2)
    metered.milvus.query(name, "id >= 0", output_fields=["id"])
    with pytest.raises(MilvusException):
        metered.milvus.describe_collection(unique("absent"))
    upserts = [{"id": i, "vector": [0.0, 0, 1.0, 0]} for i in (7, 8, 9)]
    body = {"collectionName": name, "data": upserts}
    assert metered.http.post("/v2/vectordb/entities/upsert", json=body).json()["code"] == 0
    after = scrape(metered.http)

    def grew(function: str, status: str) -> float:
        return req_count(after, function, status) - req_count(before, function, status)

    assert grew("Insert", "success") == grew("Insert", "total") == 1
    assert grew("Search", "success") == 1 and grew("Query", "success") == 1
    assert grew("DescribeCollection", "fail") == 1
    assert grew("Upsert", "success") == 1  # the REST call, under the same function name
    inserted = "milvus_proxy_insert_vectors_count"
    assert counter(after, inserted) - counter(before, inserted) == 5 + 3
    searched = "milvus_proxy_search_vectors_count"
    assert counter(after, searched) - counter(before, searched) == 2
    search = ("milvus_proxy_sq_latency_count", (NODE, ("query_type", "search")))
    assert after[search] - before.get(search, 0.0) == 1
    insert = ("milvus_proxy_mutation_latency_count", (("msg_type", "insert"), NODE))
    assert after[insert] - before.get(insert, 0.0) == 1
    latency = (
        "milvus_proxy_req_latency_bucket",
        (("function_name", "Insert"), ("le", "1.0"), NODE),
    )
    assert latency in after  # Milvus's buckets, in ms


def test_counters_keep_milvus_exact_names_and_process_metrics_are_there(
    metered: Metered,
) -> None:
    metered.milvus.list_collections()
    text = metered.http.get("/metrics").text
    assert re.search(r"^milvus_proxy_req_count\{", text, re.M)
    assert "milvus_proxy_req_count_total" not in text
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total", "python_info"):
        assert re.search(rf"^{name}[{{ ]", text, re.M), name


def test_datacoord_gauges(metered: Metered) -> None:
    name = unique("dc")
    metered.client.create_collection(name, dimension=DIM)
    metered.client.insert(name, [{"id": 1, "vector": [1.0, 0, 0, 0]}])
    metered.client.flush(name)
    samples = scrape(metered.http)
    assert samples[("milvus_datacoord_collection_num", ())] == len(
        metered.client.list_collections()
    )
    flushed = (
        "milvus_datacoord_segment_num",
        (("segment_level", "L1"), ("segment_state", "Flushed")),
    )
    assert samples[flushed] >= 1
    cid = str(metered.client.describe_collection(name)["collection_id"])
    labels = (
        ("collection_id", cid),
        ("collection_name", name),
        ("db_name", "default"),
        ("segment_state", "Flushed"),
    )
    assert samples[("milvus_datacoord_stored_rows_num", labels)] == 1


def test_every_metric_the_grafana_dashboard_queries_exists(metered: Metered) -> None:
    name = unique("dash")
    metered.milvus.create_collection(name, dimension=DIM)
    metered.milvus.insert(name, [{"id": 1, "vector": [1.0, 0, 0, 0]}])
    metered.milvus.search(name, [[1.0, 0, 0, 0]], limit=1)
    exposed = {sample for sample, _ in scrape(metered.http)}
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        for metric in re.findall(r"\b((?:milvus|vectorlog|process)_[a-z0-9_]+)", expr):
            assert metric in exposed, f"{metric} (in {expr!r}) is not on /metrics"
