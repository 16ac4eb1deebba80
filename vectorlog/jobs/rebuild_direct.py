"""Rebuild's direct path: the new cluster starts from the source's binlogs, not from its rows.

Where the source's data node published a checkpoint at or before T (`ChannelCheckpointed`:
every row and delete at or below its tick on a pchannel is in binlogs that earlier coord
events reference), the rebuilt cluster is the source's restart as of that checkpoint:

- the source's binlogs and segment indexes are hard-linked (copied across file systems) into
  the new storage root, under the same relative paths, so the coord events naming them hold
  as they are; so is its query node's vector cache, if it has one here (checked against the
  binlogs at every open);
- the new coord topic gets the segment events before the checkpoint (opened, allocated,
  sealed, flush started, binlogs saved, flushed, data node ticks, index reports whose files
  are there), the checkpoint itself, then the allocation events after it stamped at or
  before T;
- the new dml topic gets every record before the checkpoint's offset at its own offset, each
  RowsInserted reduced to its primary keys (the new data node indexes them; the rows are in
  the binlogs, which the query node loads), then the records after it stamped at or before T
  whole (the tail the new data node writes itself).

So the query node loads the binlogs (rows and deletes keep their ts: as_of reads before T
answer as the source did) and replays only the tail. The row copy (rebuild.py) is used instead
(the reason is logged) when retention truncated a pchannel, no checkpoint is at or before T,
a binlog a coord event before the checkpoint names is gone (a compaction's merged segments,
deleted by the source) or one a bulk insert after the checkpoint names, a record before the
checkpoint is stamped after T, or a compaction lies between the checkpoint and T.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vectorlog.core.model import CollectionSchema
from vectorlog.engines.spark.executor_write import strip_event, strip_plan
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage import ObjectStore, PyArrowObjectStore
from vectorlog.streams.log.base import Append, Log, Record

log = logging.getLogger(__name__)

#: coord events folded into segment state that the new cluster takes as they are (before
#: the checkpoint): with the index reports, whose files are linked too (a report whose files
#: are gone is left out: the new index node builds that index again)
SEGMENT_EVENTS = frozenset(
    {
        "SegmentOpened",
        "SegmentsAllocated",
        "SegmentsSealed",
        "SegmentsFlushStarted",
        "BinlogPathsSaved",
        "SegmentFlushed",
        "DataNodeTicked",
        "SegmentIndexed",
        "SegmentIndexesDropped",
    }
)
#: records after the checkpoint the new data node could not replay as the source applied
#: them: a compaction needs its merged segments Flushed when it comes, and the new cluster's
#: flushes of tail segments happen when its own datacoord decides
NOT_IN_TAIL = frozenset({"SegmentsCompacted"})
#: the storage folders linked into the new root: the rows' insert, delta and stats logs, and
#: the segment indexes
ROW_FOLDERS = ("insert_log", "delta_log", "stats_log", "index_files")


@dataclass
class DirectPlan:
    """The checkpoint a rebuild starts from: its index in the coord records, and per pchannel
    the first dml offset it did not cover."""

    index: int
    offsets: dict[int, int]


def plan_direct(
    coord: list[Record], serde: EventSerde, at: int, starts: dict[int, int], store: ObjectStore
) -> DirectPlan | None:
    """Returns the plan of a direct rebuild at `at`, or None where the row copy is needed
    (see the module docstring; the reason is logged)."""
    if any(start > 0 for start in starts.values()):
        _refused("retention truncated the dml topic")
        return None
    found = _last_checkpoint(coord, serde, at)
    if found is None:
        _refused(f"no data node checkpoint at or before {at}")
        return None
    plan = DirectPlan(*found)
    missing = _missing(coord[: plan.index], serde, store)
    if missing:
        _refused(f"binlog {missing}, named before the checkpoint, is gone")
        return None
    return plan


def _refused(why: str) -> None:
    """Logs why a rebuild copies rows instead."""
    log.info("rebuild copies rows through the log: %s", why)


def _last_checkpoint(
    coord: list[Record], serde: EventSerde, at: int
) -> tuple[int, dict[int, int]] | None:
    """Returns the index and offsets of the last ChannelCheckpointed stamped <= `at`."""
    for i in range(len(coord) - 1, -1, -1):
        event = _decoded(serde, coord[i])
        if event is not None and event.type == "ChannelCheckpointed" and event.ts <= at:
            return i, {pos["pchannel"]: pos["offset"] for pos in event.body["positions"]}
    return None


def _decoded(serde: EventSerde, record: Record) -> Event | None:
    try:
        return serde.decode(record.value)
    except Exception:
        return None  # datacoord dead-lettered it


def _missing(coord: list[Record], serde: EventSerde, store: ObjectStore) -> str | None:
    """Returns a binlog path a BinlogPathsSaved of `coord` names that `store` lacks, if any:
    also those of segments a compaction merged (the source deletes them once its checkpoint
    passed the compaction, and the new data node replays it from the start)."""
    for rec in coord:
        event = _decoded(serde, rec)
        if event is None or event.type != "BinlogPathsSaved":
            continue
        b = event.body
        for path in [x["path"] for fb in b["field_binlogs"] for x in fb["binlogs"]] + [
            x["path"] for x in b["delta_binlogs"]
        ]:
            if not store.exists(path):
                return path
    return None


def coord_records(
    coord: list[Record],
    serde: EventSerde,
    at: int,
    plan: DirectPlan,
    kept_after: frozenset[str],
    store: ObjectStore,
) -> Iterator[Append]:
    """Yields the new coord topic: segment events before the checkpoint (index reports whose
    files `store` holds), the checkpoint, then the `kept_after` events stamped <= `at`."""
    for i, rec in enumerate(coord):
        event = _decoded(serde, rec)
        if event is None or event.ts > at:
            continue
        wanted = SEGMENT_EVENTS if i < plan.index else kept_after
        if i == plan.index or (event.type in wanted and _files_held(event, store)):
            yield Append(rec.partition, rec.value, rec.key, rec.headers)


def _files_held(event: Event, store: ObjectStore) -> bool:
    """Whether `store` holds the files of an index report (True for other events)."""
    if event.type != "SegmentIndexed":
        return True
    return all(store.exists(event.body[k]) for k in ("index_file", "row_id_file"))


def key_plan(ddl: list[Event]) -> dict[int, CollectionSchema]:
    """Returns the schema of every collection the ddl events create (as created)."""
    return {
        e.body["collection_id"]: CollectionSchema.from_avro(e.body["schema"])
        for e in ddl
        if e.type == "CollectionCreated"
    }


@dataclass
class DirectDml:
    """The new dml topic per partition: the records before the checkpoint's offset, each
    RowsInserted with its keys only (in memory: a few bytes per row), and the offsets of
    the records after it stamped <= T (or not decodable: dead-lettered again), copied whole."""

    before: dict[int, list[Append]]
    tail: dict[int, set[int]]
    ends: dict[int, int]
    needed: list[str] = field(default_factory=list)  # the binlogs of the tail's bulk inserts

    def total(self) -> int:
        """Returns how many records the new dml topic gets."""
        return sum(map(len, self.before.values())) + sum(map(len, self.tail.values()))


def scan_dml(
    log_: Log,
    topic: str,
    serde: EventSerde,
    ends: dict[int, int],
    at: int,
    plan: DirectPlan,
    schemas: dict[int, CollectionSchema],
) -> DirectDml | None:
    """Reads the dml topic once below `ends`; returns what the new one gets, or None (the row
    copy is needed) if a record before the checkpoint's offset is stamped after `at` (one a
    data node dead-lettered as too far ahead: it must not come back)."""
    keys = strip_plan(schemas)
    out = DirectDml({}, {}, dict(ends))
    for p, end in sorted(ends.items()):
        below = plan.offsets.get(p, 0)
        before, tail = out.before.setdefault(p, []), out.tail.setdefault(p, set())
        for r in _records(log_, topic, p, end):
            event = _decoded(serde, r)
            if r.offset >= below:
                if event is not None and event.ts <= at and event.type in NOT_IN_TAIL:
                    _refused(f"a {event.type} at or before {at} is after the checkpoint")
                    return None
                if event is None or event.ts <= at:
                    tail.add(r.offset)
                if event is not None and event.ts <= at and event.type == "SegmentImported":
                    out.needed += _imported_paths(event)
                continue
            if event is not None and event.ts > at:
                _refused(f"dml[{p}] record {r.offset} is before the checkpoint, after {at}")
                return None
            value = serde.encode(event) if event and strip_event(keys, event) else r.value
            before.append(Append(p, value, r.key, r.headers))
    return out


def _imported_paths(event: Event) -> list[str]:
    """Returns the binlogs a SegmentImported names."""
    return [
        x["path"]
        for seg in event.body["segments"]
        for kind in ("field_binlogs", "stats_binlogs")
        for fb in seg[kind]
        for x in fb["binlogs"]
    ]


def _records(log_: Log, topic: str, p: int, end: int) -> Iterator[Record]:
    """Yields partition `p`'s records below `end`, in offset order."""
    reader = log_.reader(topic, {p: 0})
    try:
        at = 0
        while at < end:
            batch = reader.poll(1000, timeout=1.0)
            for r in batch:
                if r.offset < end:
                    yield r
            at = batch[-1].offset + 1 if batch else at
    finally:
        reader.close()


def link_binlogs(source_root: str, target_root: str) -> int:
    """Links (or copies) the source's insert, delta and stats logs into the target root at
    the same relative paths; returns how many files. Raises OSError, or what a store raises
    (a source on an object store is copied through it)."""
    if "://" not in source_root or source_root.startswith("file://"):
        return _link_local(Path(source_root.removeprefix("file://")), Path(target_root))
    src, dst = PyArrowObjectStore(source_root), PyArrowObjectStore(target_root)
    n = 0
    for folder in ROW_FOLDERS:
        for path in src.list(folder):
            dst.put(path, src.get(path))
            n += 1
    return n


def _link_local(source: Path, target: Path) -> int:
    n = 0
    for folder in ROW_FOLDERS:
        for dirpath, _, names in os.walk(source / folder):
            into = target / Path(dirpath).relative_to(source)
            into.mkdir(parents=True, exist_ok=True)
            for name in names:
                n += _link(Path(dirpath) / name, into / name)
    return n


def _link(source: Path, target: Path) -> int:
    """Links (or copies) one file; returns 1, or 0 if it is gone (a running source deletes
    the files of merged segments: `missing_in` then says whether one was needed)."""
    try:
        os.link(source, target)
    except FileNotFoundError:
        return 0
    except OSError:  # another file system, or links not allowed
        try:
            shutil.copy2(source, target)
        except FileNotFoundError:
            return 0
    return 1


def missing_in(
    coord: list[Record], serde: EventSerde, plan: DirectPlan, needed: list[str], root: str
) -> str | None:
    """Returns a binlog the coord events before the plan's checkpoint name, or one of
    `needed`, that the storage at `root` lacks, if any."""
    store = PyArrowObjectStore(root)
    gone = [path for path in needed if not store.exists(path)]
    return gone[0] if gone else _missing(coord[: plan.index], serde, store)


def link_vector_cache(source_state: Path, target_state: Path) -> int:
    """Links (or copies) the source query node's cache of sealed segments' vectors
    (querynode/mmapcache.py: derived from the binlogs, verified against them at every open)
    into the target's state folder, so the new query node maps them instead of decoding the
    vector binlogs again; returns how many files (0 without a cache, or a source whose state
    lives elsewhere)."""
    cache = source_state / "querynode"
    if not cache.is_dir():
        return 0
    n = 0
    for folder in (f for f in cache.iterdir() if f.is_dir() and f.name.isdigit()):
        into = target_state / "querynode" / folder.name
        into.mkdir(parents=True, exist_ok=True)
        for entry in folder.iterdir():
            if entry.is_file() and not entry.name.endswith(".tmp"):
                n += _link(entry, into / entry.name)
    return n
