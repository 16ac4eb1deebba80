"""The index node's derived state: vector indexes (from ddl), Flushed segments and their binlogs
and the builds reported (from coord), stored in its StateStore with the consumed positions.

Appliers are idempotent, so an event applied again after a crash changes nothing. Each returns
what the node must do because of it (`Effects`): report an index's segment indexes dropped,
or delete a build's files. Keys:

    index/{collection}{index}      the IndexCreated body (JSON), while the index exists
    dropped/{collection}           a dropped collection (its later coord events are ignored)
    dropped-partition/{coll}{part} a dropped partition (likewise; its builds' files deleted)
    segment/{segment}              a segment with binlogs: ids, rows, flushed, binlog paths
    added/{collection}{field}      a field added by add_collection_field (its FieldSchema's
                                   Avro form): writes before the add hold no log of it
    built/{segment}{index}{build}  a SegmentIndexed body (every report, duplicates too)
    fence                          the data channel assignment (storage.channel_fence)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from vectorlog.core.model import FieldSchema
from vectorlog.processors.indexnode.files import build_files
from vectorlog.schemas.serde import Event
from vectorlog.state.base import StateStore, Transaction
from vectorlog.storage.channel_fence import ChannelFence

INDEX, DROPPED, SEGMENT, BUILT = b"index/", b"dropped/", b"segment/", b"built/"
GONE_PARTITION = b"dropped-partition/"
ADDED = b"added/"
FENCE = b"fence"
ALL_INDEXES = -1  # SegmentIndexesDropped.index_id for every index of a collection


def _ids(*ids: int) -> bytes:
    return b"".join(i.to_bytes(8, "big", signed=True) for i in ids)


def _id_at(raw: bytes, at: int) -> int:
    return int.from_bytes(raw[at : at + 8], "big", signed=True)


@dataclass
class SegmentRecord:
    """A segment with binlogs: its ids, rows so far, whether Flushed (binlogs cover all its
    rows), the coord offset of that report, and {field id: {log id: path}} of insert logs."""

    segment_id: int
    collection_id: int
    partition_id: int
    vchannel: str
    num_rows: int = 0
    flushed: bool = False
    flushed_offset: int = -1
    binlogs: dict[str, dict[str, str]] = field(default_factory=dict)

    def paths(self, field_id: int) -> list[str]:
        """Returns the insert log paths of a field in log id order (row order)."""
        logs = self.binlogs.get(str(field_id), {})
        return [logs[k] for k in sorted(logs, key=int)]


@dataclass
class Effects:
    """What applying events calls for: SegmentIndexesDropped bodies to append, index files
    to delete (index file paths of builds), and whole collection folders to delete."""

    drops: list[dict[str, int]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    folders: list[int] = field(default_factory=list)


class IndexState:
    """The state in memory, persisted through `store` with each applied record's position."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.lock = threading.RLock()
        self.indexes: dict[tuple[int, int], dict[str, Any]] = {}
        self.dropped: set[int] = set()
        self.gone_partitions: set[tuple[int, int]] = set()
        self.segments: dict[int, SegmentRecord] = {}
        self.built: dict[tuple[int, int], dict[int, dict[str, Any]]] = {}
        self.added: dict[tuple[int, int], FieldSchema] = {}  # (collection, field) -> field
        self._offset = -1  # of the record being applied
        self.fence = ChannelFence()  # data node writes of a pchannel it lost: ignored
        self._appliers: dict[str, Callable[[Event, Transaction, Effects], None]] = {
            "IndexCreated": self._index_created,
            "IndexDropped": self._index_dropped,
            "CollectionFieldAdded": self._field_added,
            "CollectionDropped": self._collection_dropped,
            "PartitionDropped": self._partition_dropped,
            "BinlogPathsSaved": self._binlogs_saved,
            "SegmentIndexed": self._indexed,
            "SegmentIndexesDropped": self._indexes_dropped,
        }
        self._load()

    def _load(self) -> None:
        for _, raw in self.store.items(INDEX):
            body = json.loads(raw)
            self.indexes[(body["collection_id"], body["index_id"])] = body
        for key, _ in self.store.items(DROPPED):
            self.dropped.add(int.from_bytes(key[len(DROPPED) :], "big", signed=True))
        for key, _ in self.store.items(GONE_PARTITION):
            raw_ids = key[len(GONE_PARTITION) :]
            self.gone_partitions.add((_id_at(raw_ids, 0), _id_at(raw_ids, 8)))
        for _, raw in self.store.items(SEGMENT):
            seg = SegmentRecord(**json.loads(raw))
            self.segments[seg.segment_id] = seg
        for _, raw in self.store.items(BUILT):
            body = json.loads(raw)
            self._remember(body)
        for _, raw in self.store.items(ADDED):
            body = json.loads(raw)
            self.added[(body["collection_id"], body["field"]["field_id"])] = FieldSchema.from_avro(
                body["field"]
            )
        fence = self.store.get(FENCE)
        if fence is not None:
            self.fence.fold(json.loads(fence))

    def position(self, topic: str) -> int:
        """Returns the offset of the next record of `topic` (partition 0) to consume."""
        return self.store.position(topic, 0) or 0

    def apply(
        self, topic: str, offset: int, event: Event | None, effect: Callable[[Effects], None]
    ) -> None:
        """Applies one record (None: one that could not be decoded), runs `effect` with what
        it calls for, then commits its changes with `offset + 1` as the topic's position in
        one write. If `effect` raises nothing is committed (the record is applied again)."""
        effects = Effects()
        with self.lock, self.store.transaction() as txn:
            self._offset = offset
            event = self.fence.admit(event) if event is not None else None
            if (
                event is not None
                and event.type == "DataChannelsAssigned"
                and (event.body.get("role") == self.fence.role)
            ):
                txn.put(FENCE, json.dumps(self.fence.to_body()).encode())
            applier = self._appliers.get(event.type) if event is not None else None
            if applier is not None and event is not None:
                applier(event, txn, effects)
            effect(effects)
            txn.set_position(topic, 0, offset + 1)

    # -- ddl -----------------------------------------------------------------------------------
    def _index_created(self, e: Event, txn: Transaction, fx: Effects) -> None:
        b = e.body
        if b["collection_id"] in self.dropped:
            return
        body = {k: v for k, v in b.items()} | {"created_ts": e.ts}
        self.indexes[(b["collection_id"], b["index_id"])] = body
        txn.put(INDEX + _ids(b["collection_id"], b["index_id"]), json.dumps(body).encode())

    def _index_dropped(self, e: Event, txn: Transaction, fx: Effects) -> None:
        cid, iid = e.body["collection_id"], e.body["index_id"]
        self.indexes.pop((cid, iid), None)
        txn.delete(INDEX + _ids(cid, iid))
        fx.drops.append({"collection_id": cid, "index_id": iid})

    def _field_added(self, e: Event, txn: Transaction, fx: Effects) -> None:
        """Records a field added to a collection (segments written before hold no log of it:
        their rows read as its default value, else null)."""
        cid, fid = e.body["collection_id"], e.body["field"]["field_id"]
        if cid in self.dropped:
            return
        self.added[(cid, fid)] = FieldSchema.from_avro(e.body["field"])
        body = {"collection_id": cid, "field": e.body["field"]}
        txn.put(ADDED + _ids(cid, fid), json.dumps(body).encode())

    def _collection_dropped(self, e: Event, txn: Transaction, fx: Effects) -> None:
        cid = e.body["collection_id"]
        self.dropped.add(cid)
        txn.put(DROPPED + _ids(cid), b"1")
        for key in [k for k in self.added if k[0] == cid]:
            del self.added[key]
            txn.delete(ADDED + _ids(*key))
        for key in [k for k in self.indexes if k[0] == cid]:
            del self.indexes[key]
            txn.delete(INDEX + _ids(*key))
        for sid in [s for s, seg in self.segments.items() if seg.collection_id == cid]:
            del self.segments[sid]
            txn.delete(SEGMENT + _ids(sid))
        fx.drops.append({"collection_id": cid, "index_id": ALL_INDEXES})

    def _partition_dropped(self, e: Event, txn: Transaction, fx: Effects) -> None:
        """Forgets the partition's segments and deletes their builds' files (query nodes
        drop the partition's segments from the broadcast PartitionDropped on dml)."""
        part = (e.body["collection_id"], e.body["partition_id"])
        self.gone_partitions.add(part)
        txn.put(GONE_PARTITION + _ids(*part), b"1")
        for sid in [
            s for s, g in self.segments.items() if (g.collection_id, g.partition_id) == part
        ]:
            self._forget_segment(sid, txn, fx)

    def _forget_segment(self, sid: int, txn: Transaction, fx: Effects) -> None:
        """Forgets a segment and has its builds' files deleted."""
        self.segments.pop(sid, None)
        txn.delete(SEGMENT + _ids(sid))
        for key in [k for k in self.built if k[0] == sid]:
            self._forget_builds(key, txn, fx)

    # -- coord ---------------------------------------------------------------------------------
    def _binlogs_saved(self, e: Event, txn: Transaction, fx: Effects) -> None:
        """Records a segment's binlogs; the segments a compaction merged into it (Dropped)
        are forgotten, their builds' files deleted."""
        b = e.body
        if b["collection_id"] in self.dropped:
            return
        for sid in b.get("compacted_from", []):
            self._forget_segment(sid, txn, fx)
        if (b["collection_id"], b["partition_id"]) in self.gone_partitions:
            return
        seg = self.segments.get(b["segment_id"])
        if seg is None:
            seg = SegmentRecord(
                b["segment_id"], b["collection_id"], b["partition_id"], b["vchannel"]
            )
            self.segments[seg.segment_id] = seg
        for fb in b["field_binlogs"]:
            logs = seg.binlogs.setdefault(str(fb["field_id"]), {})
            logs.update({str(log["log_id"]): log["path"] for log in fb["binlogs"]})
        seg.num_rows = max(seg.num_rows, b["num_rows"])
        if b["flushed"] and not seg.flushed:
            seg.flushed, seg.flushed_offset = True, self._offset
        txn.put(SEGMENT + _ids(seg.segment_id), json.dumps(asdict(seg)).encode())

    def _indexed(self, e: Event, txn: Transaction, fx: Effects) -> None:
        b = e.body
        if (b["collection_id"], b["index_id"]) not in self.indexes or b[
            "segment_id"
        ] not in self.segments:
            fx.files.append(b["index_file"])  # its index or collection was dropped meanwhile
            return
        self._remember(dict(b))
        key = BUILT + _ids(b["segment_id"], b["index_id"], b["build_id"])
        txn.put(key, json.dumps(dict(b)).encode())

    def _indexes_dropped(self, e: Event, txn: Transaction, fx: Effects) -> None:
        cid, iid = e.body["collection_id"], e.body["index_id"]
        for (sid, index_id), builds in list(self.built.items()):
            if builds and next(iter(builds.values()))["collection_id"] != cid:
                continue
            if iid in (ALL_INDEXES, index_id):
                self._forget_builds((sid, index_id), txn, fx)
        if iid == ALL_INDEXES:
            fx.folders.append(cid)

    def _forget_builds(self, key: tuple[int, int], txn: Transaction, fx: Effects) -> None:
        """Forgets every build of (segment, index) and has their files deleted."""
        for build_id, body in self.built.pop(key, {}).items():
            fx.files.append(body["index_file"])
            txn.delete(BUILT + _ids(*key, build_id))

    def _remember(self, body: dict[str, Any]) -> None:
        self.built.setdefault((body["segment_id"], body["index_id"]), {})[body["build_id"]] = body

    # -- queries -------------------------------------------------------------------------------
    def referenced(self) -> set[str]:
        """Returns every file (index, row ids, checksums) of every recorded build."""
        with self.lock:
            builds = [b for by_id in self.built.values() for b in by_id.values()]
        return {p for b in builds for p in build_files(b["index_file"], b["row_id_file"])}

    def live(self, collection_id: int, index_id: int, segment_id: int) -> bool:
        """Returns whether the index and the segment still exist."""
        with self.lock:
            return (collection_id, index_id) in self.indexes and segment_id in self.segments
