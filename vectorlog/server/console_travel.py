"""The console's two views of the past: a collection as of any T (its schema, partitions and
indexes through describe_collection and collection_info as of T, its rows through a
count(*) query as of T, its segments from the coord topic's lifecycle events), and the event
browser, a page of one topic partition's events through the replay library. Hybrid
timestamps travel as strings: they do not fit a JavaScript number."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from vectorlog.core import hybridts
from vectorlog.core.errors import CollectionNotFound, InvalidArgument, VectorlogError
from vectorlog.jobs.replay import (
    TOPIC_KINDS,
    Filters,
    Replayed,
    ReplayError,
    event_types,
    page,
    parse_ts,
    to_json,
)
from vectorlog.sdk.client import Client
from vectorlog.server.console_history import History
from vectorlog.streams.log.base import start_offsets

#: the most events one page of the event browser shows, and records it reads for one page
MAX_EVENTS, SCAN = 200, 5000
#: pages asked again from the first kept offset when retention moved it during one
RETRIES = 3
#: an event's preview shows at most this many characters of its body as JSON
PREVIEW_CHARS = 600
EVENT_TYPES = frozenset(event_types())


def when(ts: int) -> str:
    """Returns the UTC time of a hybrid ts, ISO-8601 to the millisecond."""
    at = datetime.fromtimestamp(hybridts.physical_ms(ts) / 1000, UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stamp(ts: int) -> dict[str, str]:
    """Returns {"ts": the hybrid ts as a string, "time": its ISO time ("" for ts 0, which
    end markers carry)}."""
    return {"ts": str(ts), "time": when(ts) if ts else ""}


def parse_time(text: str, what: str, end: bool = False) -> int:
    """Returns the hybrid ts of `text` (a hybrid ts or an ISO-8601 time, UTC unless it names
    its zone); with `end`, an ISO time means the last ts of its millisecond (an upper bound
    shown to the millisecond includes the events of that millisecond). Raises
    InvalidArgument naming `what`."""
    try:
        ts = parse_ts(text)
    except ReplayError:
        raise InvalidArgument(f"bad {what} {text!r}: want a hybrid ts or ISO-8601") from None
    return ts | hybridts.LOGICAL_MASK if end and not text.strip().isdigit() else ts


def now_ts() -> int:
    """Returns the hybrid ts at the end of the current millisecond."""
    return hybridts.compose(hybridts.wall_ms(), hybridts.LOGICAL_MASK)


def as_of(client: Client, history: History, name: str, text: str) -> dict[str, Any]:
    """Returns collection `name` as of the time `text` (default now): {collection, exists,
    ts, time, first (its creation), last (now), moments (its DDL events), and if it existed
    then: id, fields, partitions, indexes, rows (or rows_error), segments}. Raises
    InvalidArgument for a bad time, CollectionNotFound for a name never created."""
    ts = parse_time(text, "time", end=True) if text else now_ts()
    with history.current():
        ids = history.collection_ids(name)
        if not ids:
            raise CollectionNotFound(name)
        first = min(history.ddl.created.get(i, ts) for i in ids)
        moments = sorted(
            (m for i in ids for m in history.ddl.moments.get(i, {}).values()), key=lambda m: m.ts
        )
        out: dict[str, Any] = {
            "collection": name,
            **stamp(ts),
            "first": stamp(first),
            "last": stamp(max(now_ts(), ts)),
            "moments": [{**stamp(m.ts), "type": m.type, "text": m.text} for m in moments],
            "exists": False,
        }
        try:
            described = client.describe_collection(name, as_of=ts)
        except CollectionNotFound:
            return out
        cid = int(described["collection_id"])
        out["segments"] = _segments_at(history, cid, ts)
    return out | _described(client, name, described, ts)


def _described(client: Client, name: str, d: dict[str, Any], ts: int) -> dict[str, Any]:
    """Returns what describe_collection, collection_info and count(*) say as of `ts`."""
    info = client.collection_info(name, as_of=ts)
    indexes = [
        {k: ix.get(k) for k in ("index_name", "field_name", "index_type", "metric_type")}
        | ({"created": when(ix["created_ts"])} if ix.get("created_ts") else {})
        for ix in info.indexes.values()
    ]
    out: dict[str, Any] = {
        "exists": True,
        "id": d["collection_id"],
        "fields": d["fields"],
        "partitions": d["partitions"],
        "indexes": indexes,
    }
    # the current millisecond or later: a Strong read (the oracle refuses a future as_of)
    live = ts >= hybridts.compose(hybridts.wall_ms())
    at: dict[str, Any] = {"consistency_level": "Strong"} if live else {"as_of": ts}
    try:
        rows = client.query(name, "", ["count(*)"], **at)
        out["rows"] = int(rows[0]["count(*)"])
    except VectorlogError as exc:  # e.g. older than the log's retention
        out["rows_error"] = str(exc)
    return out


def _segments_at(history: History, collection_id: int, ts: int) -> list[dict[str, Any]]:
    """Returns the collection's segments as of `ts` (the Dropped ones left out), by id."""
    out = []
    for sid, life in sorted(history.coord.segments.items()):
        seen = life.at(ts) if life.collection_id == collection_id else None
        if seen is not None and seen[0] != "Dropped":
            out.append(
                {
                    "segment_id": sid,
                    "partition_id": life.partition_id,
                    "channel": life.vchannel,
                    "state": seen[0],
                    "rows": seen[1],
                }
            )
    return out


def events(client: Client, history: History, q: dict[str, str]) -> dict[str, Any]:
    """Returns a page of one topic partition's events (the query's topic: ddl, dml or coord;
    partition; offset, default the first kept; limit; collection name; type; from and to
    times): {topic, partition, partitions, start, end, offset, next_offset, at_end, events:
    [{offset, ts, time, type, collection_id, collection, vchannel, preview}], corrupt:
    [{offset, reason}], types (every event type)}. Raises InvalidArgument naming a bad
    argument."""
    kind = q.get("topic", "dml")
    if kind not in TOPIC_KINDS:
        raise InvalidArgument(f"topic must be one of {', '.join(TOPIC_KINDS)}, got {kind!r}")
    cluster = client.cluster
    topic = getattr(cluster.topics, kind)
    partition, limit = _number(q, "partition", 0), _number(q, "limit", 20)
    if not 1 <= limit <= MAX_EVENTS:
        raise InvalidArgument(f"limit must be in 1..{MAX_EVENTS}, got {limit}")
    with history.current():
        filters = _filters(history, q)
        names = dict(history.ddl.names)
    serde = cluster.serdes.for_topic(topic)
    for attempt in range(RETRIES):
        starts = start_offsets(cluster.log, topic)
        if partition not in starts:
            raise InvalidArgument(f"{kind} has no partition {partition} (it has {len(starts)})")
        offset = _number(q, "offset", starts[partition])
        try:
            got = page(cluster.log, topic, partition, offset, serde, filters, limit, SCAN)
            break
        except ReplayError as exc:  # from the first kept: retention may move it meanwhile
            if "offset" in q or attempt == RETRIES - 1:
                raise InvalidArgument(str(exc)) from None
    return {
        "topic": kind,
        "partition": partition,
        "partitions": len(starts),
        "start": starts[partition],
        "end": cluster.log.end_offsets(topic)[partition],
        "offset": offset,
        "next_offset": got.next_offset,
        "at_end": got.end,
        "events": [_event(item, names) for item in got.items],
        "corrupt": [{"offset": o, "reason": why} for o, why in got.corrupt],
        "types": sorted(EVENT_TYPES),
    }


def _filters(history: History, q: dict[str, str]) -> Filters:
    """Returns the query's filters (call within history.current()). Raises InvalidArgument
    for an unknown type, a collection never created, or a bad time."""
    kind = q.get("type") or ""
    if kind and kind not in EVENT_TYPES:
        raise InvalidArgument(f"unknown event type {kind!r}")
    name = q.get("collection") or ""
    ids = history.collection_ids(name) if name else set()
    if name and not ids:
        raise InvalidArgument(f"no collection {name!r} was ever created")
    lo = parse_time(q["from"], "from time") if q.get("from") else 0
    hi = parse_time(q["to"], "to time", end=True) if q.get("to") else None
    return Filters(lo, frozenset(ids), frozenset({kind} if kind else ()), hi)


def _event(item: Replayed, names: dict[int, str]) -> dict[str, Any]:
    e = item.event
    body = orjson.dumps(to_json(item)["body"], option=orjson.OPT_SERIALIZE_NUMPY).decode()
    cut = body if len(body) <= PREVIEW_CHARS else body[:PREVIEW_CHARS] + "…"
    return {
        "offset": item.offset,
        **stamp(e.ts),
        "type": e.type,
        "collection_id": e.collection_id,
        "collection": names.get(e.collection_id, ""),
        "vchannel": e.vchannel,
        "preview": cut,
    }


def _number(q: dict[str, str], key: str, default: int) -> int:
    """Returns the non-negative integer query parameter `key`. Raises InvalidArgument."""
    text = q.get(key, "")
    if text == "":
        return default
    if not text.isdigit():
        raise InvalidArgument(f"{key} must be a non-negative integer, got {text!r}")
    return int(text)
