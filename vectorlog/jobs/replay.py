"""Stream replay: the events of one topic, from a position or a timestamp, filtered by
collection and event type, read without writing anything to the log (`vectorlog replay`)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from vectorlog.core import hybridts
from vectorlog.core.errors import VectorlogError
from vectorlog.core.sparse import as_dict
from vectorlog.schemas.columns import column_kind
from vectorlog.schemas.registry import AVRO_DIR
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.streams.errors import OffsetOutOfRange, TopicPartitionNotFound
from vectorlog.streams.log.base import Log, Record, start_offsets
from vectorlog.streams.log.lease_fence import FenceState
from vectorlog.streams.scan import IDLE_S, read_all, settled_end
from vectorlog.streams.snapshots import Blobs, read_whole, snapshot_records, start_fence, take_in
from vectorlog.streams.topics import Topics

TOPIC_KINDS = ("dml", "ddl", "coord")
#: --wire: events as on the log, or re-encoded as Avro single-object or Confluent wire format
WIRES = ("as-is", "single-object", "confluent")


class ReplayError(VectorlogError):
    """A replay option is wrong (a bad position, time or collection); names it."""


@dataclass(frozen=True)
class Filters:
    """Which events come out: `from_ts` <= ts <= `to_ts` (None: no bound), of these
    collection ids and event types (an empty set lets every one through)."""

    from_ts: int = 0
    collections: frozenset[int] = frozenset()
    types: frozenset[str] = frozenset()
    to_ts: int | None = None

    def keep(self, event: Event) -> bool:
        """Returns whether `event` passes every filter."""
        return (
            event.ts >= self.from_ts
            and (self.to_ts is None or event.ts <= self.to_ts)
            and (not self.collections or event.collection_id in self.collections)
            and (not self.types or event.type in self.types)
        )


@dataclass(frozen=True)
class Replayed:
    """One event that came out, with the position of its record."""

    topic: str
    partition: int
    offset: int
    event: Event
    value: bytes


@dataclass
class Positions:
    """The next offset to read per partition, advanced past every record read (kept,
    filtered out or corrupt): what `--save-position` writes and `--resume` reads."""

    topic: str
    next: dict[int, int] = field(default_factory=dict)
    #: the lease fence state at `next` (streams.log.lease_fence), None until a read found it
    fence: FenceState | None = None

    def save(self, path: str | Path) -> None:
        doc = {"topic": self.topic, "positions": {str(p): o for p, o in sorted(self.next.items())}}
        Path(path).write_text(json.dumps(doc) + "\n")

    @classmethod
    def load(cls, path: str | Path, topic: str) -> Positions:
        """Returns the saved positions; raises ReplayError if the file is unreadable or was
        saved for another topic."""
        try:
            doc = json.loads(Path(path).read_text())
            saved = {int(p): int(o) for p, o in doc["positions"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ReplayError(f"cannot read saved position {path}: {exc}") from exc
        if doc.get("topic") != topic:
            raise ReplayError(f"{path} holds positions of {doc.get('topic')!r}, not {topic!r}")
        return cls(topic, saved)


def parse_offsets(text: str) -> dict[int, int]:
    """Returns {partition: offset} of `P:O,P:O`; raises ReplayError if malformed."""
    try:
        pairs = [item.split(":") for item in text.split(",") if item.strip()]
        out = {int(p): int(o) for p, o in pairs}
    except ValueError as exc:
        raise ReplayError(f"bad --from-offset {text!r}: want PARTITION:OFFSET,...") from exc
    if not out or any(p < 0 or o < 0 for p, o in out.items()):
        raise ReplayError(f"bad --from-offset {text!r}: want PARTITION:OFFSET,...")
    return out


def parse_ts(text: str) -> int:
    """Returns the hybrid ts of `text`: a hybrid ts (an integer) or an ISO-8601 time (UTC
    unless it names its zone). Raises ReplayError if it is neither."""
    if text.strip().isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ReplayError(f"bad --from-ts {text!r}: want a hybrid ts or ISO-8601 time") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return hybridts.compose(int(when.timestamp() * 1000))


def event_types() -> tuple[str, ...]:
    """Returns the name of every event type the envelope (schemas/avro/Event.avsc) carries."""
    envelope = json.loads((AVRO_DIR / "Event.avsc").read_text())
    (payload,) = [f for f in envelope["fields"] if f["name"] == "payload"]
    return tuple(name.rsplit(".", 1)[-1] for name in payload["type"])


def collection_names(
    log: Log, topics: Topics, serde: EventSerde, blobs: Blobs | None = None
) -> dict[int, str]:
    """Returns {collection id: name} of every CollectionCreated on the ddl topic, its snapshot
    in `blobs` included (a dropped collection keeps its name). Raises SnapshotMissing,
    LogError."""
    names: dict[int, str] = {}
    for rec in read_whole(log, topics.ddl, blobs):
        try:
            event = serde.decode(rec.value)
        except Exception:  # noqa: BLE001 - a corrupt ddl record names no collection
            continue
        if event.type == "CollectionCreated":
            names[int(event.body["collection_id"])] = event.body["collection_name"]
    return names


def collection_ids(
    log: Log, topics: Topics, serde: EventSerde, names: list[str], blobs: Blobs | None = None
) -> set[int]:
    """Returns the ids of collections given by name or id, names resolved from every
    CollectionCreated on the ddl topic, its snapshot in `blobs` included (a name reused after
    a drop gives every id it had).

    Raises ReplayError naming a name that was never created."""
    return ids_of(collection_names(log, topics, serde, blobs), names, topics.ddl)


def ids_of(created: dict[int, str], names: list[str], ddl: str) -> set[int]:
    """Returns the ids of `names` (names or ids) among `created` ({id: name}). Raises
    ReplayError naming a name that was never created."""
    ids: set[int] = set()
    for name in names:
        found = {i for i, n in created.items() if n == name}
        if found:
            ids |= found
        elif name.isdigit():
            ids.add(int(name))
        else:
            raise ReplayError(f"no collection {name!r} was ever created on {ddl!r}")
    return ids


Corrupt = Callable[[Record, str], None]


def replay(
    log: Log,
    topic: str,
    serde: EventSerde,
    filters: Filters,
    positions: Positions,
    on_corrupt: Corrupt,
    blobs: Blobs | None = None,
) -> Iterator[Replayed]:
    """Yields the events of `topic` that pass `filters`, from `positions.next` (partitions
    it omits from 0) up to the end, advancing `positions` past every record read. A record
    that does not decode goes to `on_corrupt(record, reason)` and is skipped. With `blobs`,
    a start below the first record kept reads the topic's snapshot first (`read_from`).
    Appends nothing.

    Raises ReplayError on a partition the topic lacks, TopicNotFound, SnapshotMissing, or
    LogError if the end is not reached in time."""
    if positions.fence is None:  # read from where it starts; then kept up as records pass
        positions.fence = start_fence(log, topic, blobs, positions.next)
    fence = positions.fence
    for rec in read_from(log, topic, dict(positions.next), blobs=blobs, fence=dict(fence)):
        positions.next[rec.partition] = rec.offset + 1
        take_in(fence, rec)
        item = decoded(rec, serde, on_corrupt)
        if item is not None and filters.keep(item.event):
            yield item


def decoded(rec: Record, serde: EventSerde, on_corrupt: Corrupt) -> Replayed | None:
    """Returns `rec` decoded, or None after `on_corrupt(rec, reason)` if it does not decode."""
    try:
        event = serde.decode(rec.value)
    except Exception as exc:  # noqa: BLE001 - any undecodable record is reported
        on_corrupt(rec, f"{type(exc).__name__}: {exc}")
        return None
    return Replayed(rec.topic, rec.partition, rec.offset, event, rec.value)


def read_from(
    log: Log,
    topic: str,
    start: dict[int, int],
    timeout: float = 60.0,
    idle: float = IDLE_S,
    blobs: Blobs | None = None,
    fence: FenceState | None = None,
) -> Iterator[Record]:
    """Yields the records of `topic` from `start` (every partition; missing ones from their
    first record retention kept) up to its end offsets, then on until idle, as `read_all`
    does; writes nothing. With `blobs`, a partition started below its first kept record
    yields the snapshot standing in for the deleted records first (at that record's offset
    - 1; the coord and ddl topics are snapshotted). Raises ReplayError if `start` names a
    partition the topic lacks, TopicNotFound, OffsetOutOfRange for a position retention
    deleted, SnapshotMissing, or LogError if the end offsets are not reached in time.
    `fence`: the lease fence state where it reads on from (streams.snapshots.start_fence)."""
    first = start_offsets(log, topic)
    if blobs is not None:
        for p, kept in sorted(first.items()):
            if kept > 0 and start.get(p, 0) < kept:
                yield from snapshot_records(blobs, topic, kept)
    try:
        yield from read_all(log, topic, timeout, idle, {**first, **start}, fence)
    except TopicPartitionNotFound as exc:
        n = len(log.end_offsets(topic))
        raise ReplayError(f"{topic!r} has no partition {exc.partition} (it has {n})") from None


@dataclass(frozen=True)
class Page:
    """A page of one partition's events: those that passed the filters (and the records
    that did not decode, as (offset, reason)), and where the next page starts."""

    items: list[Replayed]
    corrupt: list[tuple[int, str]]
    next_offset: int
    end: bool


def page(
    log: Log,
    topic: str,
    partition: int,
    offset: int,
    serde: EventSerde,
    filters: Filters,
    limit: int,
    scan: int,
    timeout: float = 10.0,
) -> Page:
    """Returns the next `limit` events of one partition from `offset` that pass `filters`,
    reading at most `scan` records and not past the partition's end offset, for at most
    `timeout` seconds (a filter that keeps few events pages on where this page stopped).
    Appends nothing.

    Raises ReplayError for a partition the topic lacks or an offset retention deleted,
    TopicNotFound."""
    ends = log.end_offsets(topic)
    if partition not in ends:
        raise ReplayError(f"{topic!r} has no partition {partition} (it has {len(ends)})")
    first = start_offsets(log, topic).get(partition, 0)
    if offset < first:
        raise ReplayError(f"{topic!r} partition {partition} keeps offsets from {first} on")
    end = settled_end(log, topic, partition, ends[partition])
    items: list[Replayed] = []
    corrupt: list[tuple[int, str]] = []
    at, stop = offset, min(end, offset + scan)
    reader, deadline = log.reader(topic, {partition: offset}), time.monotonic() + timeout
    try:
        while at < stop and len(items) < limit and time.monotonic() < deadline:
            for rec in reader.poll(min(1000, stop - at), 0.2):
                if rec.offset >= stop or len(items) >= limit:
                    break
                at = rec.offset + 1
                item = decoded(rec, serde, lambda r, why: corrupt.append((r.offset, why)))
                if item is not None and filters.keep(item.event):
                    items.append(item)
    except OffsetOutOfRange as exc:  # retention deleted it since the check above
        raise ReplayError(
            f"{topic!r} partition {partition} keeps offsets from {exc.start} on"
        ) from None
    finally:
        reader.close()
    return Page(items, corrupt, at, at >= end)


def to_json(item: Replayed) -> dict[str, Any]:
    """Returns the JSON form of a replayed event: its position, envelope and body, with
    bytes as base64 and columns decoded to lists of values."""
    e = item.event
    return {
        "topic": item.topic,
        "partition": item.partition,
        "offset": item.offset,
        "type": e.type,
        "ts": e.ts,
        "collection_id": e.collection_id,
        "vchannel": e.vchannel,
        "body": jsonable(e.body),
    }


def dumps(doc: Any) -> bytes:
    """Returns `doc` (a `to_json` value) as compact JSON, numpy arrays as lists; float32
    values in their shortest form that reads back to the same float32."""
    return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


def jsonable(value: Any, num_rows: int | None = None) -> Any:
    """Returns `value` made JSON-safe: Avro unions as {"type", ...}, columns as values (a
    packed vector column split into its `num_rows` rows, the batch's, when known)."""
    if isinstance(value, dict):
        rows = value.get("num_rows") if "columns" in value else num_rows
        return {k: jsonable(v, rows) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v, num_rows) for v in value]
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        kind, body = column_kind(value)
        if kind.endswith("Column"):
            return column_json(kind, body, num_rows)
        return {"type": kind, "value": jsonable(body)}
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value


def column_json(kind: str, body: dict[str, Any], num_rows: int | None = None) -> dict[str, Any]:
    """Returns a column as {"type", "values"}: float vectors as an (n, dim) float32 array
    (`dumps` writes it as lists of floats), JSON parsed; as Milvus's JSON has them, sparse
    vectors as {"index": value} objects and binary / float16 / bfloat16 vectors as the base64
    text of each row's bytes (of the whole column if `num_rows` is not known); a nullable
    field's null rows as null."""
    if kind == "FloatVectorColumn":
        dim = int(body["dim"])
        flat = np.frombuffer(body["data"], dtype="<f4")
        rows: Any = flat.reshape(-1, dim) if dim > 0 else []
        return {"type": kind, "dim": dim, "values": rows}
    if kind == "SparseFloatVectorColumn":
        return {"type": kind, "values": [_sparse_json(r) for r in body["rows"]]}
    if kind == "PackedVectorColumn":
        data = bytes(body["data"])
        width = len(data) // num_rows if num_rows else len(data)
        parts = [data[i : i + width] for i in range(0, len(data), width)] if width else []
        return {"type": kind, "dim": int(body["dim"]), "values": [_b64(p) for p in parts]}
    if kind == "JsonColumn":
        values = [json.loads(v) for v in body["values"]]
    else:
        values = jsonable(
            body["values"] if isinstance(body["values"], np.ndarray) else list(body["values"])
        )
    valid = body.get("valid")
    if valid is not None:  # a nullable field's nulls, not their placeholders
        values = [v if ok else None for v, ok in zip(values, valid, strict=True)]
    return {"type": kind, "values": values}


def _sparse_json(row: bytes) -> dict[str, float]:
    """Returns a sparse row as Milvus's JSON writes it: {"index": value}."""
    return {str(k): v for k, v in as_dict(row).items()}


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
