"""Runs of inserts a query node appends as one: the RowsInserted events of a time tick's pack
that go to one segment with distinct primary keys are appended as a multi-row insert would
be (one key-index update, one segment append, one faiss add), not one event at a time.

A tick's pack of single-row inserts (a client inserting one row per call) otherwise cost a
fixed ~0.2 ms per row, all at once when the tick arrived: a burst of ~10 ms per tick at
~250 inserts/s, holding the GIL the request threads of the same process wait for."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Rows:
    """Rows decoded and checked, ready to append: their insert ts (one, or one per row),
    partition, segment, row ids (the first of consecutive ones, or one per row), primary
    keys, stored scalar columns and vectors (by field name), and `until`, the drop ts of
    their partition or collection (None: neither dropped)."""

    ts: int | np.ndarray
    n: int
    partition: int
    seg_id: int
    ids: int | np.ndarray
    pks: list[Any]
    stored: dict[str, Any]
    vectors: dict[str, Any]
    until: int | None

    @property
    def top_ts(self) -> int:
        """Returns the newest insert ts of these rows."""
        return self.ts if isinstance(self.ts, int) else int(self.ts.max(initial=0))

    def alone(self) -> bool:
        """Returns whether these rows must be appended on their own: none, rows of a dropped
        partition or collection, or a key twice."""
        return self.n == 0 or self.until is not None or len(set(self.pks)) != self.n


def runs(parts: list[Rows]) -> list[Rows]:
    """Returns `parts` (in ts order) joined into runs, each as one Rows: consecutive parts of
    one partition and segment, no key twice in a run, none that must stay alone. Appending
    the runs in order changes the replica as appending every part in order would."""
    out: list[list[Rows]] = []
    keys: set[Any] = set()
    for part in parts:
        last = out[-1][-1] if out else None
        if last is not None and _joins(last, part) and keys.isdisjoint(part.pks):
            out[-1].append(part)
            keys.update(part.pks)
        else:
            out.append([part])
            keys = set(part.pks)
    return [merged(run) for run in out]


def _joins(last: Rows, part: Rows) -> bool:
    """Returns whether `part` may join the run ending with `last`."""
    return (
        not last.alone()
        and not part.alone()
        and (last.partition, last.seg_id) == (part.partition, part.seg_id)
        and last.stored.keys() == part.stored.keys()
        and last.vectors.keys() == part.vectors.keys()
    )


def merged(run: list[Rows]) -> Rows:
    """Returns a run's parts as one Rows (a run of one: that part)."""
    if len(run) == 1:
        return run[0]
    counts = [p.n for p in run]
    first = run[0]
    return replace(
        first,
        ts=np.repeat(np.array([p.ts for p in run], dtype=np.uint64), counts),
        n=sum(counts),
        ids=np.concatenate([_ids(p) for p in run]),
        pks=[k for p in run for k in p.pks],
        stored={name: _concat([p.stored[name] for p in run]) for name in first.stored},
        vectors={name: _concat([p.vectors[name] for p in run]) for name in first.vectors},
    )


def _ids(part: Rows) -> np.ndarray:
    """Returns a part's row ids, one per row."""
    if isinstance(part.ids, int):
        return np.arange(part.ids, part.ids + part.n, dtype=np.int64)
    return np.asarray(part.ids, dtype=np.int64)


def _concat(chunks: list[Any]) -> Any:
    """Returns one column of the chunks' rows: numpy, Arrow, or a list (binary and sparse
    vectors)."""
    if isinstance(chunks[0], np.ndarray):
        return np.concatenate(chunks)
    if isinstance(chunks[0], pa.Array):
        return pa.concat_arrays(chunks)
    return [row for chunk in chunks for row in chunk]
