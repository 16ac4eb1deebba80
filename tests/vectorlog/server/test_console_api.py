"""The console's JSON (GET /console/api/*, POST /console/api/search) on both backends,
without a browser: every endpoint refuses a call without the token and serves nothing
but its own files; each answers with what the cluster holds; bad arguments are refused
with a message naming them (400), an unknown collection with 404."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support import log_params, wait_until
from tests.vectorlog.server.cluster import SETTINGS, cluster_client
from vectorlog import Client
from vectorlog.server.rest_app import rest_app
from vectorlog.streams.log.base import start_offsets

TOKEN = "k3y"
#: the ts of the fixture's insert
inserted: list[int] = []
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PAGES = (
    "collections",
    "segments?collection=c",
    "consumers",
    "dead-letters",
    "health",
    "as-of?collection=c",
    "events",
    "jobs",
    "segment-history?collection=c",
)


@pytest.fixture(scope="module", params=log_params())
def console(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Client, TestClient]]:
    client = cluster_client(request, tmp_path_factory, "console-api")
    client.create_collection("c", dimension=2, metric_type="L2")
    rows = [{"id": i, "vector": [float(i), 0.0], "tag": f"n{i}"} for i in range(8)]
    inserted.append(client.insert("c", rows)["timestamp"])
    client.flush("c")
    try:
        yield client, TestClient(rest_app(client, TOKEN))
    finally:
        client.close()


def get(http: TestClient, page: str) -> Any:
    response = http.get(f"/console/api/{page}", headers=AUTH)
    assert response.status_code == 200, response.text
    return response.json()


def test_every_endpoint_needs_the_token(console: tuple[Client, TestClient]) -> None:
    _, http = console
    for page in PAGES:
        for headers in ({}, {"Authorization": "Bearer nope"}):
            refused = http.get(f"/console/api/{page}", headers=headers)
            assert refused.status_code == 401 and "error" in refused.json()
    assert http.post("/console/api/search", json={"collection": "c"}).status_code == 401
    html = http.get("/console")  # the page itself holds no data
    assert html.status_code == 200
    assert "script-src 'self'" in html.headers["content-security-policy"]
    assert http.get("/console/static/console.js").status_code == 200
    assert http.get("/console/static/index.html").status_code == 404
    assert http.get("/console/static/..%2Frest_app.py").status_code == 404


def test_the_pages_hold_what_the_cluster_holds(console: tuple[Client, TestClient]) -> None:
    client, http = console
    (listed,) = [c for c in get(http, "collections") if c["name"] == "c"]
    assert listed["rows"] == 8 and listed["consistency_level"] == "Strong"
    assert [f["name"] for f in listed["fields"]] == ["id", "vector"]
    assert [ix["field_name"] for ix in listed["indexes"]] == ["vector"]
    segments = get(http, "segments?collection=c")
    assert sum(s["num_rows"] for s in segments) == 8
    assert all(s["state"] == "Flushed" and s["binlog_bytes"]["insert"] > 0 for s in segments)
    positions = get(http, "consumers")
    assert {"datacoord", "querynode"} <= {p["processor"] for p in positions}
    assert all(p["lag"] == max(0, p["end"] - p["position"]) for p in positions)
    health = get(http, "health")
    assert health["status"] == "ok" and health["collections"] == len(client.list_collections())
    assert health["backend"] == ("kafka" if client.cfg.is_kafka else "embedded")
    assert get(http, "dead-letters") == {"total": 0, "offset": 0, "letters": []}


def test_a_search_and_a_query(console: tuple[Client, TestClient]) -> None:
    _, http = console
    body = {"collection": "c", "vector": "[2.9, 0]", "limit": 2, "filter": "id != 3"}
    hits = http.post("/console/api/search", json=body, headers=AUTH).json()
    assert hits["kind"] == "search" and [h["id"] for h in hits["rows"]] == [2, 4]
    assert hits["rows"][0]["entity"] == {"id": 2, "tag": "n2"}  # no vector
    query = {"collection": "c", "filter": "id in [5, 6]", "limit": 5}
    rows = http.post("/console/api/search", json=query, headers=AUTH).json()
    assert rows == {"kind": "query", "rows": [{"id": 5, "tag": "n5"}, {"id": 6, "tag": "n6"}]}


def test_the_collection_as_of_a_time(console: tuple[Client, TestClient]) -> None:
    client, http = console
    at = get(http, f"as-of?collection=c&ts={inserted[-1]}")
    assert at["exists"] and at["rows"] == 8 and at["partitions"] == ["_default"]
    assert at["ts"] == str(inserted[-1]) and [f["name"] for f in at["fields"]] == ["id", "vector"]
    assert {s["state"] for s in at["segments"]} == {"Growing"}
    assert [m["type"] for m in at["moments"]][:2] == ["CollectionCreated", "IndexCreated"]
    before = get(http, f"as-of?collection=c&ts={int(at['first']['ts']) - 1}")
    assert before["exists"] is False and "rows" not in before
    now = get(http, "as-of?collection=c")
    assert now.get("rows") == 8, {k: now.get(k) for k in ("exists", "rows_error", "ts")}
    assert sum(s["rows"] for s in now["segments"]) == 8
    assert {s["state"] for s in now["segments"]} == {"Flushed"}


def test_the_event_browser_reads_a_page_of_the_log(console: tuple[Client, TestClient]) -> None:
    client, http = console
    (channel,) = {s["insert_channel"] for s in client.list_segments("c")}
    partition = int(channel.split("_")[1])
    page = get(http, f"events?topic=dml&partition={partition}&collection=c&type=RowsInserted")
    (event,) = page["events"]
    assert (event["type"], event["collection"], event["ts"]) == (
        "RowsInserted",
        "c",
        str(inserted[-1]),
    )
    assert '"values":[0,1,2,3,4,5,6,7]' in event["preview"] and page["at_end"]
    one = get(http, f"events?topic=dml&partition={partition}&offset={event['offset']}&limit=1")
    assert [e["offset"] for e in one["events"]] == [event["offset"]]
    assert one["next_offset"] == event["offset"] + 1
    ddl = get(http, "events?topic=ddl&type=CollectionCreated")
    assert "c" in [e["collection"] for e in ddl["events"]]
    late = get(http, f"events?topic=ddl&type=CollectionCreated&from={inserted[-1] + 1}")
    assert "c" not in [e["collection"] for e in late["events"]]


def test_jobs_and_segment_states_over_time(console: tuple[Client, TestClient]) -> None:
    _, http = console
    (life,) = get(http, "segment-history?collection=c")
    assert list(life["states"]) == ["Growing", "Sealed", "Flushing", "Flushed"]
    assert life["rows"] == 8 and life["seal_reason"] == "flush"
    jobs = get(http, "jobs")
    (flush,) = [f for f in jobs["flushes"] if f["collection"] == "c"]
    assert (flush["state"], flush["progress"]) == ("Completed", 100)
    assert flush["ts"] == life["states"]["Sealed"]["ts"]
    (index,) = [i for i in jobs["indexes"] if i["collection"] == "c"]
    assert index["index_name"] == "vector" and index["total_rows"] == 8


@pytest.mark.parametrize(
    ("page", "status", "says"),
    [
        ("events?topic=x", 400, "topic must be one of"),
        ("events?type=Nope", 400, "unknown event type 'Nope'"),
        ("events?collection=zz", 400, "no collection 'zz'"),
        ("events?limit=0", 400, "limit must be in"),
        ("events?partition=99", 400, "no partition 99"),
        ("events?offset=-1", 400, "offset must be a non-negative integer"),
        ("events?from=yesterday", 400, "bad from time 'yesterday'"),
        ("as-of?collection=c&ts=abc", 400, "bad time 'abc'"),
        ("as-of?collection=nope", 404, "collection=nope"),
        ("segment-history?collection=nope", 404, "collection=nope"),
    ],
)
def test_bad_history_arguments_are_refused_naming_them(
    console: tuple[Client, TestClient], page: str, status: int, says: str
) -> None:
    _, http = console
    refused = http.get(f"/console/api/{page}", headers=AUTH)
    assert refused.status_code == status and says in refused.json()["error"], refused.text


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"collection": "c", "vector": "[1,"}, 400, "not JSON"),
        ({"collection": "c", "vector": "[true]"}, 400, "array of numbers"),
        ({"collection": "c", "vector": [1.0, 2.0], "limit": 0}, 400, "top-k"),
        ({"collection": "c", "filter": "id >", "limit": 1}, 400, "invalid filter"),
        ({"vector": [1.0, 2.0]}, 400, "collection name"),
        ({"collection": "nope", "filter": "id > 0", "limit": 1}, 404, "collection not found"),
    ],
)
def test_bad_searches_are_refused_naming_the_fault(
    console: tuple[Client, TestClient], body: dict[str, Any], status: int, says: str
) -> None:
    _, http = console
    refused = http.post("/console/api/search", json=body, headers=AUTH)
    assert refused.status_code == status and says in refused.json()["error"]


def test_bad_pages_are_refused(console: tuple[Client, TestClient]) -> None:
    _, http = console
    for page, status in (
        ("segments?collection=nope", 404),
        ("dead-letters?offset=-1", 400),
        ("dead-letters?limit=x", 400),
        ("dead-letters?limit=501", 400),
        ("nothing", 404),
    ):
        assert http.get(f"/console/api/{page}", headers=AUTH).status_code == status, page


def test_segment_states_survive_the_coord_topic_being_truncated(tmp_path: Path) -> None:
    """The embedded log folds the coord topic into a snapshot and deletes the records below
    it: the console reads the snapshot first, so a segment's history stays whole."""
    settings = {**SETTINGS, "snapshot_records": 1, "log_retention_check_s": 0.1}
    with Client(str(tmp_path / "db"), **settings) as client:
        client.create_collection("s", dimension=2, metric_type="L2")
        client.insert("s", [{"id": i, "vector": [float(i), 0.0]} for i in range(4)])
        client.flush("s")
        http = TestClient(rest_app(client, TOKEN))
        coord = client.cluster.topics.coord
        wait_until(lambda: start_offsets(client.cluster.log, coord)[0] > 0, 30, "a snapshot")
        (life,) = get(http, "segment-history?collection=s")
        assert list(life["states"]) == ["Growing", "Sealed", "Flushing", "Flushed"]
        assert life["rows"] == 4
        page = get(http, "events?topic=coord")
        assert page["start"] > 0 and page["offset"] == page["start"]
