"""The console's JSON (GET /console/api/*, POST /console/api/search) on both backends,
without a browser: every endpoint refuses a call without the token and serves nothing
but its own files; each answers with what the cluster holds; bad arguments are refused
with a message naming them (400), an unknown collection with 404."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support import log_params
from tests.vectorlog.server.cluster import cluster_client
from vectorlog import Client
from vectorlog.server.rest_app import rest_app

TOKEN = "k3y"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PAGES = ("collections", "segments?collection=c", "consumers", "dead-letters", "health")


@pytest.fixture(scope="module", params=log_params())
def console(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Client, TestClient]]:
    client = cluster_client(request, tmp_path_factory, "console-api")
    client.create_collection("c", dimension=2, metric_type="L2")
    client.insert("c", [{"id": i, "vector": [float(i), 0.0], "tag": f"n{i}"} for i in range(8)])
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
