"""REST v2 bad input (both backends): bad JSON, unknown fields, wrong types, missing fields,
bad rows and unknown endpoints get a Milvus error envelope, never a 500, and write nothing."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique
from vectorlog.server.rest_app import rest_app

rest = rest_fixture()

FORMAT, MISSING, INVALID = 1801, 1802, 1100
#: a valid schema's fields (a case spoils one other part of the request)
FIELDS = [
    {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
    {"fieldName": "v", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
]


@pytest.fixture
def existing(rest: Rest) -> str:
    """A quick-setup collection of dimension 2 with one row (id 1)."""
    name = unique("bad")
    rest.ok("collections/create", collectionName=name, dimension=2, consistencyLevel="Strong")
    rest.ok("entities/insert", collectionName=name, data=[{"id": 1, "vector": [1.0, 0.0]}])
    return name


def _raw(rest: Rest, endpoint: str, content: bytes) -> dict[str, Any]:
    response = rest.http.post(f"/v2/vectordb/{endpoint}", content=content)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize(
    "content",
    [
        b"{nope",
        b"[1, 2]",
        b'"text"',
        b"\xff\xfe",
        b'{"collectionName": NaN}',
        b'{"data": [{"id": 5, "vector": [1e999, 0.0]}]}',
        b'{"data": [{"id": 5, "vector": [0.0, 0.0], "m": {"k": -1' + b"0" * 400 + b".5}}]}",
    ],
    ids=[
        "broken",
        "array",
        "string",
        "not-utf8",
        "nan",
        "infinity",
        "long-infinity",
    ],
)
def test_malformed_bodies_are_1801(rest: Rest, existing: str, content: bytes) -> None:
    body = _raw(rest, "entities/insert", content)
    assert body["code"] == FORMAT and body["message"]
    assert rest.ok("collections/get_stats", collectionName=existing) == {"rowCount": 1}


@pytest.mark.parametrize("doc", ['{"k": ["\\udc00"]}', '{"\\udc00": 1}', '"\\ud800"'])
def test_json_holding_a_lone_surrogate_is_1801_and_writes_nothing(
    rest: Rest, existing: str, doc: str
) -> None:
    row = f'{{"id": 5, "vector": [0.0, 0.0], "m": {doc}}}'
    body = _raw(
        rest, "entities/insert", f'{{"collectionName": "{existing}", "data": [{row}]}}'.encode()
    )
    assert body["code"] == FORMAT and "surrogate" in body["message"], body
    assert rest.ok("collections/get_stats", collectionName=existing) == {"rowCount": 1}


def test_create_refusals_create_nothing(rest: Rest) -> None:
    name = unique("nocreate")
    cases: list[tuple[dict[str, Any], int]] = [
        ({"collectionName": name, "dimension": "2"}, FORMAT),
        ({"collectionName": name, "dimension": True}, FORMAT),
        ({"collectionName": name, "dimension": 2, "metric": "L2"}, FORMAT),
        ({"collectionName": name}, FORMAT),
        ({"dimension": 2}, MISSING),
        ({"collectionName": name, "dimension": 2, "metricType": "HAMMING"}, INVALID),
        ({"collectionName": name, "dimension": 2, "idType": "Float"}, FORMAT),
        ({"collectionName": name, "schema": {"fields": "x"}}, FORMAT),
        ({"collectionName": name, "schema": {"fields": [{"fieldName": "a"}]}}, MISSING),
        (
            {"collectionName": name, "schema": {"fields": [{"fieldName": "a", "dataType": "X"}]}},
            FORMAT,
        ),
        ({"collectionName": name, "dbName": "other", "dimension": 2}, 800),  # database not found
        ({"collectionName": name, "dimension": 2, "params": {"partitionsNum": 4}}, FORMAT),
        ({"collectionName": name, "dimension": 2, "schema": {"fields": []}}, FORMAT),
        ({"collectionName": name, "schema": {"description": 5, "fields": FIELDS}}, FORMAT),
        ({"collectionName": name, "dimension": 2, "params": {"enableDynamicField": 1}}, FORMAT),
    ]
    for body, code in cases:
        assert rest.call("collections/create", **body)["code"] == code, body
    assert rest.ok("collections/has", collectionName=name) == {"has": False}


def test_bad_index_refused_with_the_collection(rest: Rest) -> None:
    """A full create whose index is bad creates neither the collection nor the index."""
    name = unique("badix")
    schema = {
        "fields": [
            {"fieldName": "id", "dataType": "Int64", "isPrimary": True},
            {"fieldName": "v", "dataType": "FloatVector", "elementTypeParams": {"dim": 2}},
        ]
    }
    index = {"fieldName": "v", "indexType": "IVF_FLAT", "params": {"nlist": -1}}
    body = rest.call("collections/create", collectionName=name, schema=schema, indexParams=[index])
    assert body["code"] == INVALID
    assert rest.ok("collections/has", collectionName=name) == {"has": False}


def test_bad_rows_write_nothing(rest: Rest, existing: str) -> None:
    cases: list[tuple[Any, int]] = [
        ([1, 2], FORMAT),
        ({"id": 2}, FORMAT),
        ([{"id": 2, "vector": [1.0]}], INVALID),
        ([{"id": 2, "vector": [1.0, 0.0]}, {"id": "x", "vector": [1.0, 0.0]}], INVALID),
        ([{"id": 2}], INVALID),
    ]
    for data, code in cases:
        for endpoint in ("entities/insert", "entities/upsert"):
            body = rest.call(endpoint, collectionName=existing, data=data)
            assert body["code"] == code, (endpoint, data, body)
    assert rest.ok("collections/get_stats", collectionName=existing) == {"rowCount": 1}
    assert rest.ok("entities/get", collectionName=existing, id=[2]) == []


def test_bad_reads_and_deletes(rest: Rest, existing: str) -> None:
    assert rest.call("entities/search", collectionName=existing, data=[[1]])["code"] == INVALID
    assert (
        rest.call("entities/search", collectionName=existing, data=[[1, 0]], limit=-1)["code"]
        == FORMAT
    )
    assert rest.call("entities/query", collectionName=existing, filter="id >")["code"] != 0
    assert rest.call("entities/get", collectionName=existing, id={"a": 1})["code"] == FORMAT
    assert rest.call("entities/delete", collectionName=existing)["code"] == MISSING
    assert rest.call("entities/delete", collectionName=existing, filter="id in [")["code"] != 0
    assert rest.ok("collections/get_stats", collectionName=existing) == {"rowCount": 1}


def test_not_found_codes(rest: Rest) -> None:
    missing = unique("missing")
    assert rest.call("collections/describe", collectionName=missing)["code"] == 100
    assert rest.call("entities/insert", collectionName=missing, data=[{"id": 1}])["code"] == 100
    assert rest.call("collections/has", collectionName=missing)["code"] == 0


def test_unknown_endpoints_and_methods_get_envelopes(rest: Rest) -> None:
    for path in ("/v2/vectordb/collections/frobnicate", "/v2/nothing", "/v2/vectordb/a/b/c"):
        response = rest.http.post(path, json={})
        assert response.status_code == 404 and response.json()["code"] == 404, path
    response = rest.http.get("/v2/vectordb/collections/list")
    assert response.status_code == 405 and response.json()["code"] == FORMAT


def test_health_and_metrics(rest: Rest, existing: str) -> None:
    assert rest.http.get("/healthz").json() == {"status": "ok"}
    assert rest.http.get("/health").status_code == 200
    rest.ok("collections/list")
    text = rest.http.get("/metrics").text
    assert 'vectorlog_rest_requests_total{code="0",endpoint="collections/list"}' in text
    assert 'vectorlog_rest_request_seconds_count{endpoint="collections/list"}' in text
    assert "vectorlog_dead_letters 0.0" in text
    dml = f'vectorlog_log_end_offset{{partition="0",topic="{rest.client.cfg.cluster}.dml"}}'
    assert dml in text
    assert 'vectorlog_segments{state="Growing"}' in text  # the fixture's rows


def test_oversized_body_refused_while_read(rest: Rest, existing: str) -> None:
    """A body over the app's limit is refused (1801) and nothing of it is written."""
    rows = [{"id": 100 + i, "vector": [1.0, 0.0]} for i in range(50)]
    with TestClient(rest_app(rest.client, max_body_bytes=512)) as small:
        body = {"collectionName": existing, "data": rows}
        response = small.post("/v2/vectordb/entities/insert", json=body)
        assert response.json()["code"] == FORMAT and "larger" in response.json()["message"]
        few = {"collectionName": existing, "data": rows[:1]}
        assert small.post("/v2/vectordb/entities/insert", json=few).json()["code"] == 0
    assert rest.ok("collections/get_stats", collectionName=existing) == {"rowCount": 2}
