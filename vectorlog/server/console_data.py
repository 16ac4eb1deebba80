"""What the web console shows, as JSON-ready dicts, read through the server's Client and the
state /metrics already keeps (log ends, consumer positions, the dead-letter index): the
collections with schema, indexes and rows; a collection's segments; consumer positions and
lag; dead letters by page; the server's health; a query or search from the console."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import orjson

from vectorlog.core.errors import CollectionNotFound, InvalidArgument
from vectorlog.core.model import DataType
from vectorlog.core.types import LEVEL_CODES
from vectorlog.sdk.client import Client
from vectorlog.server.rest_metrics import Metrics, consumer_positions, log_ends

#: the most hits or rows one console search returns (Milvus's topk limit)
MAX_LIMIT = 16384
#: the most dead letters one page shows
MAX_PAGE = 500
#: field types holding vectors (not shown among a hit's fields)
VECTOR_TYPES = frozenset(d.name for d in DataType if d.name.endswith("VECTOR"))
LEVEL_NAMES = {code: name for name, code in LEVEL_CODES.items()}
STARTED = time.time()


def collections(client: Client) -> list[dict[str, Any]]:
    """Returns each collection's {name, id, description, shards, partitions, aliases,
    consistency_level, rows (visible now), fields, indexes (describe_index's)}; a
    collection dropped while it is read is left out. Raises VectorlogError."""
    out = []
    for name in client.list_collections():
        with contextlib.suppress(CollectionNotFound):
            out.append(_collection(client, name))
    return out


def _collection(client: Client, name: str) -> dict[str, Any]:
    d = client.describe_collection(name)
    return {
        "name": name,
        "id": d["collection_id"],
        "description": d["description"],
        "shards": d["num_shards"],
        "partitions": d["partitions"],
        "aliases": d["aliases"],
        "consistency_level": LEVEL_NAMES.get(d["consistency_level"], d["consistency_level"]),
        "rows": client.get_collection_stats(name)["row_count"],
        "fields": d["fields"],
        "indexes": [client.describe_index(name, ix) for ix in client.list_indexes(name)],
    }


def segments(client: Client, name: str) -> list[dict[str, Any]]:
    """Returns the collection's segments but the Dropped ones, by id: {segment_id,
    partition_id, insert_channel, state, num_rows, max_row_num, binlog_bytes}. Raises
    CollectionNotFound."""
    keys = ("segment_id", "partition_id", "insert_channel", "state", "num_rows", "max_row_num")
    empty = {"insert": 0, "delta": 0, "stats": 0}
    return [
        {**{k: s[k] for k in keys}, "binlog_bytes": s.get("binlog_bytes", empty)}
        for s in client.list_segments(name)
    ]


def consumers(client: Client) -> list[dict[str, Any]]:
    """Returns consumer_positions of the processors this server runs (none on a proxy
    process: the other processes serve their own /metrics). Raises nothing."""
    return consumer_positions(client.cluster, log_ends(client.cluster))


def dead_letters(metrics: Metrics, offset: int, limit: int) -> dict[str, Any]:
    """Returns {"total", "offset", "letters"}: a page of the dead letters, newest first, as
    /metrics's count knows them (read again at most every few seconds). Raises
    InvalidArgument for a negative offset or a limit outside 1..MAX_PAGE."""
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"offset must be >= 0 and limit in 1..{MAX_PAGE}")
    total, letters = metrics.cluster.dead_letters.page(offset, limit)
    return {"total": total, "offset": offset, "letters": letters}


def health(client: Client, metrics: Metrics, version: str) -> dict[str, Any]:
    """Returns {status, version, backend, uptime_s, collections, dead_letters, log_ends:
    [{topic, partition, end}]}. Raises VectorlogError if the cluster cannot list its
    collections."""
    ends = log_ends(client.cluster)
    return {
        "status": "ok",
        "version": version,
        "backend": "kafka" if client.cfg.is_kafka else "embedded",
        "uptime_s": round(time.time() - STARTED, 1),
        "collections": len(client.list_collections()),
        "dead_letters": metrics.cluster.dead_letters.count(),
        "log_ends": [{"topic": t, "partition": p, "end": e} for (t, p), e in sorted(ends.items())],
    }


def search(client: Client, body: Any) -> dict[str, Any]:
    """Runs the console's search: body {collection, filter, limit, vector (a JSON array, or
    its text; empty for a query), anns_field}. Returns {"kind": "search"|"query", "rows":
    [...]}: hits {id, distance, entity} or rows, with the collection's scalar fields and
    dynamic keys.
    Raises InvalidArgument naming the bad part, or what Client.search / query raise."""
    if not isinstance(body, dict) or not isinstance(body.get("collection"), str):
        raise InvalidArgument("the search needs a collection name")
    name, expr = body["collection"], body.get("filter") or ""
    if not isinstance(expr, str):
        raise InvalidArgument("filter must be a string")
    limit = _limit(body.get("limit", 10))
    described = client.describe_collection(name)
    scalars = [f["name"] for f in described["fields"] if _type(f) not in VECTOR_TYPES]
    if described["enable_dynamic_field"]:
        scalars.append("$meta")  # the dynamic keys, flattened into each row (as Milvus)
    vector = _vector(body.get("vector"))
    if vector is None:
        rows = client.query(name, expr, output_fields=scalars, limit=limit)
        return {"kind": "query", "rows": rows}
    anns = body.get("anns_field") or None
    hits = client.search(name, [vector], expr, limit, scalars, anns_field=anns)
    return {"kind": "search", "rows": [dict(h) for h in hits[0]]}


def _type(field: dict[str, Any]) -> str:
    """Returns a described field's type name ("FLOAT_VECTOR")."""
    return str(getattr(field["type"], "name", field["type"]))


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidArgument(f"top-k must be an integer in 1..{MAX_LIMIT}, got {value!r}")
    return value


def _vector(value: Any) -> list[float] | None:
    """Returns the query vector of `value` (a list of numbers, or JSON text of one), None
    for an empty one. Raises InvalidArgument for anything else."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise InvalidArgument("the vector is not JSON: paste an array of numbers") from None
    ok = isinstance(value, list) and value
    if not ok or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        raise InvalidArgument("the vector must be a non-empty JSON array of numbers")
    return [float(x) for x in value]
