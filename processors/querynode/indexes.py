"""Which segment indexes the query node serves: it follows the coord topic from offset 0 (it
keeps no durable state, so a restart replays it) for SegmentIndexed and SegmentIndexesDropped
(and for segments sealed and flushed, whose vectors the segment cache keeps: `on_sealed`,
`on_flushed`).

A SegmentIndexed is pending until its files are read and every row of the index has been
applied by the replica (the coord topic can run ahead of the dml one); it is retried after
each applied dml pack. SegmentIndexesDropped unloads (segments go back to exact search) and
forgets pending ones. A compaction's merged segment whose rows wait for its index (handoff.py)
takes them as its index loads; an index of a segment merged away has nothing left to load.
Undecodable coord records are skipped here: DataCoord, which owns the coord topic,
dead-letters them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from vectorlog.core.sparse import SPARSE_INDEXES
from vectorlog.core.types import BINARY_INDEXES
from vectorlog.processors.querynode.binarycolumn import BinarySegmentIndex, read_binary_index
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.scalarindex import ScalarFile, read_scalar_index
from vectorlog.processors.querynode.sealed import IndexFiles, SegmentIndex, read_index
from vectorlog.processors.querynode.sparsecolumn import SparseSegmentIndex, read_sparse_index
from vectorlog.runtime.loop import ProcessorBase, ProcessorLoop
from vectorlog.runtime.sources import RecordSource
from vectorlog.schemas.serde import EventSerde
from vectorlog.storage.channel_fence import ChannelFence
from vectorlog.streams.log.base import Log
from vectorlog.streams.snapshots import Blobs, resume_fence, stand_in

log = logging.getLogger(__name__)

MAX_READ_ATTEMPTS = 3  # a load whose files cannot be read this many times is given up
BATCH = 1000
FLUSHED_RETRIES = 200  # dml packs a Flushed segment's rows may take to be applied here

#: collection id -> its replica; None while unknown yet; raises KeyError once freed
ReplicaOf = Callable[[int], Replica | None]
#: (replica, partition, segment, rows) of a segment Flushed: True once done with, False: retry
OnFlushed = Callable[[Replica, int, int, int], bool]
#: (replica, partition, segment, its pchannel, seal ts) of a segment Sealed: the same
OnSealed = Callable[[Replica, int, int, int, int], bool]


class Pending:
    """A SegmentIndexed not yet served: its event body and, once read, its index."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.index: SegmentIndex | SparseSegmentIndex | BinarySegmentIndex | None = None
        self.scalar: ScalarFile | None = None
        self.failures = 0


class IndexLoader(ProcessorBase):
    """Consumes the coord topic on its own thread and loads segment indexes into replicas."""

    name = "querynode-indexes"

    def __init__(
        self,
        log_: Log,
        topic: str,
        serde: EventSerde,
        files: IndexFiles,
        replica_of: ReplicaOf,
        snapshots: Blobs | None = None,
        on_flushed: OnFlushed | None = None,
        on_sealed: OnSealed | None = None,
    ) -> None:
        self._log, self._topic, self._serde, self._files = log_, topic, serde, files
        self._snapshots = snapshots
        self._replica_of = replica_of
        self._on_flushed, self._on_sealed = on_flushed, on_sealed
        #: by (collection, partition, segment, field, index id): a field may have several
        #: indexes (a JSON field, one per path), a segment one per field
        self.pending: dict[tuple[int, int, int, int, int], Pending] = {}
        #: the same -> [rows, retries left], for on_flushed
        self.flushed: dict[tuple[int, int, int], list[int]] = {}
        #: the same -> [seal ts, its pchannel, retries left], for on_sealed
        self.sealed: dict[tuple[int, int, int], list[int]] = {}
        #: segment id -> (collection, partition, pchannel) of the segments opened on the
        #: pchannels it serves, while on_sealed may want them
        self._opened: dict[int, tuple[int, int, int]] = {}
        #: (collection, partition, segment) -> the segment a compaction merged it into
        self._merged_into: dict[tuple[int, int, int], int] = {}
        self.applied = threading.Event()  # set by the dml side after each applied pack
        self.offset = 0  # the next coord offset to read
        #: the dml pchannels whose segments' indexes it loads (None: every one)
        self.pchannels: frozenset[int] | None = None
        self._foreign: set[int] = set()  # segments of other pchannels
        self._fence = ChannelFence()  # data node writes of a pchannel it lost: ignored
        self._snapshot_read = False
        self._source = RecordSource(
            log_, lambda: {self._topic: {0: self.offset}}, resume_fence(log_, snapshots)
        )
        self._loop = ProcessorLoop(self, join_timeout_s=10)

    def start(self) -> None:
        """Starts following coord on the shared loop."""
        self._loop.start()

    def stop_soon(self) -> None:
        self._loop.stop_soon()

    def stop(self) -> None:
        self._loop.stop()

    # -- a Processor on the shared loop (no durable state: it starts from coord's start) ----
    def open(self) -> None:
        """Reads coord from the last offset read; at the first open, from the topic's start,
        after the snapshot that stands in for the records below (deleted by retention, or
        folded into a newer snapshot on Kafka: streams.snapshots.stand_in)."""
        if not self._snapshot_read:
            records, start = stand_in(self._log, self._topic, self._snapshots, self.offset)
            self.apply_records(records)
            self.offset, self._snapshot_read = max(self.offset, start), True
        self._source.open()

    def step(self) -> bool:
        records = self._source.poll(self._topic, BATCH, timeout=self._loop.idle_wait_s)
        self.apply_records(records)
        return bool(records)

    def reset(self) -> None:
        self._source.reset()

    def served(self, collection_id: int, upto: int) -> bool:
        """Returns whether every segment index of the collection on coord below offset `upto`
        is served (or given up on): read that far, none of them pending but those of a
        compaction's merged segment that serves nothing yet (its rows wait for its vector
        index in the compacted-from segments, which serve them: handoff.py), as Milvus's
        load waits for the segments its query nodes serve."""
        if self.offset < upto:
            return False
        keys = [k for k in list(self.pending) if k[0] == collection_id]  # one copy in C
        if not keys:
            return True
        try:
            replica = self._replica_of(collection_id)
        except KeyError:
            return True  # the collection was freed
        return replica is not None and all(replica.awaits_handoff(k[1], k[2]) for k in keys)

    def apply_records(self, records: list[Any]) -> None:
        """Applies coord `records`, then retries the pending loads if the dml side applied
        something since (or records came)."""
        for rec in records:
            try:
                self._consume(rec.value)
            except Exception as exc:  # a body this node cannot use: skipped, never retried
                log.warning("query node skips coord record %d: %s", rec.offset, exc)
            self.offset = rec.offset + 1
        waiting = self.pending or self.flushed or self.sealed
        if waiting and len(records) < BATCH and (records or self.applied.is_set()):
            self.applied.clear()
            self.retry()

    def _consume(self, value: bytes) -> None:
        try:
            event = self._serde.decode(value)
        except Exception as exc:
            log.info("query node skips an undecodable coord record: %s", exc)
            return
        admitted = self._fence.admit(event)
        if admitted is None:
            return
        event, body = admitted, admitted.body
        if event.type == "SegmentOpened" and self.pchannels is not None:
            if body["pchannel"] not in self.pchannels:
                self._foreign.add(body["segment_id"])
        elif event.type == "SegmentIndexed" and body["segment_id"] in self._foreign:
            return  # another query node serves its pchannel
        if event.type in ("SegmentOpened", "SegmentsSealed", "BinlogPathsSaved"):
            self._seals(event.type, event.ts, body)
        if event.type == "BinlogPathsSaved":
            for sid in body.get("compacted_from") or []:
                self._merged_into[body["collection_id"], body["partition_id"], sid] = body[
                    "segment_id"
                ]
        if event.type == "SegmentIndexed":
            at = (*_index_key(body), body["index_id"])
            if at not in self.pending:
                self.pending[at] = Pending(body)
        elif event.type == "SegmentIndexesDropped":
            self._dropped(body["collection_id"], body["index_id"])
        elif event.type == "BinlogPathsSaved" and _cached(body, self._on_flushed):
            key = (body["collection_id"], body["partition_id"], body["segment_id"])
            self.flushed[key] = [body["num_rows"], FLUSHED_RETRIES]

    def _seals(self, kind: str, ts: int, body: dict[str, Any]) -> None:
        """Follows the segments of its pchannels from opened to sealed (then on_sealed
        writes their cache entries) to flushed (forgotten)."""
        if self._on_sealed is None:
            return
        if kind == "SegmentOpened" and body["segment_id"] not in self._foreign:
            at = (body["collection_id"], body["partition_id"], body["pchannel"])
            self._opened[body["segment_id"]] = at
        elif kind == "SegmentsSealed":
            for sid in body["segment_ids"]:
                if sid in self._opened:
                    cid, pid, pchannel = self._opened[sid]
                    self.sealed[(cid, pid, sid)] = [ts, pchannel, FLUSHED_RETRIES]
        elif kind == "BinlogPathsSaved" and body["flushed"]:  # on_flushed writes it now
            self._opened.pop(body["segment_id"], None)
            self.sealed.pop((body["collection_id"], body["partition_id"], body["segment_id"]), None)

    def _dropped(self, cid: int, index_id: int) -> None:
        for key, p in list(self.pending.items()):
            if key[0] == cid and index_id in (-1, p.body["index_id"]):
                del self.pending[key]
        try:
            replica = self._replica_of(cid)
        except KeyError:
            return
        if replica is not None:
            replica.unload_indexes(index_id)

    def retry(self) -> None:
        """Tries every pending load once, vector indexes before scalar ones: done ones (or
        hopeless ones) are forgotten. The segments sealed and flushed go first: a loaded
        index may free the vectors they keep."""
        for key, seal in list(self.sealed.items()):
            if self._loop.stopping.is_set():
                return
            seal[2] -= 1
            if self._sealed(key, seal[0], seal[1]) or not seal[2]:
                del self.sealed[key]  # written, or its rows never came (merged, dropped)
        for key, left in list(self.flushed.items()):
            if self._loop.stopping.is_set():
                return
            left[1] -= 1
            if self._flushed(key, left[0]) or not left[1]:
                del self.flushed[key]  # done, or its rows never came (merged, dropped)
        # vector indexes first: a merged segment's scalar index loads once its rows moved to
        # it, which its vector index's load does (handoff.py)
        for at, p in sorted(self.pending.items(), key=lambda kv: not kv[1].body["metric_type"]):
            if self._loop.stopping.is_set():
                return
            if self._attempt(p):
                del self.pending[at]

    def _flushed(self, key: tuple[int, int, int], rows: int) -> bool:
        return self._tell(key, self._on_flushed, rows)

    def _sealed(self, key: tuple[int, int, int], seal_ts: int, pchannel: int) -> bool:
        return self._tell(key, self._on_sealed, pchannel, seal_ts)

    def _tell(
        self, key: tuple[int, int, int], hook: Callable[..., bool] | None, *args: int
    ) -> bool:
        """Calls `hook(replica, partition, segment, *args)` for the segment `key` names;
        returns its answer (False: retry later), True when there is nothing to tell (no hook,
        or the collection was freed), False while its replica is not there yet."""
        try:
            replica = self._replica_of(key[0])
        except KeyError:
            return True  # the collection was freed
        if replica is None or hook is None:
            return hook is None
        return hook(replica, key[1], key[2], *args)

    def _attempt(self, p: Pending) -> bool:
        """Returns whether `p` is finished with: loaded, or never loadable (its files could
        not be read or it could not be loaded MAX_READ_ATTEMPTS times)."""
        try:
            return self._load(p)
        except Exception as exc:
            p.failures += 1
            log.warning("query node cannot load index %s: %s", p.body["index_file"], exc)
            return p.failures >= MAX_READ_ATTEMPTS

    def _load(self, p: Pending) -> bool:
        try:
            replica = self._replica_of(p.body["collection_id"])
        except KeyError:
            return True  # the collection was freed
        if replica is None:
            return False
        b = p.body
        if replica.dropped_ts is not None or b["partition_id"] in replica.dropped_partitions:
            return True  # nothing to serve: its files may be deleted already
        field = b["field_id"] if b["metric_type"] else None  # a scalar index: the first's
        if self._superseded(
            replica, (b["collection_id"], b["partition_id"], b["segment_id"]), field
        ):
            return True  # merged away before this node's checkpoint: its files may be gone
        if not b["metric_type"]:  # a scalar index: filters use it
            if p.scalar is None:
                p.scalar = read_scalar_index(b, self._files)
            return replica.load_scalar_index(b["partition_id"], b["segment_id"], p.scalar)
        at = (b["partition_id"], b["segment_id"], b["field_id"])
        if replica.serving(*at) == b["index_id"]:
            return True  # a repeated SegmentIndexed: already loaded
        if p.index is None:
            p.index = _reader(b["index_type"])(p.body, self._files)
        return replica.load_index(at[0], at[1], p.index, at[2])

    def _superseded(
        self, replica: Replica, key: tuple[int, int, int], field_id: int | None
    ) -> bool:
        """Returns whether segment `key` (collection, partition, segment) was merged away
        (coord says so) and the replica holds none of its rows in vector field `field_id`
        (None: the first) but those of a segment it was merged into: a restart past the
        compaction loaded the merged segment from its binlogs, and never the compacted-from
        ones, whose indexes have nothing to serve (they would stay pending: a load would
        wait for them until its timeout)."""
        cid, pid, sid = key
        into = self._merged_into.get(key)
        if into is None or replica.holds_segment(pid, sid, field_id):
            return False
        seen = {sid}
        while into is not None and into not in seen:
            if replica.holds_segment(pid, into, field_id):
                return True
            seen.add(into)
            into = self._merged_into.get((cid, pid, into))
        return False


def _reader(index_type: str) -> Any:
    """Returns the reader of an index type's files: sparse, binary or faiss."""
    if index_type in SPARSE_INDEXES:
        return read_sparse_index
    if index_type in BINARY_INDEXES:
        return read_binary_index
    return read_index


def _index_key(body: dict[str, Any]) -> tuple[int, int, int, int]:
    """Returns the (collection, partition, segment, vector field) a SegmentIndexed is for."""
    b = body
    return (b["collection_id"], b["partition_id"], b["segment_id"], b["field_id"])


def _cached(body: dict[str, Any], on_flushed: OnFlushed | None) -> bool:
    """Whether a BinlogPathsSaved makes a segment the cache keeps: flushed, neither merged
    nor imported (those the cache leaves out), with a cache to keep it."""
    return on_flushed is not None and body["flushed"] and not body["imported"]
