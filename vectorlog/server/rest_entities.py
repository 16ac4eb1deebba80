"""REST v2 handlers of entities (insert, upsert, delete, get, query, search, hybrid_search):
typed request fields to Client calls; rows and hits returned as JSON-safe objects."""

from __future__ import annotations

from typing import Any

from vectorlog.core.hybrid import AnnSearchRequest
from vectorlog.sdk.client import Client
from vectorlog.server.rest_collections import NAME, Handler
from vectorlog.server.rest_convert import Field, jsonable, parse
from vectorlog.server.rest_errors import bad_format
from vectorlog.server.rest_vectors import insert_rows, search_data

WRITE = {**NAME, "data": Field("list", required=True), "partitionName": Field("str")}
READ = {
    **NAME,
    "outputFields": Field("list"),
    "partitionNames": Field("list"),
    "consistencyLevel": Field("str"),  # None: the collection's
}


def _rows(data: list[Any]) -> list[dict[str, Any]]:
    """Returns `data` if every row is an object. Raises RequestError (1801)."""
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise bad_format(f"data[{i}] must be an object (one row), not {type(row).__name__}")
    return data


def insert(c: Client, body: Any) -> Any:
    args = parse(body, WRITE)
    name = args["collectionName"]
    res = c.insert(name, insert_rows(c, name, _rows(args["data"])), args["partitionName"])
    return {"insertCount": res["insert_count"], "insertIds": jsonable(res["ids"])}


def upsert(c: Client, body: Any) -> Any:
    args = parse(body, WRITE)
    name = args["collectionName"]
    res = c.upsert(name, insert_rows(c, name, _rows(args["data"])), args["partitionName"])
    return {"upsertCount": res["upsert_count"], "upsertIds": jsonable(res["ids"])}


def delete(c: Client, body: Any) -> Any:
    """Deletes by `filter` (Milvus REST v2), returns {"deleteCount"} (an addition)."""
    args = parse(
        body, {**NAME, "filter": Field("str", required=True), "partitionName": Field("str")}
    )
    res = c.delete(
        args["collectionName"], filter=args["filter"], partition_name=args["partitionName"]
    )
    return {"deleteCount": res["delete_count"]}


def get(c: Client, body: Any) -> Any:
    args = parse(body, {**READ, "id": Field("ids", required=True)})
    ids = args["id"] if isinstance(args["id"], list) else [args["id"]]
    rows = c.get(
        args["collectionName"],
        ids,
        args["outputFields"],
        consistency_level=args["consistencyLevel"],
    )
    return jsonable(rows)


QUERY = {
    **READ,
    "filter": Field("str", default=""),
    "limit": Field("int"),
    "offset": Field("int", default=0),
}


def query(c: Client, body: Any) -> Any:
    args = parse(body, QUERY)
    rows = c.query(
        args["collectionName"],
        args["filter"],
        args["outputFields"],
        partition_names=args["partitionNames"],
        limit=args["limit"],
        offset=args["offset"],
        consistency_level=args["consistencyLevel"],
    )
    return jsonable(rows)


SEARCH = {
    **READ,
    "data": Field("list", required=True),
    "annsField": Field("str"),
    "filter": Field("str", default=""),
    "limit": Field("int", default=100),
    "offset": Field("int", default=0),
    "searchParams": Field("dict", default={}),
    "groupingField": Field("str"),
    "groupSize": Field("int"),
    "strictGroupSize": Field("bool", default=False),
}


def _search_params(given: dict[str, Any]) -> dict[str, Any]:
    """Returns REST searchParams ({metricType, params, ...}) as a search's search_params."""
    sp = dict(given)
    params = {"params": sp.pop("params", {}) or {}}
    metric = sp.pop("metricType", None) or sp.pop("metric_type", None)
    if metric is not None:
        params["metric_type"] = metric
    params["params"] = {**sp, **params["params"]}
    return params


def search(c: Client, body: Any) -> Any:
    """Returns the hits of every query vector in one list, each the hit's output fields,
    its primary key under the primary field's name and its `distance` (as Milvus)."""
    args = parse(body, SEARCH)
    name = args["collectionName"]
    params = _search_params(args["searchParams"])
    hits = c.search(
        name,
        search_data(c, name, args["annsField"], args["data"]),
        args["filter"],
        args["limit"],
        args["outputFields"],
        params,
        partition_names=args["partitionNames"],
        anns_field=args["annsField"],
        consistency_level=args["consistencyLevel"],
        offset=args["offset"],
        group_by_field=args["groupingField"],
        group_size=args["groupSize"],
        strict_group_size=args["strictGroupSize"],
    )
    return _hits(c, name, hits)


def _hits(c: Client, name: str, hits: list[list[Any]]) -> Any:
    pk = next(f["name"] for f in c.describe_collection(name)["fields"] if f.get("is_primary"))
    return [
        jsonable({**h["entity"], pk: h["id"], "distance": h["distance"]}) for q in hits for h in q
    ]


#: one ANN search of a hybrid search (Milvus REST v2's SubSearchReq)
SUB_SEARCH = {
    "data": Field("list", required=True),
    "annsField": Field("str"),
    "filter": Field("str", default=""),
    "limit": Field("int", default=100),
    "metricType": Field("str"),
    "params": Field("dict", default={}),
}
HYBRID = {
    **READ,
    "search": Field("list", required=True),
    "rerank": Field("dict", default={}),
    "limit": Field("int", default=100),
    "offset": Field("int", default=0),
}


def hybrid_search(c: Client, body: Any) -> Any:
    """Returns the fused hits of the `search` requests (ranked by `rerank` {strategy,
    params}), as `search` returns hits; `distance` is the fused score."""
    args = parse(body, HYBRID)
    reqs = []
    for i, sub in enumerate(args["search"]):
        s = parse(sub, SUB_SEARCH, f"search[{i}]")
        params = _search_params({"metricType": s["metricType"], "params": s["params"]})
        data = search_data(c, args["collectionName"], s["annsField"], s["data"])
        reqs.append(AnnSearchRequest(data, s["annsField"] or "", params, s["limit"], s["filter"]))
    hits = c.hybrid_search(
        args["collectionName"],
        reqs,
        args["rerank"],
        args["limit"],
        args["outputFields"],
        partition_names=args["partitionNames"],
        offset=args["offset"],
        consistency_level=args["consistencyLevel"],
    )
    return _hits(c, args["collectionName"], hits)


ROUTES: dict[str, Handler] = {
    "entities/insert": insert,
    "entities/upsert": upsert,
    "entities/delete": delete,
    "entities/get": get,
    "entities/query": query,
    "entities/search": search,
    "entities/hybrid_search": hybrid_search,
}
