"""The commit of a bulk insert: segments its job wrote become visible at one stamped ts.

Under the collection's write guard and one stamp, each segment gets its timestamp field's
binlog (every row at the stamped ts; the job wrote a placeholder), then one SegmentImported per
vchannel goes to the dml topic in a single append. Readers apply it in ts order with the
vchannel's other events (the query node loads the rows, the data node records the segment as
Flushed on coord), so a Strong read after the commit sees every imported row. Before the append
nothing references the files: a failed or killed import leaves nothing visible.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import numpy as np

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.model import TIMESTAMP_FIELD, CollectionInfo
from vectorlog.processors.rootcoord.service import RootCoordService
from vectorlog.schemas.serde import Event, EventSerde
from vectorlog.storage import (
    DataTypeCode,
    ObjectStore,
    SegmentRef,
    SegmentWriter,
)
from vectorlog.streams.log.base import Append

log = logging.getLogger(__name__)


def imported_events(
    info: CollectionInfo,
    partition: int,
    segments: list[dict[str, Any]],
    job_id: int,
    ts: int,
    serde: EventSerde,
) -> list[Append]:
    """Returns the SegmentImported records of `segments` (ImportedSegment dicts with their
    vchannel), one per vchannel, stamped `ts`. Raises InvalidArgument for a vchannel the
    collection does not have."""
    by_vch: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for seg in segments:
        by_vch[seg["vchannel"]].append({k: v for k, v in seg.items() if k != "vchannel"})
    out = []
    for vch, segs in sorted(by_vch.items()):
        if vch not in info.vchannels:
            raise InvalidArgument(f"segment of vchannel {vch!r}: not one of {info.vchannels}")
        pch = info.pchannels[info.vchannels.index(vch)]
        body = {
            "collection_id": info.collection_id,
            "partition_id": partition,
            "job_id": job_id,
            "segments": segs,
        }
        event = Event("SegmentImported", ts, body, info.collection_id, vch)
        out.append(Append(pch, serde.encode(event), serde.vchannel_key(vch)))
    return out


def stamp_segments(
    store: ObjectStore,
    rc: RootCoordService,
    info: CollectionInfo,
    partition: int,
    segments: list[dict[str, Any]],
    ts: int,
    first_log_id: int,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Writes each segment's timestamp binlog (every row at `ts`, log ids from
    `first_log_id`); returns the segments referencing it instead of the placeholder, and the
    placeholders' paths. Raises StorageError."""
    writer = SegmentWriter(store, rc.allocate_ids, rc.now)
    out, replaced = [], []
    for i, seg in enumerate(segments):
        ref = SegmentRef(info.collection_id, partition, seg["segment_id"], seg["vchannel"])
        n = seg["num_rows"]
        tss = np.full(n, ts, dtype=np.int64)
        new = writer.write_field(
            ref, TIMESTAMP_FIELD, DataTypeCode.INT64, tss, None, first_log_id + i, (ts, ts)
        )
        fields = []
        for fb in seg["field_binlogs"]:
            if fb["field_id"] == TIMESTAMP_FIELD:
                replaced += [b["path"] for b in fb["binlogs"]]
                fb = {"field_id": TIMESTAMP_FIELD, "binlogs": [new]}
            fields.append({**fb, "binlogs": [_at(b, ts) for b in fb["binlogs"]]})
        stats = [
            {**fb, "binlogs": [_at(b, ts) for b in fb["binlogs"]]} for fb in seg["stats_binlogs"]
        ]
        out.append({**seg, "field_binlogs": fields, "stats_binlogs": stats})
    return out, replaced


def _at(binlog: dict[str, Any], ts: int) -> dict[str, Any]:
    return {**binlog, "timestamp_from": ts, "timestamp_to": ts}


def delete_quietly(store: ObjectStore, paths: list[str]) -> None:
    """Deletes `paths`, logging (not raising) what fails: a leftover file is unreferenced."""
    for path in paths:
        try:
            store.delete(path)
        except Exception as exc:
            log.warning("could not delete %s: %s", path, exc)


def all_paths(segments: list[dict[str, Any]]) -> list[str]:
    """Returns every file the segments' dicts reference."""
    return [
        b["path"]
        for seg in segments
        for fb in seg["field_binlogs"] + seg["stats_binlogs"]
        for b in fb["binlogs"]
    ]
