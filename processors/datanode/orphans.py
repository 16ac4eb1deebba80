"""A data node's recovery cleanup: binlog files no BinlogPathsSaved references (a write that
crashed before reporting them) are deleted, for the segments of the pchannels it writes."""

from __future__ import annotations

import logging

from vectorlog.processors.datanode.takeover import Owned
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.storage.segment_views import SegmentViews

log = logging.getLogger(__name__)

LOG_KINDS = ("insert_log", "delta_log", "stats_log", "data_definition_log")


def delete_orphans(
    objects: ObjectStore, views: SegmentViews, owned: Owned | None, pchannel_of: dict[str, int]
) -> None:
    """Deletes the files, under the collections it knows, that no BinlogPathsSaved
    references (written by a write that crashed before reporting them): one listing per
    collection and kind of log, not per segment. Files of segments coord never named are
    left: a bulk insert's, which its SegmentImported on dml (maybe not yet applied) may
    reference. `owned`: the pchannels of one of several data nodes (None: all of them)."""
    referenced = views.referenced()
    collections = {seg.collection_id for seg in views.by_id.values() if seg.collection_id}
    for cid in sorted(collections):
        for kind in LOG_KINDS:
            for path in objects.list(f"{kind}/{cid}/"):
                if path not in referenced and of_my_segment(views, owned, pchannel_of, kind, path):
                    log.info("deleting orphaned binlog %s", path)
                    objects.delete(path)


def of_my_segment(
    views: SegmentViews, owned: Owned | None, pchannel_of: dict[str, int], kind: str, path: str
) -> bool:
    """Whether a file lies under a segment coord named (DDL binlogs: always), of a
    pchannel this node writes (another data node may be writing the others')."""
    if kind == "data_definition_log":
        return owned is None
    parts = path.split("/")  # kind/coll/part/seg/...
    if len(parts) <= 3 or not parts[3].isdigit() or int(parts[3]) not in views.by_id:
        return False
    vch = views.by_id[int(parts[3])].vchannel
    return owned is None or pchannel_of.get(vch) in owned.pchannels
