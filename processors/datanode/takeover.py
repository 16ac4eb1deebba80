"""A data node taking pchannels over from another (several data nodes, issue 24): what it
starts from when its own state store is empty.

Its start positions are the last `ChannelCheckpointed` of each pchannel coord accepted (the
previous owner's; storage.channel_fence drops a fenced one), its collections come from
rootcoord's meta, and its primary-key index (each key's newest row, for deletes and upserts)
is read back from the binlogs coord references: every insert binlog's keys and timestamps,
less the keys a later delete in a delta log removed. Rows and deletes the dml replay from the
checkpoint brings again are recognised as in binlogs already (their segment's written tick),
so nothing is written twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.model import TIMESTAMP_FIELD, CollectionHistory, CollectionSchema
from vectorlog.processors.datanode.pkindex import Entry
from vectorlog.storage.binlog_read import int64s, read_insert_binlog
from vectorlog.storage.channel_fence import Writer
from vectorlog.storage.column_read import field_values, read_delta_binlog
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.storage.segment_views import SegmentView


@dataclass(frozen=True)
class Owned:
    """The pchannels one of several data nodes writes, and its registration (the `writer`
    of its coord events); `histories()` is rootcoord's collection_histories."""

    pchannels: frozenset[int]
    writer: Writer
    histories: Callable[[], list[CollectionHistory]]


def insert_logs(view: SegmentView, field_id: int) -> dict[int, str]:
    """Returns a segment's insert binlogs of one field, by log id (each write's log ids
    are allocated apart from the other writes', so the n-th of each field go together)."""
    out = {}
    for path in view.paths:
        parts = path.split("/")  # insert_log/coll/part/seg/field/log
        if len(parts) == 6 and parts[0] == "insert_log" and parts[4] == str(field_id):
            out[int(parts[5])] = path
    return out


def segment_rows(
    objects: ObjectStore, view: SegmentView, schema: CollectionSchema
) -> list[tuple[Any, int]]:
    """Returns (key, ts) of every row in a segment's insert binlogs. Raises CorruptBinlog,
    ObjectNotFound."""
    pk = schema.primary
    keys, stamps = insert_logs(view, pk.field_id), insert_logs(view, TIMESTAMP_FIELD)
    rows: list[tuple[Any, int]] = []
    # the i-th binlog of each field is the i-th write's (log ids grow with every write)
    pairs = zip(sorted(keys.items()), sorted(stamps.items()), strict=True)
    for (_, kp), (_, tp) in pairs:
        values = field_values(read_insert_binlog(objects.get(kp), kp), pk.dtype, None, kp)
        ts = int64s(read_insert_binlog(objects.get(tp), tp), tp)
        got = values.tolist() if isinstance(values, np.ndarray) else list(values)
        rows += zip(got, ts.tolist(), strict=True)
    return rows


def rebuild_index(
    objects: ObjectStore,
    views: list[SegmentView],
    schemas: dict[int, CollectionSchema],
) -> dict[str, dict[Any, Entry]]:
    """Returns, per vchannel, each key's newest row among `views`' binlogs (segments merged
    by a compaction left out), without the keys a later delete in a delta log removed."""
    index: dict[str, dict[Any, Entry]] = {}
    live = [v for v in views if not v.dropped and v.collection_id in schemas]
    for view in live:
        newest = index.setdefault(view.vchannel, {})
        for pk, ts in segment_rows(objects, view, schemas[view.collection_id]):
            if pk not in newest or newest[pk][1] < ts:
                newest[pk] = (view.segment_id, ts)
    for view in live:
        newest = index[view.vchannel]
        for path in view.delta_paths:
            pks, tss = read_delta_binlog(objects.get(path), path)
            for pk, ts in zip(pks, tss.tolist(), strict=True):
                if pk in newest and newest[pk][1] < ts:
                    del newest[pk]
    return index
