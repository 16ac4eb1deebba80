"""The query node (seed 001 s.8): growing segments from the dml log, tsafe, reads at a timestamp.

It consumes every pchannel of the dml topic through the tick-aligned msgstream and applies
each pack in ts order: CollectionCreated/Dropped (broadcast DDL), RowsInserted, RowsDeleted.
After a pack it advances that pchannel's tsafe to the pack's tick; a read at T waits until
the tsafe of every pchannel of the collection reaches T. Its state is a derived view rebuilt
at start: from the log alone, or (`recover`) from the segments' binlogs up to the data node's
published checkpoint and the log after it (recovery.py); an event it cannot apply goes to
the dead-letter topic.

With `index_files` (an object store), it also follows the coord topic (`IndexLoader`) and
serves sealed segments from their faiss indexes (SegmentIndexed), back to exact search when
they are dropped (SegmentIndexesDropped).

A dropped collection's replica is kept, so reads as of a ts before the drop answer as the
cluster did then (time travel; reads at or after the drop raise CollectionNotFound), until
the applied ticks pass the drop by the meta retention window; then it is freed. With no
retention (None) every dropped replica is kept: time travel works forever, at their memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vectorlog.core.errors import CollectionNotFound, ConsistencyTimeout, RecoveryFailed
from vectorlog.core.hybridts import physical_ms
from vectorlog.core.model import CollectionHistory, CollectionSchema, FieldSchema
from vectorlog.core.results import SearchResult
from vectorlog.processors.querynode.cacheload import CacheLoad
from vectorlog.processors.querynode.early_stream import EarlyStream
from vectorlog.processors.querynode.imported import compacted_row_ids, imported_rows
from vectorlog.processors.querynode.indexes import IndexLoader
from vectorlog.processors.querynode.mmapcache import CachedVectors
from vectorlog.processors.querynode.recovery import (
    RecoveryPoint,
    SegmentFiles,
    read_point,
    read_segments,
)
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.restore import restore
from vectorlog.processors.querynode.sealed import IndexFiles
from vectorlog.runtime.events import EventApplier
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import tick_aligned
from vectorlog.schemas.columns import column_kind, decode_column, inserts_grouped
from vectorlog.schemas.errors import MalformedEvent
from vectorlog.schemas.serde import Event
from vectorlog.streams.deadletter import DeadLetterWriter
from vectorlog.streams.log.base import Log, start_offsets
from vectorlog.streams.msgstream import (
    DEFAULT_MAX_SKEW_MS,
    MsgPack,
    StreamPosition,
    TickPolicy,
    TtMsgStream,
    wall_clock,
)
from vectorlog.streams.snapshots import Blobs
from vectorlog.streams.topics import Serdes, Topics

if TYPE_CHECKING:
    from vectorlog.expr import Expr

log = logging.getLogger(__name__)


class QueryNode(ProcessorBase):
    """Serves reads for every collection in the dml topic."""

    one_call = True  # search_common answers in-process (QueryNodeService)

    def __init__(
        self,
        log: Log,
        topics: Topics,
        serdes: Serdes,
        name: str = "querynode",
        retention_ms: int | None = None,
        clock: Callable[[], int] = wall_clock,
        max_clock_skew_ms: int = DEFAULT_MAX_SKEW_MS,
        index_files: IndexFiles | None = None,
        snapshots: Blobs | None = None,
        cache_dir: Path | None = None,
        ticks: TickPolicy | None = None,
        pchannels: frozenset[int] | None = None,
    ) -> None:
        """`clock()`: now as a hybrid ts (the timestamp oracle's); an event more than
        `max_clock_skew_ms` ahead of it is dead-lettered, never trusted. `index_files`:
        where segment index files are read (`get(path) -> bytes`); None: no index is
        loaded, every search is exact. `snapshots`: where the coord topic's snapshots are.
        `cache_dir`: where `recover` keeps Flushed segments' vectors to map them at the next
        start (mmapcache.py); None: none are kept. `ticks`: how the dml writers' ticks are
        folded (several writers: TickPolicy(warm_up)). `pchannels`: the dml pchannels it
        serves, their Flushed segments loaded by `recover` (None: every one)."""
        self._ticks = ticks
        self._snapshots = snapshots
        self._serde, self._topic = serdes.for_topic(topics.dml), topics.dml
        self._coord, self._coord_serde = topics.coord, serdes.for_topic(topics.coord)
        self._log, self._clock, self._max_skew_ms = log, clock, max_clock_skew_ms
        self._dead_letter = DeadLetterWriter(log, topics.dlq, name)
        served = range(topics.dml_partitions) if pchannels is None else sorted(pchannels)
        self.pchannels = frozenset(served)
        self._only = pchannels  # None: every segment is loaded, whatever its pchannel
        self._start = {p: StreamPosition() for p in served}
        self._stream: TtMsgStream | None = None  # opened by start()
        self._early: EarlyStream | None = None  # opened by recover() meanwhile (warm-up)
        self._meta_horizon = 0  # unknown collections' events before this are skipped
        self.loaded_rows = 0  # rows loaded from binlogs by recover()
        self._tsafe = [0] * topics.dml_partitions
        self._next = [0] * topics.dml_partitions  # per pchannel, the first offset not applied
        self.replicas: dict[int, Replica] = {}
        self._retention_ms = retention_ms
        self._kept: dict[int, int] = {}  # dropped collection id -> drop ts, replica kept
        self._freed: set[int] = set()  # dropped collections whose replica was freed
        self._cond = threading.Condition()
        self.name = name
        self._loop = ProcessorLoop(self, join_timeout_s=10)
        self._stop = self._loop.stopping
        self._applier = EventApplier(
            topics.dml, self._serde, self._dead_letter, self._stop, on_failure=self._report
        )
        self._handlers: dict[str, Callable[[Event], None]] = {
            "CollectionCreated": self._created,
            "CollectionDropped": self._dropped,
            "CollectionFieldAdded": self._field_added,
            "RowsInserted": self._inserted,
            "RowsDeleted": self._deleted,
            "PartitionDropped": self._partition_dropped,
            "SegmentImported": self._imported,
            "SegmentsCompacted": self._compacted,
        }
        self._files = index_files
        self.cache = CacheLoad(cache_dir) if cache_dir is not None else None
        self.indexes: IndexLoader | None = None
        if index_files is not None:
            coord = serdes.for_topic(topics.coord)
            flushed = self.cache.flushed if self.cache is not None else None
            sealed = self._seal_cached if self.cache is not None else None
            self.indexes = IndexLoader(
                log, topics.coord, coord, index_files, self._replica_of, snapshots, flushed, sealed
            )
            self.indexes.pchannels = None if pchannels is None else self.pchannels

    def recover(
        self,
        histories: list[CollectionHistory],
        files: IndexFiles,
        horizon: int = 0,
        timeout: float = 60.0,
    ) -> int:
        """Before `start`: loads every segment's rows and deletes up to the data node's
        published checkpoint from their binlogs in `files`, creates the collections of
        `histories` (rootcoord's meta, read after the log was replayed into it; `horizon`
        its GC horizon: events of collections it does not know, stamped before that, are of
        collections dropped and pruned, and skipped), and makes `start` consume dml from the
        checkpoint. Returns the rows loaded. If a binlog cannot be read, it logs why and
        replays dml from offset 0 instead (nothing is lost; only the restart is slower), or,
        if retention deleted dml records, raises RecoveryFailed. Raises LogError if the coord
        topic cannot be read."""
        point = read_point(self._log, self._coord, self._coord_serde, self._snapshots, timeout)
        self._meta_horizon = horizon
        self._open_early(point)
        try:
            loaded = self._load(point, histories, files)
        except Exception as exc:
            starts = start_offsets(self._log, self._topic)
            if any(starts.values()):
                raise RecoveryFailed(
                    f"query node cannot load binlogs ({type(exc).__name__}: {exc}), and "
                    f"retention deleted the dml records before offsets {starts} that a "
                    "replay would need"
                ) from exc
            log.error("query node cannot load binlogs, replaying dml from 0 instead: %s", exc)
            self.replicas, self._kept, self._meta_horizon = {}, {}, 0
            return 0
        for p, pos in point.checkpoints.items():
            if p in self._start:
                self._start[p], self._tsafe[p], self._next[p] = pos, pos.tick, pos.offset
        self.loaded_rows = loaded
        return loaded

    def start_positions(self) -> dict[int, StreamPosition]:
        """Returns, per dml pchannel, where consuming started (or will start)."""
        return dict(self._start)

    def _load(
        self, point: RecoveryPoint, histories: list[CollectionHistory], files: IndexFiles
    ) -> int:
        """Creates the replicas of `histories` and restores their segments' rows."""
        loaded = 0
        for h in histories:
            segs = [
                f
                for f in point.segments.values()
                if f.collection_id == h.collection_id
                and f.partition_id in h.partitions
                and (self._only is None or f.pchannel in self._only)
            ]
            if self.cache is None:
                replica, n = _restored(h, segs, point, files, {})
            else:
                replica, n = self.cache.restored(h, segs, point, _restored, files)
            for pid, ts in h.partition_drops.items():  # ends the loaded rows' visibility
                replica.drop_partition(ts, pid)
            self.replicas[h.collection_id], loaded = self._retiring(replica), loaded + n
            if h.dropped_ts is not None:
                self._kept[h.collection_id] = h.dropped_ts
        if self.cache is not None:
            self.cache.loaded(point, self.replicas)
        return loaded

    def _open_early(self, point: RecoveryPoint) -> None:
        """With a warm-up (its ticks read back), starts opening the stream at the positions
        `point` gives while the segments load (early_stream)."""
        if self._ticks is None or not self._ticks.warm_up or self._early is not None:
            return
        at = {p: point.checkpoints.get(p, pos) for p, pos in self._start.items()}
        self._early = EarlyStream(at, self._open_stream)

    def _open_stream(self, positions: dict[int, StreamPosition]) -> TtMsgStream:
        """Returns the dml stream of the pchannels served from `positions`."""
        return tick_aligned(
            self._log,
            self._topic,
            positions,
            self._serde,
            self._dead_letter,
            self._clock,
            self._max_skew_ms,
            ticks=self._ticks,
        )

    def start(self) -> None:
        """Opens dml at the start positions (or takes the stream `recover` opened there) and
        starts consuming on the shared loop."""
        early, self._early = self._early, None
        stream = early.take(dict(self._start)) if early is not None else None
        self._stream = stream if stream is not None else self._open_stream(dict(self._start))
        self._loop.start()
        if self.cache is not None:  # entries grow with their segments from now on
            self.cache.watch(lambda: self.replicas.copy().values())
        if self.indexes is not None and self.cache is not None:
            self.cache.writer.then(self._start_indexes)  # see CacheWriter.then
        elif self.indexes is not None:
            self.indexes.start()

    def _seal_cached(self, replica: Replica, pid: int, sid: int, pchannel: int, ts: int) -> bool:
        """Writes the cache entry of a segment sealed at `ts` once its pchannel's tsafe passed
        it (every row of it applied here); returns False until then (the loader retries)."""
        if self.cache is None or pchannel not in self.pchannels:
            return True  # nothing to keep here
        if self.tsafe([pchannel]) < ts:
            return False
        self.cache.sealed(replica, pid, sid)
        return True

    def _start_indexes(self) -> None:
        if self.indexes is not None and not self._stop.is_set():
            self.indexes.start()

    def stop_soon(self) -> None:
        """Asks the consumer and the index loader to end, without waiting."""
        self._stop.set()
        if self.indexes is not None:
            self.indexes.stop_soon()
        self._loop.stop_soon()

    def stop(self) -> None:
        """Stops consuming (the stream stays open until `close`)."""
        self._stop.set()
        if self.indexes is not None:
            self.indexes.stop()
        self._loop.stop()

    def _replica_of(self, collection_id: int) -> Replica | None:
        """Returns the replica of a collection, None if not created yet. Raises KeyError
        if it was freed or dropped (its indexes are no longer wanted)."""
        replica = self.replicas.get(collection_id)
        if collection_id in self._freed or (replica is not None and replica.dropped_ts is not None):
            raise KeyError(collection_id)
        return replica

    def indexes_served(self, collection_id: int, coord_end: int) -> bool:
        """Returns whether the segment indexes of a collection recorded on coord below offset
        `coord_end` are all served (True without an index loader)."""
        return self.indexes is None or self.indexes.served(collection_id, coord_end)

    def close(self) -> None:
        """Stops, closes the stream and finishes the cache writes queued."""
        self.stop()
        early, self._early = self._early, None
        if early is not None:
            early.discard()
        if self._stream is not None:
            self._stream.close()
        if self.cache is not None:
            self.cache.writer.close()

    # -- the consumer (a Processor on the shared loop) ----------------------------------------
    def step(self) -> bool:
        """Applies the dml packs completed since the last round (its tsafe stays behind a
        pack it stopped in). Returns whether any came."""
        assert self._stream is not None, "opened by start()"
        packs = self._stream.consume(timeout=self._loop.idle_wait_s)
        for pack in packs:
            self.apply(pack)
        return bool(packs)

    def report(self, failure: Exception | None) -> None:
        """Tells waiting readers the log failed; None clears a failure (readers are told)."""
        if failure is not None or self.failure is not None:
            self._report(failure)

    def _report(self, exc: Exception | None) -> None:
        with self._cond:
            self.failure = exc
            self._cond.notify_all()

    # -- applying -------------------------------------------------------------------------
    def apply(self, pack: MsgPack) -> None:
        """Applies one pack's events in ts order, then advances that pchannel's tsafe: only
        once every event was applied or dead-lettered (a failed dead letter is retried).

        Raises DeadLetterAbandoned if the node stops first (tsafe stays behind the pack)."""
        for group in _insert_groups(pack.events):
            if len(group) > 1 and self._inserted_all(group):
                continue
            for event in group:
                handler = self._handlers.get(event.type)
                if handler is not None:  # any event it cannot apply: dead-lettered, go on
                    self._applier.apply(event, handler)
        with self._cond:
            self._tsafe[pack.partition] = pack.end_ts
            self._next[pack.partition] = pack.resume_offset
            self._free_expired(pack.end_ts)
            self.failure = None
            self._cond.notify_all()
        if self.indexes is not None and any(
            e.type in ("RowsInserted", "SegmentImported", "SegmentsCompacted") for e in pack.events
        ):
            self.indexes.applied.set()  # pending index loads may find their rows now

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """Returns {(topic, partition): next offset}: per dml pchannel the first offset not
        applied (after its last pack), and the coord offset the index loader reads next."""
        out = {(self._topic, p): nxt for p, nxt in enumerate(self._next)}
        if self.indexes is not None:
            out[(self._coord, 0)] = self.indexes.offset
        return out

    def _created(self, event: Event) -> None:
        cid = event.body["collection_id"]
        if cid not in self.replicas and event.ts < self._meta_horizon:
            self._freed.add(cid)  # before the meta's horizon, not in it: dropped and pruned
        if cid not in self.replicas and cid not in self._freed:
            replica = Replica(cid, CollectionSchema.from_avro(event.body["schema"]))
            self.replicas[cid] = self._retiring(replica)

    def _retiring(self, replica: Replica) -> Replica:
        """Returns `replica`, the cache entries of its segments merged away dropped once
        none of its vector fields serves from them (handoff.py)."""
        cache, cid = self.cache, replica.collection_id
        if cache is not None:
            replica.on_retired = lambda sids: cache.writer.drop(cid, sids)
        return replica

    def _field_added(self, event: Event) -> None:
        """Adds the field to the replica (rows held read as its default value, else None)."""
        replica = self.replicas.get(event.body["collection_id"])
        if replica is not None:
            replica.add_field(FieldSchema.from_avro(event.body["field"]))

    def _dropped(self, event: Event) -> None:
        """Marks the replica dropped at the event's ts (each pchannel brings a copy); it is
        kept for reads as of earlier ts until `_free_expired` frees it."""
        cid = event.body["collection_id"]
        replica = self.replicas.get(cid)
        if replica is None:
            self._freed.add(cid)
            return
        replica.drop(event.ts)
        self._kept[cid] = min(event.ts, self._kept.get(cid, event.ts))

    def _free_expired(self, tick: int) -> None:
        """Frees the replicas of collections dropped more than the retention window before
        `tick` (the applied log time, so a replay frees the same ones): no read inside the
        window can be as of a ts before their drop."""
        if self._retention_ms is None or not self._kept:
            return
        horizon = physical_ms(tick) - self._retention_ms
        for cid, dropped in list(self._kept.items()):
            if physical_ms(dropped) < horizon:
                del self._kept[cid]
                self._freed.add(cid)
                self.replicas.pop(cid, None)
                if self.cache is not None:
                    self.cache.writer.drop_collection(cid)

    def _target(self, event: Event) -> Replica | None:
        """Returns the replica an event is for; None if its collection was freed.

        Raises CollectionNotFound for a collection that does not exist (yet) at its ts.
        """
        cid = event.body["collection_id"]
        replica = self.replicas.get(cid)
        if replica is None and cid not in self._freed:
            if event.ts < self._meta_horizon:
                return None  # before the meta's horizon, not in it: dropped and pruned
            raise CollectionNotFound(cid)
        return replica

    def _inserted(self, event: Event) -> None:
        replica = self._target(event)
        if replica is not None:
            replica.insert(event.ts, event.body)

    def _inserted_all(self, events: list[Event]) -> bool:
        """Applies consecutive RowsInserted events of one collection as a run
        (Replica.insert_all: a tick's single-row inserts cost about one insert); returns
        False, having changed nothing, if any of them cannot be applied (each is then
        applied on its own, a bad one dead-lettered)."""
        replica = self.replicas.get(events[0].body["collection_id"])
        if replica is None:
            return False
        try:
            run = replica.prepared_run([(e.ts, e.body) for e in events])
        except Exception:  # noqa: BLE001 (as below: each is then applied on its own)
            run = None
        if run is not None:
            replica.append(run)
            return True
        try:
            parts = [replica.prepared(e.ts, e.body) for e in events]
        except Exception:  # noqa: BLE001 (the event's own failure shows when applied alone)
            return False
        replica.insert_all([p for p in parts if p is not None])
        return True

    def _imported(self, event: Event) -> None:
        """Loads a bulk insert's segments from their binlogs as an insert at the event's ts
        (a key held already is replaced from that ts on)."""
        replica = self._target(event)
        if replica is None:
            return
        if self._files is None:
            raise MalformedEvent("SegmentImported, but this query node reads no binlogs")
        for rows in imported_rows(event, replica.schema, self._files):
            pks = rows.columns[replica.pk_name]
            pks = pks.tolist() if isinstance(pks, np.ndarray) else list(pks)
            replica.load_rows(
                event.ts,
                rows.partition_id,
                rows.segment_id,
                rows.row_ids,
                pks,
                rows.columns,
                rows.vectors,
            )

    def _compacted(self, event: Event) -> None:
        """Moves the rows a compaction merged into its new segment (row ids read from its
        binlogs), so that segment's index serves them: at once, or, for a vector field whose
        compacted-from segments serve their indexes, once its index is loaded (handoff.py;
        their cache entries are dropped once no field serves from them: `_retiring`);
        reads see no change."""
        replica = self._target(event)
        if replica is None or self._files is None:
            return  # without binlogs the rows stay where they are: still correct, unindexed
        b = event.body
        replica.rehome(
            b["partition_id"],
            list(b["compacted_from"]),
            b["segment"]["segment_id"],
            compacted_row_ids(b["segment"], self._files),
            b["horizon"],
        )

    def _deleted(self, event: Event) -> None:
        replica = self._target(event)
        if replica is None:
            return
        col = event.body["primary_keys"]
        pks = decode_column(col, event.body["num_rows"])
        if column_kind(col)[0] == "Int64Column":
            pks = pks.tolist()
        replica.delete(event.ts, pks, event.body["partition_id"])

    def _partition_dropped(self, event: Event) -> None:
        replica = self.replicas.get(event.body["collection_id"])
        if replica is not None and replica.readable(event.ts):
            replica.drop_partition(event.ts, event.body["partition_id"])

    # -- QueryNodeService ----------------------------------------------------------------------
    def tsafe(self, pchannels: Sequence[int]) -> int:
        """Returns the ts up to which every given pchannel has been applied. Read without
        the lock: each pchannel's tsafe only grows and one list item is read whole, so the
        minimum read is one every pchannel had reached (what the lock gave, a moment older)."""
        tsafe = self._tsafe
        if len(pchannels) == 1:
            return tsafe[pchannels[0]]
        return min([tsafe[p] for p in pchannels])

    def wait_tsafe(self, pchannels: Sequence[int], ts: int, timeout: float) -> None:
        """Returns once every pchannel's tsafe >= ts. Raises ConsistencyTimeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while min(self._tsafe[p] for p in pchannels) < ts:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConsistencyTimeout(ts, min(self._tsafe[p] for p in pchannels), timeout)
                self._cond.wait(min(left, 0.5))

    def search(
        self,
        collection_id: int,
        queries: np.ndarray,
        limit: int,
        ts: int,
        partitions: list[int] | None,
        output_fields: list[str],
        *,
        expr: Expr | None = None,
        offset: int = 0,
        group_by: str | None = None,
        params: dict[str, Any] | None = None,
        metric: str | None = None,
        group_size: int = 1,
        expire_ts: int = 0,
        anns_field: str | None = None,
    ) -> SearchResult:
        """Returns, per query vector, up to `limit` hits visible at `ts` matching `expr`
        (see QueryNodeService.search: `params` ef / nprobe for segment indexes, `metric`
        the index's, `anns_field` the vector field). Raises CollectionNotFound, or
        InvalidArgument if a loaded segment index has another metric than `metric`."""
        return self._replica(collection_id, ts).search(
            queries,
            limit,
            ts,
            partitions,
            output_fields,
            expr,
            offset,
            group_by,
            params,
            metric,
            group_size,
            expire_ts,
            anns_field,
        )

    def search_common(
        self,
        collection_id: int,
        queries: np.ndarray,
        limit: int,
        ts: int,
        params: dict[str, Any] | None,
        metric: str,
        anns_field: str,
    ) -> SearchResult | None:
        """Returns `search`'s answer to the common search (QueryNodeService.search_common),
        or None where it takes `search` (no replica readable at `ts`, or see
        Replica.search_common)."""
        replica = self.replicas.get(collection_id)
        if replica is None or not replica.readable(ts):
            return None
        return replica.search_common(queries, limit, ts, params, metric, anns_field)

    def query(
        self,
        collection_id: int,
        ts: int,
        output_fields: list[str],
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the matching rows visible at `ts` in primary-key order, paged by
        `offset` and `limit`. Raises CollectionNotFound."""
        replica = self._replica(collection_id, ts)
        return replica.query(ts, output_fields, partitions, expr, keys, limit, offset, expire_ts)

    def get(
        self,
        collection_id: int,
        keys: list[Any],
        ts: int,
        output_fields: list[str],
        *,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the rows with these keys visible at `ts`. Raises CollectionNotFound."""
        return self._replica(collection_id, ts).get(keys, ts, output_fields, expire_ts)

    def count(
        self,
        collection_id: int,
        ts: int,
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        *,
        expire_ts: int = 0,
    ) -> int:
        """Returns the number of rows visible at `ts` matching `expr` (and `keys`).
        Raises CollectionNotFound."""
        return self._replica(collection_id, ts).count(ts, partitions, expr, keys, expire_ts)

    def _replica(self, collection_id: int, ts: int) -> Replica:
        """Returns the replica of the collection as it existed at `ts`.

        Raises CollectionNotFound if it did not exist then (never created, dropped at or
        before `ts`, or dropped so long ago that its replica was freed)."""
        replica = self.replicas.get(collection_id)
        if replica is None or not replica.readable(ts):
            raise CollectionNotFound(collection_id)
        return replica


def _restored(
    h: CollectionHistory,
    segs: list[SegmentFiles],
    point: RecoveryPoint,
    files: IndexFiles,
    cached: dict[tuple[int, int, int], CachedVectors],
) -> tuple[Replica, int]:
    """Returns the replica of `h` restored from `segs`' binlogs and the rows loaded; the
    vectors of the `cached` segments, by (partition, id, vector field id), come from their
    cache entries (a segment has every vector field's or none).
    Raises CacheMismatch if an entry does not hold its segment's rows, or what reading
    binlogs raises."""

    def make() -> Replica:
        replica = _replica_of(h)
        for col in replica.vectors.values():
            col.cached = {(p, s): e for (p, s, f), e in cached.items() if f == col.field_id}
        replica.reserve(sum(point.flushed.get(f.segment_id, 0) for f in segs))
        return replica

    chunks = read_segments(segs, h.schema, point, files, cached=frozenset(s for _, s, _ in cached))
    try:
        replica, n = restore(make, chunks)
    finally:
        chunks.close()
    replica.cached_loaded()
    return replica, n


def _replica_of(h: CollectionHistory) -> Replica:
    """Returns an empty replica of the collection with its drops (so rows stamped at or
    after them are discarded as they are loaded)."""
    replica = Replica(h.collection_id, h.schema)
    for pid, ts in h.partition_drops.items():
        replica.drop_partition(ts, pid)
    if h.dropped_ts is not None:
        replica.drop(h.dropped_ts)
    return replica


def _insert_groups(events: list[Event]) -> list[list[Event]]:
    """Returns `events` in order, consecutive RowsInserted events of one collection grouped
    (a query node applies such a group as one run), every other event alone."""
    return inserts_grouped(events, lambda e: e.body.get("collection_id"))
