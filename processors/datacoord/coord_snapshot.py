"""Snapshots of the coord topic (issue 10): its events folded into the fewest that rebuild every
consumer's state (datacoord's segments and ticks, the data node's segment views, the query
node's recovery point and index loads, the index node's segments and builds), written under
the storage root by `streams.snapshots.TopicSnapshotter` so the records below may be
deleted.

Per segment, in id order (a compaction's merged segments before the one they became): its
SegmentOpened, SegmentsSealed, SegmentsFlushStarted, one BinlogPathsSaved holding every
binlog written (each log id once, in log id order: the writes' order), SegmentFlushed. Then
each vchannel's newest DataNodeTicked, every live index build (SegmentIndexed; dropped ones
left out), the newest ChannelCheckpointed, and last the newest DataChannelsAssigned of each role
(data node writes it fenced are left out; those kept lose their writer: they were
accepted). For the followers of the assignments (issue 23), last: the newest
QueryChannelsAssigned, each collection's newest QueryReplicasConfigured, and each node's newest
heartbeat (QueryNodeReported; DataNodeReported per role) of its newest epoch, after the
assignments so that a heartbeat of a registration declared dead stays ignored. Then each job's
newest JobRecorded (the cluster mode's bulk inserts and compactions; the newest MAX_JOBS), and
the newest ClusterIdentityRecorded (the storage root's identity, runners.identity).
Allocations (SegmentsAllocated) are left out:
they expire within seconds. Every consumer's appliers are idempotent and monotone, so the
snapshot then the records after it give the state the whole topic gives.
"""

from __future__ import annotations

from typing import Any

from vectorlog.schemas.serde import Event
from vectorlog.storage.channel_fence import ChannelFence

ALL_INDEXES = -1  # SegmentIndexesDropped.index_id: every index of the collection
STEPS = ("opened", "sealed", "flushing", "saved", "flushed")
#: jobs whose newest JobRecorded a snapshot keeps (the oldest are forgotten first)
MAX_JOBS = 1000


class CoordFold:
    """Coord events folded into a snapshot's events."""

    def __init__(self) -> None:
        self.segments: dict[int, dict[str, Event]] = {}
        self.ticks: dict[str, Event] = {}
        self.builds: dict[tuple[int, int, int], Event] = {}  # (segment, index, build)
        self.checkpoints: dict[int, dict[str, Any]] = {}  # pchannel -> position
        self.checkpoint_ts = 0
        self.fence = ChannelFence()
        self.assigned: dict[str, Event] = {}  # role -> its newest DataChannelsAssigned
        self.query_assigned: Event | None = None  # the newest QueryChannelsAssigned
        self.replicas: dict[int, Event] = {}  # collection -> its newest QueryReplicasConfigured
        self.heartbeats: dict[tuple[str, str, str], Event] = {}  # (type, role, node) -> newest
        self.jobs: dict[int, Event] = {}  # job id -> its newest JobRecorded, oldest job first
        self.identity: Event | None = None  # the newest ClusterIdentityRecorded

    def apply(self, event: Event) -> None:
        """Folds one event in (types that do not belong on coord, and fenced data node
        writes, are ignored)."""
        admitted = self.fence.admit(event)
        if admitted is None:
            return
        if admitted.type == "DataChannelsAssigned":
            role = admitted.body.get("role", "datanode")
            prev = self.assigned.get(role)
            if prev is None or prev.body["version"] <= admitted.body["version"]:
                self.assigned[role] = admitted
        elif "writer" in admitted.body:
            admitted = Event(
                admitted.type,
                admitted.ts,
                {**admitted.body, "writer": None},
                admitted.collection_id,
                admitted.vchannel,
            )
        handler = getattr(self, "_" + admitted.type, None)
        if handler is not None:
            handler(admitted)

    def events(self) -> list[Event]:
        """Returns the snapshot's events, in the order they are to be applied."""
        out = [seg[s] for _, seg in sorted(self.segments.items()) for s in STEPS if s in seg]
        out += [self.ticks[v] for v in sorted(self.ticks)]
        out += [self.builds[k] for k in sorted(self.builds)]
        if self.checkpoints:
            positions = [self.checkpoints[p] for p in sorted(self.checkpoints)]
            out.append(Event("ChannelCheckpointed", self.checkpoint_ts, {"positions": positions}))
        out += [self.assigned[role] for role in sorted(self.assigned)]
        out += [self.query_assigned] if self.query_assigned is not None else []
        out += [self.replicas[c] for c in sorted(self.replicas)]
        out += [self.heartbeats[k] for k in sorted(self.heartbeats)]
        out += list(self.jobs.values())
        out += [self.identity] if self.identity is not None else []
        return out

    def _seg(self, sid: int) -> dict[str, Event]:
        return self.segments.setdefault(sid, {})

    def _SegmentOpened(self, e: Event) -> None:  # noqa: N802 (event type names)
        self._seg(e.body["segment_id"]).setdefault("opened", e)

    def _SegmentsSealed(self, e: Event) -> None:  # noqa: N802
        for sid in e.body["segment_ids"]:
            body = {"segment_ids": [sid], "reason": e.body["reason"]}
            self._seg(sid).setdefault("sealed", Event(e.type, e.ts, body))

    def _SegmentsFlushStarted(self, e: Event) -> None:  # noqa: N802
        for sid in e.body["segment_ids"]:
            self._seg(sid).setdefault("flushing", Event(e.type, e.ts, {"segment_ids": [sid]}))

    def _SegmentFlushed(self, e: Event) -> None:  # noqa: N802
        self._seg(e.body["segment_id"]).setdefault("flushed", e)

    def _DataNodeTicked(self, e: Event) -> None:  # noqa: N802
        vch, prev = e.body["vchannel"], self.ticks.get(e.body["vchannel"])
        rows = {r["segment_id"]: r["num_rows"] for r in prev.body["segments"]} if prev else {}
        for r in e.body["segments"]:
            rows[r["segment_id"]] = max(rows.get(r["segment_id"], 0), r["num_rows"])
        tick = max(e.body["tick"], prev.body["tick"] if prev else 0)
        segments = [{"segment_id": s, "num_rows": n} for s, n in sorted(rows.items())]
        body = {"vchannel": vch, "tick": tick, "segments": segments}
        self.ticks[vch] = Event(e.type, max(e.ts, prev.ts if prev else 0), body)

    def _BinlogPathsSaved(self, e: Event) -> None:  # noqa: N802
        seg = self._seg(e.body["segment_id"])
        prev = seg.get("saved")
        body = e.body if prev is None else merged_saved(prev.body, e.body)
        ts = e.ts if prev is None else prev.ts  # an import's segment is opened at its first
        seg["saved"] = Event(e.type, ts, body, e.collection_id, e.vchannel)

    def _ChannelCheckpointed(self, e: Event) -> None:  # noqa: N802
        for p in e.body["positions"]:
            self.checkpoints[p["pchannel"]] = p
        self.checkpoint_ts = max(self.checkpoint_ts, e.ts)

    def _QueryChannelsAssigned(self, e: Event) -> None:  # noqa: N802
        prev = self.query_assigned
        if prev is None or prev.body["version"] <= e.body["version"]:
            self.query_assigned = e

    def _QueryReplicasConfigured(self, e: Event) -> None:  # noqa: N802
        self.replicas[e.body["collection_id"]] = e

    def _QueryNodeReported(self, e: Event) -> None:  # noqa: N802
        self._heartbeat(("query", "querynode", str(e.body["node"])), e)

    def _DataNodeReported(self, e: Event) -> None:  # noqa: N802
        role = str(e.body.get("role", "datanode"))
        self._heartbeat(("data", role, str(e.body["node"])), e)

    def _heartbeat(self, key: tuple[str, str, str], e: Event) -> None:
        """Keeps `e` unless the node's kept heartbeat is of a newer epoch."""
        prev = self.heartbeats.get(key)
        if prev is None or int(prev.body["epoch"]) <= int(e.body["epoch"]):
            self.heartbeats[key] = e

    def _JobRecorded(self, e: Event) -> None:  # noqa: N802
        self.jobs[e.body["job_id"]] = e  # a job keeps its place: its first record's
        while len(self.jobs) > MAX_JOBS:
            del self.jobs[next(iter(self.jobs))]

    def _ClusterIdentityRecorded(self, e: Event) -> None:  # noqa: N802
        self.identity = e

    def _SegmentIndexed(self, e: Event) -> None:  # noqa: N802
        b = e.body
        self.builds[(b["segment_id"], b["index_id"], b["build_id"])] = e

    def _SegmentIndexesDropped(self, e: Event) -> None:  # noqa: N802
        cid, iid = e.body["collection_id"], e.body["index_id"]
        for key, build in list(self.builds.items()):
            if build.body["collection_id"] == cid and iid in (ALL_INDEXES, key[1]):
                del self.builds[key]


def merged_saved(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Returns one BinlogPathsSaved body holding the binlogs of both (each log id once, by log
    id), the later end position, and the flags and merged segments of either."""
    out = dict(b)
    for kind in ("field_binlogs", "stats_binlogs"):
        fields: dict[int, dict[int, dict]] = {}
        for fb in a[kind] + b[kind]:
            fields.setdefault(fb["field_id"], {}).update({x["log_id"]: x for x in fb["binlogs"]})
        out[kind] = [
            {"field_id": fid, "binlogs": [logs[i] for i in sorted(logs)]}
            for fid, logs in sorted(fields.items())
        ]
    for kind in ("delta_binlogs", "ddl_binlogs"):
        logs = {x["log_id"]: x for x in a.get(kind, []) + b.get(kind, [])}
        out[kind] = [logs[i] for i in sorted(logs)]
    out["num_rows"] = max(a["num_rows"], b["num_rows"])
    out["start_position"] = a.get("start_position") or b.get("start_position")
    out["end_position"] = b.get("end_position") or a.get("end_position")
    out["flushed"] = a["flushed"] or b["flushed"]
    out["imported"] = a.get("imported", False) or b.get("imported", False)
    merged = set(a.get("compacted_from", [])) | set(b.get("compacted_from", []))
    out["compacted_from"] = sorted(merged)
    return out
