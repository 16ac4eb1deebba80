"""Loading segments read from binlogs into a replica as if their events had been applied.

Rows and deletes are applied in ts order across every segment of the collection (deletes
before inserts at one ts: a delete at d hides rows inserted before d), so upserts and deletes
end each version's visibility exactly as the live node did. When no key repeats and nothing
was deleted (the bulk case), each binlog write goes in one call, as soon as it is read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from vectorlog.processors.querynode.recovery import SegmentRows, select
from vectorlog.processors.querynode.replica import Replica
from vectorlog.processors.querynode.segment import DeferredAppends

INSERT, DELETE = 1, 0  # at one ts, deletes go first
FILL_THREADS = min(4, os.cpu_count() or 1)  # segments filled with vectors at once

Step = tuple[int, int, int, int, int]  # ts, kind, segment index, first, end


def restore(make: Callable[[], Replica], chunks: Iterable[SegmentRows]) -> tuple[Replica, int]:
    """Loads `chunks` into a replica from `make()` (holding no row yet, its drops set),
    discarding rows stamped at or after the drop of their partition or collection. Each
    chunk is loaded as it arrives (the reads of the next ones go on meanwhile) while no key
    repeats and nothing was deleted; at the first that breaks this, everything is loaded
    again into a fresh replica in ts order. Returns the replica and the rows loaded."""
    replica, seen, later, keys = make(), [], DeferredAppends(), _Distinct()
    for chunk in chunks:
        s = _in_ts_order(_undropped(replica, chunk))
        seen.append(s)
        pks = s.columns[replica.pk_name]
        if len(s.delete_ts) or not keys.add(pks):
            return _in_order(make(), seen + [_in_ts_order(_undropped(replica, c)) for c in chunks])
        if len(s):
            at = (s.partition_id, s.segment_id)
            replica.load_rows(s.ts, *at, s.row_ids, pks, s.columns, s.vectors, later)
    if not keys.distinct():
        return _in_order(make(), seen)
    later.run(FILL_THREADS)
    return replica, sum(len(s) for s in seen)


class _Distinct:
    """Whether primary keys seen so far are all distinct: strings in a set, as they come;
    integers as arrays, checked once by `distinct` (one sort, no Python object per key)."""

    def __init__(self) -> None:
        self._texts: set[Any] = set()
        self._ints: list[np.ndarray] = []

    def add(self, pks: Any) -> bool:
        """Adds keys; returns False if one is known to repeat already."""
        if isinstance(pks, np.ndarray):
            self._ints.append(pks)
            return True
        before = len(self._texts)
        self._texts.update(pks)
        return len(self._texts) == before + len(pks)

    def distinct(self) -> bool:
        """Returns whether every key added is distinct."""
        if not self._ints:
            return True
        keys = np.sort(np.concatenate(self._ints))
        return not (keys[1:] == keys[:-1]).any()


def _in_order(replica: Replica, segments: list[SegmentRows]) -> tuple[Replica, int]:
    """Loads every row and delete of `segments` in ts order (see the module docstring)."""
    keys = [_keys(s, replica.pk_name) for s in segments]
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
            vectors = None if s.vectors is None else {n: v[at] for n, v in s.vectors.items()}
            replica.load_rows(
                ts, s.partition_id, s.segment_id, s.row_ids[at], keys[i][at], columns, vectors
            )
    return replica, sum(len(s) for s in segments)


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
    columns = {name: select(values, keep) for name, values in s.columns.items()}
    return SegmentRows(
        s.segment_id,
        s.partition_id,
        s.row_ids[keep],
        s.ts[keep],
        columns,
        None if s.vectors is None else {n: v[keep] for n, v in s.vectors.items()},
        s.delete_pks,
        s.delete_ts,
    )


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
