"""REST v2 token auth (both backends): without or with a wrong `Authorization: Bearer`
token a call is refused with merr 1800 (HTTP 401) and does nothing; the right one passes."""

from __future__ import annotations

from tests.vectorlog.server.rest_support import Rest, rest_fixture, unique

TOKEN = "root:Milvus"
rest = rest_fixture(token=TOKEN)


def test_refused_without_the_token(rest: Rest) -> None:
    name = unique("auth")
    body = {"collectionName": name, "dimension": 2}
    for headers in ({}, {"Authorization": "Bearer root:wrong"}, {"Authorization": TOKEN}):
        response = rest.http.post("/v2/vectordb/collections/create", json=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["code"] == 1800
    assert not rest.client.has_collection(name)
    good = {"Authorization": f"Bearer {TOKEN}"}
    response = rest.http.post("/v2/vectordb/collections/create", json=body, headers=good)
    assert response.json() == {"code": 0, "cost": 0, "data": {}}
    assert rest.client.has_collection(name)
