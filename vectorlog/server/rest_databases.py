"""REST v2 handlers of databases (/v2/vectordb/databases/*): create, drop, list, describe,
alter and drop_properties over the Client's database calls; `dbName` is their argument.
Every other endpoint addresses the database its body's `dbName` names (rest_app)."""

from __future__ import annotations

from typing import Any

from vectorlog.core.hybridts import physical_ms
from vectorlog.sdk.client import Client
from vectorlog.server.rest_collections import Handler
from vectorlog.server.rest_convert import Field, parse

DB = {"dbName": Field("str", required=True)}


def _db(body: Any, **extra: Field) -> dict[str, Any]:
    """Returns the body's fields: `dbName` (required) and `extra`."""
    return parse(body, {}, database_argument={**DB, **extra})


def create_database(c: Client, body: Any) -> Any:
    args = _db(body, properties=Field("dict", default={}))
    c.create_database(args["dbName"], args["properties"])


def drop_database(c: Client, body: Any) -> Any:
    c.drop_database(_db(body)["dbName"])


def list_databases(c: Client, body: Any) -> Any:
    parse(body, {})
    return c.list_databases()


def describe_database(c: Client, body: Any) -> Any:
    """Returns {dbName, dbID, createdTimestamp, properties: [{key, value}]}."""
    d = c.database_info(_db(body)["dbName"])
    return {
        "dbName": d["name"],
        "dbID": d["db_id"],
        "createdTimestamp": physical_ms(d["created_ts"]),
        "properties": [{"key": k, "value": v} for k, v in d["properties"].items()],
    }


def alter_database(c: Client, body: Any) -> Any:
    args = _db(body, properties=Field("dict", required=True))
    c.alter_database_properties(args["dbName"], args["properties"])


def drop_properties(c: Client, body: Any) -> Any:
    args = _db(body, propertyKeys=Field("list", required=True))
    c.drop_database_properties(args["dbName"], args["propertyKeys"])


ROUTES: dict[str, Handler] = {
    "databases/create": create_database,
    "databases/drop": drop_database,
    "databases/list": list_databases,
    "databases/describe": describe_database,
    "databases/alter": alter_database,
    "databases/drop_properties": drop_properties,
}
