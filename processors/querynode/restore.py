"""Loading segments read from binlogs into a replica as if their events had been applied.

Rows and deletes are applied in ts order across every segment of the collection (deletes
before inserts at one ts: a delete at d hides rows inserted before d), so upserts and deletes
end each version's visibility exactly as the live node did. When no key repeats and nothing
was deleted (the bulk case), each segment goes in one call instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vectorlog.processors.querynode.recovery import SegmentRows
from vectorlog.processors.querynode.replica import Replica

INSERT, DELETE = 1, 0  # at one ts, deletes go first

Step = tuple[int, int, int, int, int]  # ts, kind, segment index, first, end


def restore(replica: Replica, segments: list[SegmentRows]) -> int:
    """Loads `segments` into `replica` (which holds no row of their keys yet), discarding
    rows stamped at or after the drop of their partition or collection. Returns the rows
    loaded."""
    segments = [_in_ts_order(_undropped(replica, s)) for s in segments]
    keys = [_keys(s, replica.pk_name) for s in segments]
    if _independent(segments, keys):
        for s, pks in zip(segments, keys, strict=True):
            if len(s):
                replica.load_rows(
                    s.ts, s.partition_id, s.segment_id, s.row_ids, pks, s.columns, s.vectors
                )
        return sum(len(s) for s in segments)
    deletes = [np.argsort(s.delete_ts, kind="stable") for s in segments]
    for ts, kind, i, first, end in sorted(_steps(segments)):
        s = segments[i]
        if kind == DELETE:
            replica.delete(
                ts, [s.delete_pks[j] for j in deletes[i][first:end].tolist()], s.partition_id
            )
        else:
            at = slice(first, end)
            columns = {name: values[at] for name, values in s.columns.items()}
            replica.load_rows(
                ts, s.partition_id, s.segment_id, s.row_ids[at], keys[i][at], columns, s.vectors[at]
            )
    return sum(len(s) for s in segments)


def _undropped(replica: Replica, s: SegmentRows) -> SegmentRows:
    """Returns `s` without rows stamped at or after its partition's or collection's drop."""
    drops = (replica.dropped_ts, replica.dropped_partitions.get(s.partition_id))
    until = min((t for t in drops if t is not None), default=None)
    if until is None or not len(s) or int(s.ts.max()) < until:
        return s
    return _subset(s, np.flatnonzero(s.ts < np.uint64(until)))


def _in_ts_order(s: SegmentRows) -> SegmentRows:
    """Returns `s` with its rows in ts order (binlogs keep the order rows were applied in,
    which is it: this only guards against a file that does not)."""
    if not len(s) or not (np.diff(s.ts.astype(np.int64)) < 0).any():
        return s
    return _subset(s, np.argsort(s.ts, kind="stable"))


def _subset(s: SegmentRows, keep: np.ndarray) -> SegmentRows:
    """Returns the rows `keep` of `s` (its deletes unchanged)."""
    columns = {name: _take(values, keep) for name, values in s.columns.items()}
    return SegmentRows(
        s.segment_id,
        s.partition_id,
        s.row_ids[keep],
        s.ts[keep],
        columns,
        s.vectors[keep],
        s.delete_pks,
        s.delete_ts,
    )


def _independent(segments: list[SegmentRows], keys: list[list[Any]]) -> bool:
    """Whether no segment has a delete and no key appears twice among all rows."""
    if any(len(s.delete_ts) for s in segments):
        return False
    total = sum(len(k) for k in keys)
    return len(set().union(*keys)) == total if keys else True


def _steps(segments: list[SegmentRows]) -> list[Step]:
    """Returns the runs of rows (and of deletes) sharing one ts, per segment."""
    steps: list[Step] = []
    for i, s in enumerate(segments):
        steps += [(ts, INSERT, i, a, b) for ts, a, b in _runs(s.ts)]
        delete_ts = np.sort(s.delete_ts, kind="stable")
        steps += [(ts, DELETE, i, a, b) for ts, a, b in _runs(delete_ts)]
    return steps


def _runs(ts: np.ndarray) -> list[tuple[int, int, int]]:
    """Returns (ts, first, end) of each run of equal values in the ascending `ts`."""
    if not len(ts):
        return []
    starts = np.concatenate(([0], np.flatnonzero(np.diff(ts)) + 1))
    ends = np.append(starts[1:], len(ts))
    return list(zip(ts[starts].tolist(), starts.tolist(), ends.tolist(), strict=True))


def _keys(s: SegmentRows, pk_name: str) -> list[Any]:
    """Returns the primary keys of `s` as a list (ints or strings)."""
    pks = s.columns[pk_name]
    return pks.tolist() if isinstance(pks, np.ndarray) else list(pks)


def _take(values: Any, keep: np.ndarray) -> Any:
    if isinstance(values, np.ndarray):
        return values[keep]
    return [values[i] for i in keep.tolist()]
