"""The data node's side of a compaction (SegmentsCompacted on dml, vectorlog/storage/merge.py):
the merged segments' keys pointed at the new segment, their deletes the job did not read
carried into its delta buffer, and their files deleted once no replay brings the compaction
again."""

from __future__ import annotations

import logging
from typing import Any

from vectorlog.processors.datanode.pkindex import Entry
from vectorlog.storage.buffers import DeltaBuffer
from vectorlog.storage.column_read import read_delta_binlog
from vectorlog.storage.objectstore import ObjectStore
from vectorlog.storage.segment_views import SegmentViews
from vectorlog.streams.msgstream import StreamPosition

log = logging.getLogger(__name__)

#: (pchannel, offset, paths): files of segments a compaction at that dml position merged
Retired = tuple[int, int, list[str]]


def repoint(
    newest: dict[Any, Entry], olds: set[int], new: int
) -> tuple[list[Any], list[Entry | None]]:
    """Points every key whose newest row is in `olds` at segment `new` (same ts). Returns
    the keys moved and their entries before."""
    moved = [pk for pk, (sid, _) in newest.items() if sid in olds]
    prevs: list[Entry | None] = [newest[pk] for pk in moved]
    for pk, prev in zip(moved, prevs, strict=True):
        newest[pk] = (new, prev[1] if prev else 0)
    return moved, prevs


def carry_deltas(
    deltas: dict[int, DeltaBuffer],
    views: SegmentViews,
    objects: ObjectStore,
    olds: set[int],
    new: int,
    consumed: set[str],
    before: StreamPosition,
    replay: bool = False,
) -> None:
    """Moves the merged segments' buffered deletes, and the records of their delta logs
    the job did not read, into segment `new`'s delta buffer (in `deltas`). On a `replay`
    (the new segment already Flushed), a delta log no longer stored is skipped: it was
    deleted by `delete_retired`, only once the checkpoint passed this compaction, which the
    deletes carried from it held back until they were flushed into the new segment's own
    delta logs (a data node with fresh state replays the compaction from further back)."""
    carried = [deltas.pop(sid) for sid in sorted(olds) if sid in deltas]
    extra = [p for sid in sorted(olds) for p in views.get(sid).delta_paths if p not in consumed]
    if replay:
        extra = [p for p in extra if objects.exists(p)]
    if not carried and not extra:
        return
    start = min([before, *(d.start for d in carried)], key=lambda pos: pos.offset)
    buf = deltas.get(new) or DeltaBuffer(start)
    buf.start = min(buf.start, start, key=lambda pos: pos.offset)
    for d in carried:
        for pk, ts in zip(d.pks, d.tss, strict=True):
            buf.add(pk, ts)
    for path in extra:
        pks, tss = read_delta_binlog(objects.get(path), path)
        for pk, ts in zip(pks, tss.tolist(), strict=True):
            buf.add(pk, ts)
    deltas[new] = buf


def delete_retired(
    objects: ObjectStore, retired: list[Retired], committed: dict[int, StreamPosition]
) -> list[Retired]:
    """Deletes the files of merged segments whose compaction no replay from the `committed`
    checkpoint brings again. Returns the retired entries still to delete."""
    done = [r for r in retired if r[1] < committed.get(r[0], StreamPosition()).offset]
    for _, _, paths in done:
        for path in paths:
            try:
                objects.delete(path)
            except Exception as exc:  # left behind, never read again
                log.warning("could not delete %s of a merged segment: %s", path, exc)
    return [r for r in retired if r not in done]
