"""The growing data of one collection on a query node, readable as of any timestamp.

Every row has an insert ts and a superseded ts (max until a later insert or delete of the
same primary key). A row is visible at T iff `insert_ts <= T < superseded_ts` (DESIGN.md
s.6): a delete of a key at D hides inserts of it before D; a re-insert (upsert) hides the
older row from its ts on. Scalar fields are columns (`ScalarColumns`), filtered with
vectorized expressions.

Vectors live in segments (`Segment`: exact storage while growing, a loaded faiss index once
sealed and indexed), one set per vector field (`VectorColumn`; a search names its field,
`anns_field`, or reads the only one). Each segment keeps an alive bitmap, cleared in place when
a row is superseded. A search at or after the newest applied event that changed visibility,
with no filter and no key restriction (the fast path), passes each segment its bitmap (or
nothing while every row is alive): no per-row work. Any other search computes the visible rows
at T as a mask and passes each segment its part (the slow path). Per-segment top-k lists merge
into one.

Drops are versions too: a partition dropped at D hides its rows from D on, and a collection
dropped at D keeps answering reads as of T < D (time travel) until the query node frees it.
Events are applied in ts order per pchannel only, so an event of another pchannel with a ts
below a drop may arrive after it: it is applied as of its ts, never discarded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from vectorlog.core.added_fields import with_field
from vectorlog.core.errors import InvalidArgument
from vectorlog.core.faults import pause_point
from vectorlog.core.halfvec import from_float32, to_float32
from vectorlog.core.inline import inline
from vectorlog.core.model import HALF_TYPES, CollectionSchema, DataType, FieldSchema
from vectorlog.core.results import SearchResult
from vectorlog.processors.querynode.binarycolumn import BinaryColumn, BinarySegmentIndex
from vectorlog.processors.querynode.columns import ScalarColumns
from vectorlog.processors.querynode.exact import unit_queries
from vectorlog.processors.querynode.filtercache import FilterCache, Selection
from vectorlog.processors.querynode.growarray import GrowArray
from vectorlog.processors.querynode.handoff import Handoffs
from vectorlog.processors.querynode.insertruns import Rows, runs
from vectorlog.processors.querynode.keyindex import KeyIndex, Keys
from vectorlog.processors.querynode.ranged import RangeBounds
from vectorlog.processors.querynode.scalarindex import ScalarFile, ScalarIndexes
from vectorlog.processors.querynode.sealed import SearchKnobs, SegmentIndex
from vectorlog.processors.querynode.segment import DeferredAppends, Segment
from vectorlog.processors.querynode.sparsecolumn import SparseColumn, SparseSegmentIndex
from vectorlog.processors.querynode.topk import grouped, ranked
from vectorlog.processors.querynode.vectorcolumn import Plan, VectorColumn, positions_of
from vectorlog.schemas.columns import (
    COLUMN_TYPE,
    column_kind,
    decode_column,
    joined_columns,
    run_row_ids,
    with_dynamic,
)
from vectorlog.storage import sparse_index

if TYPE_CHECKING:
    from vectorlog.expr import Expr

NEVER = np.uint64(np.iinfo(np.uint64).max)
#: the most exact-scan work (rows x dimensions x queries, over segments without an index or
#: with a FLAT one) a search answered inline may do, on a server thread every other call also
#: needs (core.inline: gRPC's polling thread): beyond it (a few ms) the search declines there
#: and a worker answers it, so one scan of a large unindexed segment holds up no other call
INLINE_SCAN_LIMIT = 8_000_000
#: vectors of rows by vector field name (None: every field's are in the cache entries)
Vectors = dict[str, np.ndarray] | None


class Replica:
    """Rows of one collection from every vchannel this node consumes."""

    def __init__(self, collection_id: int, schema: CollectionSchema) -> None:
        self.collection_id, self.schema = collection_id, schema
        self.pk_name, self.vec = schema.primary.name, schema.vector
        self.metric = self.vec.metric_type or "L2"
        self.vectors: dict[str, Any] = {f.name: _column_of(f) for f in schema.vectors}
        self._vcols = list(self.vectors.values())
        self._first = self._vcols[0]  # the only one, in all but multi-vector collections
        self._ins, self._sup = GrowArray(np.uint64), GrowArray(np.uint64)
        self._part = GrowArray(np.int64)
        self.columns = ScalarColumns(schema.fields)
        self._keys = KeyIndex()  # pk -> its newest row
        self._prev = GrowArray(np.int64)  # row -> the same pk's previous row, or -1
        self.changed_ts = 0  # the newest applied ts that changed which rows are visible
        self.dropped_partitions: dict[int, int] = {}  # partition id -> drop ts
        self.dropped_ts: int | None = None  # the collection's drop ts
        self.lock = threading.RLock()
        self.scalar = ScalarIndexes()  # loaded scalar indexes, which filters use
        self.filters = FilterCache()  # filter selections per (expression, segment version)
        self.handoffs = Handoffs()  # merged segments waiting for their indexes
        #: called (lock held) with the segments merged away that nothing serves from any more
        self.on_retired: Callable[[list[int]], None] | None = None

    @property
    def segments(self) -> dict[tuple[int, int], Segment]:
        """Returns the segments of the (first) vector field, by (partition, id)."""
        return self._first.segments

    def __len__(self) -> int:
        """Returns the number of rows held (every version of every key)."""
        return len(self._ins)

    def reserve(self, rows: int) -> None:
        """Makes room for `rows` rows in all (a restart knows how many it loads)."""
        for array in (self._ins, self._sup, self._part, self._prev):
            array.reserve(rows)
        for col in self._vcols:
            col.reserve(rows)
        self.columns.reserve(rows)

    # -- applying events ------------------------------------------------------------
    def insert(self, ts: int, body: dict[str, Any]) -> None:
        """Applies a RowsInserted body at `ts`. Rows stamped at or after the drop of their
        partition or collection are discarded; rows stamped before a partition drop that
        arrive after it are visible until it. Raises InvalidArgument or MalformedEvent
        before changing anything."""
        rows = self.prepared(ts, body)
        if rows is not None:
            self.append(rows)

    def prepared(self, ts: int, body: dict[str, Any]) -> Rows | None:
        """Returns a RowsInserted body at `ts` decoded and checked for `append` (None: its
        rows are discarded, stamped at or after their partition's or collection's drop).
        Changes nothing. Raises InvalidArgument or MalformedEvent."""
        n, partition = body["num_rows"], body["partition_id"]
        cols = self._checked_columns(ts, n, body["columns"])
        until = self._dropped_at(partition)
        if until is not None and ts >= until:
            return None
        vectors = {c.name: _vector_values(c, cols.pop(c.name)) for c in self._vcols}
        pks = cols[self.pk_name]
        pks = pks.tolist() if isinstance(pks, np.ndarray) else list(pks)
        stored = {name: self.columns.stored(name, col, n) for name, col in cols.items()}
        seg_id, first_id = body.get("segment_id", 0), body.get("first_row_id", 0)
        return Rows(ts, n, partition, seg_id, first_id, pks, stored, vectors, until)

    def prepared_run(self, parts: list[tuple[int, dict[str, Any]]]) -> Rows | None:
        """Returns RowsInserted bodies at their ts (in ts order) as one prepared run, decoded
        a field at a time (schemas.columns.joined_columns), as `prepared` and `insert_all`
        would take them one at a time; None if they cannot be one (each is then prepared on
        its own): another partition or segment, a dropped partition, an event without rows,
        a key twice, a field of another kind or dim than the schema's. Changes nothing."""
        first = parts[0][1]
        where = (first["partition_id"], first.get("segment_id", 0))
        if any((b["partition_id"], b.get("segment_id", 0)) != where for _, b in parts):
            return None
        if self._dropped_at(where[0]) is not None or not all(0 <= t < 2**64 for t, _ in parts):
            return None
        joined = joined_columns(self.schema, [b for _, b in parts])
        if joined is None or min(joined[0]) <= 0:
            return None
        counts, cols = joined
        if any(cols[c.name].shape[1] != c.dim for c in self._vcols):
            return None
        pks = cols[self.pk_name].tolist()
        n = len(pks)
        if len(set(pks)) != n:
            return None
        vectors = {c.name: _vector_values(c, cols.pop(c.name)) for c in self._vcols}
        stored = {name: self.columns.stored(name, col, n) for name, col in cols.items()}
        ts = np.repeat(np.array([t for t, _ in parts], dtype=np.uint64), counts)
        ids = run_row_ids([b.get("first_row_id", 0) for _, b in parts], counts)
        return Rows(ts, n, where[0], where[1], ids, pks, stored, vectors, None)

    def insert_all(self, parts: list[Rows]) -> None:
        """Appends prepared inserts (in ts order) as `append` would one at a time; those of
        one segment with distinct keys in one append (insertruns.py)."""
        for rows in runs(parts):
            self.append(rows)

    def append(self, rows: Rows) -> None:
        """Appends prepared rows (each at its insert ts, superseding the rows of its key)."""
        n = rows.n
        with self.lock:
            self._append(rows.ts, rows.partition, rows.pks, rows.stored)
            alive = rows.until is None
            self._to_segment(rows.seg_id, rows.partition, rows.ids, n, rows.vectors, alive)
            if rows.until is not None and n:  # stamped before the drop, visible until it
                self._sup.view()[len(self) - n :] = np.uint64(rows.until)
            self.changed_ts = max(self.changed_ts, rows.top_ts, rows.until or 0)

    def load_rows(
        self,
        ts: int | np.ndarray,
        partition: int,
        seg_id: int,
        row_ids: np.ndarray,
        pks: Keys,
        columns: dict[str, Any],
        vectors: Vectors,
        later: DeferredAppends | None = None,
    ) -> None:
        """Appends rows read from a segment's binlogs (see recovery.py), as an insert at `ts`
        would; `ts` per row only for keys this replica never held, none twice (unchecked:
        restore.py checks it, and their keys are looked up only once a lookup needs them).
        With `later`, their vectors reach the segment when `later.run` runs (before any
        read). `vectors` (by field name) None: they are in the segment's cache entries (each
        column's `cached`). Raises CacheMismatch if they are not."""
        n = len(pks)
        stored = {name: self.columns.stored(name, col, n) for name, col in columns.items()}
        with self.lock:
            self._append(ts, partition, pks, stored, new_keys=isinstance(ts, np.ndarray))
            self._to_segment(seg_id, partition, row_ids, n, vectors, True, later)
            top = int(ts) if isinstance(ts, int) else int(ts.max(initial=0))
            self.changed_ts = max(self.changed_ts, top)

    def holds_any(self, pks: list[Any]) -> bool:
        """Returns whether any of `pks` has a row here."""
        return self._keys.holds_any(pks)

    def _to_segment(
        self,
        seg_id: int,
        partition: int,
        ids: int | np.ndarray,
        n: int,
        vectors: Vectors,
        alive: bool,
        later: DeferredAppends | None = None,
    ) -> None:
        """Adds the newest `n` rows (row ids `ids`, or consecutive from `ids`) to their
        segment of each vector field (or queues that in `later`); vectors None: their
        vectors are in the segments' cache entries."""
        rows = np.arange(len(self) - n, len(self), dtype=np.int64)
        if isinstance(ids, int):
            ids = np.arange(ids, ids + n, dtype=np.int64)
        flags = np.full(n, alive, dtype=bool)
        for col in self._vcols:
            v = None if vectors is None else vectors.get(col.name)  # None: in its cache
            col.add(rows, partition, seg_id, ids, v, flags, later)

    def rehome(
        self, partition: int, olds: list[int], new_id: int, row_ids: np.ndarray, horizon: int
    ) -> int:
        """Applies a compaction that merged segments `olds` into segment `new_id` holding the
        rows with row ids `row_ids` (its index covers exactly those rows): the others (rows
        the compaction dropped: deleted, or expired by the collection's TTL, by its
        `horizon`) become invisible from the horizon on, as after a restart from the
        binlogs, and stay in a smaller copy of their segment. Each vector field moves the
        rows into the new segment now, or, if a segment holding them serves an index, once
        the new segment's index for that field loads (handoff.py). Returns the rows merged."""
        with self.lock:
            rows, ids = self.handoffs.members(self._first, partition, olds)
            going = np.isin(ids, row_ids)
            self._end(rows[~going], horizon)
            for col in self._vcols:
                self.handoffs.compact(col, partition, olds, new_id, row_ids)
            self._retire()
        return int(np.count_nonzero(going))

    def _retire(self) -> None:
        """Hands the segments merged away that no vector field serves from any more to
        `on_retired`."""
        sids = self.handoffs.retired()
        if sids and self.on_retired is not None:
            self.on_retired(sids)

    def _end(self, rows: np.ndarray, ts: int) -> None:
        """Ends at `ts` the visibility of those `rows` still visible then (dropped rows)."""
        sup, t = self._sup.view(), np.uint64(ts)
        ended = rows[sup[rows] > t]
        if len(ended):
            sup[ended] = t
            self._kill(ended)
            self.changed_ts = max(self.changed_ts, ts)

    def cached_loaded(self) -> list[Segment]:
        """Ends loading from cache entries (entries of segments that got no row are
        dropped); returns the segments served from one. Raises CacheMismatch if one did
        not get exactly its entry's rows."""
        return [seg for col in self._vcols for seg in col.cached_loaded()]

    def _dropped_at(self, partition: int) -> int | None:
        """Returns the earliest drop ts of the collection or of `partition`, or None."""
        drops = (self.dropped_ts, self.dropped_partitions.get(partition))
        return min((t for t in drops if t is not None), default=None)

    def _checked_columns(self, ts: int, n: int, columns: list[dict[str, Any]]) -> dict[str, Any]:
        """Returns the decoded columns. Raises InvalidArgument naming what breaks the schema."""
        if not 0 <= ts < 2**64 or n < 0:
            raise InvalidArgument(f"RowsInserted with ts {ts} and {n} rows")
        columns = with_dynamic(self.schema, columns, n)  # a left-out $meta: {} per row
        kinds = {c["field_name"]: column_kind(c["column"])[0] for c in columns}
        for f in self.schema.fields:
            if kinds.get(f.name) != COLUMN_TYPE[f.dtype]:
                raise InvalidArgument(
                    f"field {f.name!r} needs a {COLUMN_TYPE[f.dtype]}, "
                    f"got {kinds.get(f.name, 'nothing')}"
                )
        names = {f.name for f in self.schema.fields}
        cols = {
            c["field_name"]: decode_column(c["column"], n)
            for c in columns
            if c["field_name"] in names
        }
        for col in self._vcols:
            width = col.dim * (2 if col.field.dtype in HALF_TYPES else 1)
            if isinstance(col, BinaryColumn):
                width, found = col.dim // 8, np.asarray(cols[col.name]).shape[-1]
                if len(cols[col.name]) and found != width:
                    raise InvalidArgument(f"binary vector of {found} bytes, not {width}")
            elif isinstance(col, VectorColumn) and cols[col.name].shape[1] != width:
                raise InvalidArgument(
                    f"vector dim {cols[col.name].shape[1]} != schema dim {col.dim} of {col.name!r}"
                )
        return cols

    def _append(
        self,
        ts: int | np.ndarray,
        partition: int,
        pks: Keys,
        cols: dict[str, Any],
        new_keys: bool = False,
    ) -> None:
        """Appends rows at `ts` (one, or one per row); `new_keys`: keys this replica never
        held (load_rows), none to supersede."""
        base, n = len(self), len(pks)
        if new_keys:
            prev = np.full(n, -1, dtype=np.int64)
            self._keys.add_new(pks, base)
        else:
            prev = self._keys.newest(pks)
            self._supersede(prev, ts)
            self._keys.add(pks if isinstance(pks, list) else pks.tolist(), base)
        self._prev.extend(prev)
        self.columns.extend(cols)
        self._part.extend(np.full(n, partition, dtype=np.int64))
        self._sup.extend(np.full(n, NEVER, dtype=np.uint64))
        ins = ts.astype(np.uint64) if isinstance(ts, np.ndarray) else np.full(n, ts, np.uint64)
        self._ins.extend(ins)  # last: len(self) counts it

    def _supersede(self, rows: np.ndarray, ts: int | np.ndarray) -> None:
        """Ends at `ts` (one, or one per row) the visibility of those `rows` (-1 = none)
        still visible then.

        Only a key's newest row can be visible: every older one was superseded when the
        newer one arrived, as a key's events are applied in ts order.
        """
        held = rows >= 0
        rows = rows[held]
        if len(rows):
            ins, sup = self._ins.view(), self._sup.view()
            t = ts[held].astype(np.uint64) if isinstance(ts, np.ndarray) else np.uint64(ts)
            ending = (ins[rows] < t) & (sup[rows] > t)
            sup[rows[ending]] = t[ending] if isinstance(t, np.ndarray) else t
            self._kill(rows[ending])
            self.changed_ts = max(self.changed_ts, int(np.max(t)))

    def _kill(self, rows: np.ndarray) -> None:
        """Clears the alive bits of `rows` in their segments (in place: no rebuild)."""
        if not len(rows):
            return
        for col in self._vcols:
            col.kill(rows)

    def add_field(self, field: FieldSchema) -> None:
        """Adds a field added to the collection (CollectionFieldAdded; every pchannel
        brings a copy, and a restart may have it from the meta already: once): the rows
        held read as its default value, else None."""
        with self.lock:
            schema = with_field(self.schema, field)
            if schema is self.schema:
                return
            self.columns.add(field, len(self))
            self.schema = schema

    def delete(self, ts: int, pks: list[Any], partition: int = -1) -> None:
        """Hides every row of `pks` inserted before `ts` (in `partition`, or any if -1); a
        delete at or after the collection's drop changes nothing readable: it is skipped."""
        if self.dropped_ts is not None and ts >= self.dropped_ts:
            return
        with self.lock:
            rows = self._keys.newest(pks)
            if partition != -1:
                rows = rows[rows >= 0]
                rows = rows[self._part.view()[rows] == partition]
            self._supersede(rows, ts)

    def drop_partition(self, ts: int, partition: int) -> None:
        """Hides every row of `partition` from `ts` on; inserts into it stamped at or after
        `ts` are discarded (each pchannel brings a copy of the drop: the first ts counts)."""
        with self.lock:
            ts = min(ts, self.dropped_partitions.get(partition, ts))
            self.dropped_partitions[partition] = ts
            sup = self._sup.view()
            rows = (self._part.view() == partition) & (self._ins.view() < ts) & (sup > ts)
            sup[rows] = ts
            self._kill(np.flatnonzero(rows))
            self.changed_ts = max(self.changed_ts, ts)
            self.handoffs.forget(partition)  # no index of it is attached any more
            self._retire()

    def drop(self, ts: int) -> None:
        """Marks the collection dropped at `ts`: reads as of `ts` or later are refused (see
        `readable`), reads before it answer as before; later events are discarded."""
        with self.lock:
            self.dropped_ts = ts if self.dropped_ts is None else min(ts, self.dropped_ts)
            self.handoffs.forget(None)  # no index of it is attached any more
            self._retire()

    # -- which rows a read sees ---------------------------------------------------------
    def readable(self, ts: int) -> bool:
        """Returns whether the collection existed at `ts` (it was not dropped by then)."""
        dropped = self.dropped_ts
        return dropped is None or ts < dropped

    def visible(
        self, ts: int, partitions: list[int] | None = None, expire_ts: int = 0
    ) -> np.ndarray:
        """Returns the boolean mask of rows visible at `ts` (in `partitions`, if given; rows
        inserted at or before `expire_ts` expired: the collection's TTL)."""
        t, ins = np.uint64(ts), self._ins.view()
        mask = (ins <= t) & (self._sup.view() > t)
        if expire_ts:
            mask &= ins > np.uint64(expire_ts)
        if partitions is not None:
            mask &= np.isin(self._part.view(), partitions)
        return mask

    def selected(
        self,
        ts: int,
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        expire_ts: int = 0,
    ) -> np.ndarray:
        """Returns the mask of rows visible at `ts` and not expired at `expire_ts`, in
        `partitions`, matching `expr` and with one of `keys` (each None: no restriction).
        Call with the lock held."""
        if keys is None and expr is not None:
            keys = expr.primary_keys(self.pk_name)  # `pk in [...]`: no scan
        if keys is None:
            mask = self.visible(ts, partitions, expire_ts)
            if expr is not None and mask.any():
                mask &= self._evaluate(expr, None)
            return mask
        rows = self._key_rows(keys, ts, expire_ts)
        if partitions is not None:
            rows = rows[np.isin(self._part.view()[rows], partitions)]
        if expr is not None and len(rows):
            rows = rows[self._evaluate(expr, rows)]
        mask = np.zeros(len(self), dtype=bool)
        mask[rows] = True
        return mask

    def _evaluate(self, expr: Expr, rows: np.ndarray | None) -> np.ndarray:
        """Returns `expr` evaluated on every row (None) or on `rows`: a boolean mask."""
        self._check_fields(expr)
        if rows is None:
            cols = {f: self.columns.view(f) for f in expr.fields}
            index = self.scalar.row_index(len(self), lambda at: self.columns.take(expr.fields, at))
            return np.asarray(expr.evaluate(cols, len(self), index), dtype=bool)
        return np.asarray(expr.evaluate(self.columns.take(expr.fields, rows), len(rows)), bool)

    def _check_fields(self, expr: Expr) -> None:
        """Raises InvalidArgument naming the fields of `expr` that have no scalar column."""
        missing = [f for f in expr.fields if f not in self.columns.types]
        if missing:
            raise InvalidArgument(f"filter: field(s) {sorted(missing)} cannot be filtered on")

    def _key_rows(self, keys: list[Any], ts: int, expire_ts: int = 0) -> np.ndarray:
        """Returns the row of each distinct key visible at `ts` and inserted after
        `expire_ts` (absent and expired keys skipped), in the order of `keys`."""
        ins, sup, prev = self._ins.view(), self._sup.view(), self._prev.view()
        out = []
        for pk in dict.fromkeys(keys):
            row = self._keys.get(pk)
            while row >= 0 and not ins[row] <= ts < sup[row]:
                row = int(prev[row])
            if row >= 0 and ins[row] > expire_ts:
                out.append(row)
        return np.asarray(out, dtype=np.int64)

    # -- reads --------------------------------------------------------------------------
    def count(
        self,
        ts: int,
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        expire_ts: int = 0,
    ) -> int:
        """Returns the number of rows visible at `ts` that match (see `selected`)."""
        with self.lock:
            return int(self.selected(ts, partitions, expr, keys, expire_ts).sum())

    def query(
        self,
        ts: int,
        output_fields: list[str],
        partitions: list[int] | None = None,
        expr: Expr | None = None,
        keys: list[Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
        expire_ts: int = 0,
    ) -> list[dict[str, Any]]:
        """Returns the matching rows (see `selected`) in primary-key order, from the
        `offset`-th, at most `limit` of them, each with `output_fields`."""
        with self.lock:
            rows = np.flatnonzero(self.selected(ts, partitions, expr, keys, expire_ts))
            order = np.argsort(self.columns.keys(self.pk_name, rows), kind="stable")
            end = None if limit is None else offset + limit
            return self._entities(rows[order][offset:end], output_fields)

    def get(
        self, pks: list[Any], ts: int, output_fields: list[str], expire_ts: int = 0
    ) -> list[dict[str, Any]]:
        """Returns the entity of each key visible at `ts` (and not expired at `expire_ts`)
        in the order of `pks` (absent keys skipped, each key once)."""
        with self.lock:
            return self._entities(self._key_rows(pks, ts, expire_ts), output_fields)

    def search(
        self,
        queries: np.ndarray,
        k: int,
        ts: int,
        partitions: list[int] | None = None,
        output_fields: list[str] | None = None,
        expr: Expr | None = None,
        offset: int = 0,
        group_by: str | None = None,
        params: dict[str, Any] | None = None,
        metric: str | None = None,
        group_size: int = 1,
        expire_ts: int = 0,
        anns_field: str | None = None,
    ) -> SearchResult:
        """Returns, per query, up to k hits (ids, distances, output fields) visible at `ts` (and
        matching `expr`), nearest first, after skipping `offset`; with `group_by`, the best
        `group_size` hits of each of up to k distinct values of that field (groups skipped
        by `offset`), a group's hits together. `metric`: the index's (None: the vector
        field's, else L2); `params`: ef / nprobe, and `radius` / `range_filter` for a range
        search (exact: see ranged.py); `anns_field`: the vector field searched (None: the
        first). Raises InvalidArgument if a loaded segment index has another metric, for a
        bad param, or for an `anns_field` that is no vector field."""
        col = self._first if anns_field is None else self._column(anns_field)
        metric = (metric or col.metric).upper()
        if isinstance(col, SparseColumn):
            bounds = RangeBounds.of(params, metric)
            if group_by is None and bounds is None:
                found = self._sparse_search(
                    col, queries, k + offset, ts, partitions, expr, metric, expire_ts, params
                )
                with self.lock:
                    picked = [ranked(lr, dr, offset) for dr, lr in found]
                    return self._result(picked, output_fields or [])
            every = self._sparse_search(
                col, queries, None, ts, partitions, expr, metric, expire_ts, params
            )
            grouping = None if group_by is None else (group_by, offset, k, group_size)
            with self.lock:
                narrowed = [self._narrowed(lr, dr, bounds, grouping, offset, k) for dr, lr in every]
                return self._result(narrowed, output_fields or [])
        q = np.ascontiguousarray(queries, dtype=np.float32)
        qn = unit_queries(q)
        want = k + offset
        knobs = _knobs(params, want)
        bounds = RangeBounds.of(params, metric)
        with self.lock:
            pause_point("querynode.search.locked")  # a test holds a search here
            plan, total = self._plan(col, ts, partitions, expr, metric, expire_ts)
            if bounds is not None:
                found = col.in_range(q, qn, metric, bounds, plan)
                if group_by is None:
                    found = [(r[offset:want], d[offset:want]) for r, d in found]
                else:
                    found = [
                        self._grouped(r, d, group_by, offset, k, group_size)[:2] for r, d in found
                    ]
            elif group_by is None:
                dist, labels = col.knn(q, qn, metric, want, knobs, plan)
                return self._hits_of_all(labels, dist, offset, output_fields or [])
            else:
                grouping = (group_by, offset, k, group_size)
                found = self._groups(col, q, qn, metric, knobs, plan, total, grouping)
            return self._result(found, output_fields or [])

    def search_common(
        self,
        queries: np.ndarray,
        k: int,
        ts: int,
        params: dict[str, Any] | None,
        metric: str,
        anns_field: str,
    ) -> SearchResult | None:
        """Returns what `search(queries, k, ts, params=params, metric=metric,
        anns_field=anns_field)` returns when that is a plain top-k search (no filter,
        partitions, output fields, offset, grouping, range or expiry: the proxy checked) of a
        dense float field at or after the newest change of visibility (each segment searched
        with its alive bitmap); None otherwise (the caller then calls `search`)."""
        col = self.vectors.get(anns_field)
        if type(col) is not VectorColumn or ts < self.changed_ts:
            return None
        q = np.ascontiguousarray(queries, dtype=np.float32)
        qn = unit_queries(q)
        knobs = _knobs(params, k)
        metric = metric.upper()
        if not self.lock.acquire(blocking=not inline()):
            return None  # held by another thread: the caller's worker waits for it
        try:
            if ts < self.changed_ts:  # a delete or upsert applied meanwhile
                return None
            plan: Plan = [(s, None) for s in col.planned(None, metric)]
            if inline() and _scan_work(plan, len(q)) > INLINE_SCAN_LIMIT:
                return None  # too long for a thread every other call needs: a worker's
            dist, labels = col.knn(q, qn, metric, k, knobs, plan)
            return self._hits_of_all(labels, dist, 0, [])
        finally:
            self.lock.release()

    def _narrowed(
        self,
        labels: np.ndarray,
        dist: np.ndarray,
        bounds: RangeBounds | None,
        grouping: tuple[str, int, int, int] | None,
        offset: int,
        k: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Returns the (rows, scores) of one query's scored rows (every row that shares a
        dimension with it, best first) in range (`bounds`), then grouped (`grouping`: field,
        groups skipped, groups wanted, hits per group) or cut to `offset` .. `offset + k`."""
        rows, d = ranked(labels, dist, 0)
        if bounds is not None:
            keep = bounds.inside(d)
            rows, d = rows[keep], d[keep]
        if grouping is None:
            return rows[offset : offset + k], d[offset : offset + k]
        field, skip, want, size = grouping
        return self._grouped(rows, d, field, skip, want, size)[:2]

    def _sparse_search(
        self,
        col: SparseColumn,
        queries: Any,
        want: int | None,
        ts: int,
        partitions: list[int] | None,
        expr: Expr | None,
        metric: str,
        expire_ts: int = 0,
        params: dict[str, Any] | None = None,
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Returns per query the (scores, replica rows) of the top `want` of sparse field
        `col` (None: every row the plan selects; params: drop_ratio_search)."""
        p = params or {}
        vcol = cast(VectorColumn, col)  # a sparse column plans as a dense one does
        if isinstance(col, BinaryColumn):
            packed = np.ascontiguousarray(queries, dtype=np.uint8)
            with self.lock:
                plan, total = self._plan(vcol, ts, partitions, expr, metric, expire_ts)
                want = max(total, 1) if want is None else want
                nprobe = SearchKnobs.parse(p, want).nprobe
                found = col.knn_binary(packed, metric, want, cast(Any, plan), nprobe)
            return list(zip(found[0], found[1], strict=True))
        q = sparse_index.queries_matrix(queries, sparse_index.ratio(p, "drop_ratio_search"))
        with self.lock:
            plan, total = self._plan(vcol, ts, partitions, expr, metric, expire_ts)
            want = max(total, 1) if want is None else want
            stats = None
            if metric == "BM25":  # over the collection's visible rows, not the filter's
                every, _ = self._plan(vcol, ts, None, None, metric, expire_ts)
                k1, b = float(p.get("bm25_k1", 1.2)), float(p.get("bm25_b", 0.75))
                terms = sparse_index.query_weights(q)[0]
                stats = col.bm25_stats(cast(Any, every), terms, k1, b)
            dist, labels = col.knn(q, metric, want, cast(Any, plan), stats)
        return list(zip(dist, labels, strict=True))

    def _column(self, name: str) -> VectorColumn:
        """Returns the vector field called `name`. Raises InvalidArgument naming it."""
        col = self.vectors.get(name)
        if col is None:
            raise InvalidArgument(f"field {name!r} is not a vector field of this collection")
        return col

    def _plan(
        self,
        col: VectorColumn,
        ts: int,
        partitions: list[int] | None,
        expr: Expr | None,
        metric: str,
        expire_ts: int = 0,
    ) -> tuple[Plan, int]:
        """Returns the segments of vector field `col` to search, each with the mask of its
        selected positions (None: its alive bitmap, the fast path), and how many rows are
        selected in all (rows inserted at or before `expire_ts` expired).
        Raises InvalidArgument if a loaded segment index has another metric than `metric`."""
        segs = col.planned(partitions, metric)
        if ts >= self.changed_ts and not expire_ts:
            if expr is None:
                return [(s, None) for s in segs], sum(len(s) - s.alive.dead for s in segs)
            if expr.primary_keys(self.pk_name) is None and not isinstance(col, SparseColumn):
                return self._filtered_plan(segs, expr)  # dense: the cached selections
        mask = self.selected(ts, partitions, expr, None, expire_ts)
        plan = []
        for seg in segs:
            rows = seg.rows.view()
            plan.append((seg, (rows >= 0) & mask[np.maximum(rows, 0)]))
        return plan, int(sum(int(np.count_nonzero(m)) for _, m in plan))

    def _filtered_plan(self, segs: list[Segment], expr: Expr) -> tuple[Plan, int]:
        """Returns the plan of a filter over the alive rows: each segment with its cached
        selection (filtercache.py), and how many rows are selected in all."""
        self._check_fields(expr)
        key = repr(expr.tree)

        def evaluate(rows: np.ndarray) -> np.ndarray:
            return self._evaluate(expr, rows)

        plan: Plan = [(seg, self.filters.selection(key, seg, evaluate)) for seg in segs]
        return plan, sum(sel.count for _, sel in plan if isinstance(sel, Selection))

    def _groups(
        self,
        col: VectorColumn,
        q: np.ndarray,
        qn: np.ndarray,
        metric: str,
        knobs: SearchKnobs,
        plan: Plan,
        total: int,
        grouping: tuple[str, int, int, int],
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Returns per query the hits of the groups (field, groups skipped, groups wanted,
        hits per group) of `grouping`: searches deeper (k x 4) until each query's groups
        are all there and full, or every visible row was seen."""
        field, skip, want, size = grouping
        k = min(total, max(4 * (skip + want) * size, 64))
        while True:
            dist, labels = col.knn(q, qn, metric, max(k, 1), knobs, plan)
            picked = []
            for dr, lr in zip(dist, labels, strict=True):
                rows, d = ranked(lr, dr, 0)
                picked.append(self._grouped(rows, d, field, skip, want, size))
            if k >= total or all(full for _, _, full in picked):
                return [(rows, d) for rows, d, _ in picked]
            k = min(total, 4 * k)

    def _grouped(
        self, rows: np.ndarray, d: np.ndarray, field: str, skip: int, want: int, size: int
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        return grouped(rows, d, self.columns.keys(field, rows), skip, want, size)

    def _result(
        self, found: list[tuple[np.ndarray, np.ndarray]], fields: list[str]
    ) -> SearchResult:
        """Returns the SearchResult of per-query (replica rows, distances)."""
        if len(found) == 1:
            rows, dist = found[0]
            return self._flat(rows, dist, np.asarray([0, len(rows)], np.int64), fields)
        lengths = [len(r) for r, _ in found]
        offsets = np.cumsum([0, *lengths], dtype=np.int64)
        rows = np.concatenate([r for r, _ in found]) if found else np.zeros(0, np.int64)
        dist = np.concatenate([d for _, d in found]) if found else np.zeros(0, np.float32)
        return self._flat(rows.astype(np.int64, copy=False), dist, offsets, fields)

    def _flat(
        self, rows: np.ndarray, dist: np.ndarray, offsets: np.ndarray, fields: list[str]
    ) -> SearchResult:
        """Returns the SearchResult of hits at replica `rows` (all queries', in order) with
        `dist`, query i's being offsets[i]:offsets[i + 1]; its columns read once."""
        ids: Any = self.columns.keys(self.pk_name, rows)
        if ids.dtype.kind != "i":
            ids = self.columns.values(self.pk_name, rows)
        columns = {name: self._values(name, rows) for name in fields}
        return SearchResult.of_arrays(ids, dist, offsets, columns)

    def _hits_of_all(
        self, labels: np.ndarray, dist: np.ndarray, offset: int, fields: list[str]
    ) -> SearchResult:
        """Returns the result of a top-k answer (queries x k replica rows, empty slots -1):
        each query's filled slots after its first `offset`, as `ranked` keeps them, with
        the columns read once for every query (not once per query); one query of a few
        slots is checked in Python (a numpy reduction costs more there)."""
        nq, width = labels.shape
        if nq == 1 and offset < width <= 256 and min(labels[0].tolist()) >= 0:  # no reduction
            rows, scores = labels[0, offset:], dist[0, offset:]
            return self._flat(rows, scores, np.array((0, width - offset), np.int64), fields)
        if labels.size and labels.min() >= 0:  # every slot filled: no mask to build
            rows, scores = labels[:, offset:].ravel(), dist[:, offset:].ravel()
            per = max(width - offset, 0)
            offsets = np.arange(0, per * nq + 1, per or 1, dtype=np.int64)
            if not per:
                offsets = np.zeros(nq + 1, np.int64)
        else:
            filled = labels >= 0
            keep = filled & (np.cumsum(filled, axis=1) > offset)
            rows, scores = labels[keep], dist[keep]
            offsets = np.cumsum([0, *np.count_nonzero(keep, axis=1).tolist()], dtype=np.int64)
        return self._flat(rows, scores, offsets, fields)

    def _entities(self, rows: np.ndarray, fields: list[str]) -> list[dict[str, Any]]:
        """Returns the `fields` of `rows`, one dict per row, built column by column."""
        if not fields:
            return [{} for _ in range(len(rows))]
        cols = [self._values(name, rows) for name in fields]
        return [dict(zip(fields, values, strict=True)) for values in zip(*cols, strict=True)]

    def _values(self, name: str, rows: np.ndarray) -> list[Any]:
        col = self.vectors.get(name)
        if col is None:
            return self.columns.values(name, rows)
        if col.field.dtype in HALF_TYPES:  # each row's bytes, as Milvus returns them
            floats = np.asarray(col.values(rows), dtype=np.float32).reshape(len(rows), -1)
            return [r.tobytes() for r in from_float32(floats, col.field.dtype.value)]
        return col.values(rows)

    # -- segment indexes ----------------------------------------------------------------
    def load_index(
        self,
        partition: int,
        segment_id: int,
        index: SegmentIndex | SparseSegmentIndex | BinarySegmentIndex,
        field_id: int | None = None,
    ) -> bool:
        """Serves a segment of vector field `field_id` (None: the first) from its loaded
        `index` (mapped to the replica's rows by row id). Returns False if the replica has
        not applied every row of the index yet (try again later), True once done: loaded,
        already loaded (same index id), or nothing to load (the partition or collection was
        dropped, the segment was merged away, or it holds rows the index lacks: it stays on
        exact search). A merged segment's rows that wait for its index (handoff.py) move to
        it first, under the same hold of the lock: a search sees them once, in the
        compacted-from segments' indexes before, in this one after.
        Raises InvalidArgument if its dim is not the vector field's, or if `field_id` is
        no vector field's."""
        col: Any = self._by_id(field_id)  # a VectorColumn or a SparseColumn
        col.check_dim(segment_id, index)
        with self.lock:
            if self.dropped_ts is not None or partition in self.dropped_partitions:
                return True  # nothing to serve: reads before the drop keep what serves them
            if self.handoffs.switch(col, partition, segment_id, index):  # its rows move now
                done = col.load_index(partition, segment_id, index)
                self._retire()
                return bool(done)
            if self.handoffs.gone(col, partition, segment_id):
                return True  # merged away: its rows are served by the merged segment
            return bool(col.load_index(partition, segment_id, index))

    def load_scalar_index(self, partition: int, segment_id: int, file: ScalarFile) -> bool:
        """Serves a segment's scalar index to filters (mapped to the replica's rows by row
        id). Returns False while the replica lacks rows of it (try again later), True once
        loaded or never loadable (the segment is gone, or holds other rows)."""
        with self.lock:
            seg = self.segments.get((partition, segment_id))
            gone = self.dropped_ts is not None or partition in self.dropped_partitions
            gone = gone or self.handoffs.gone(self._first, partition, segment_id)
            if gone or self.scalar.has(file.index_id, segment_id):
                return True
            if seg is None or len(seg) < len(file.row_ids):
                return False
            at = positions_of(seg.row_ids.view(), file.row_ids)
            if (at < 0).any():
                return False
            rows = seg.rows.view()[at]
            if (rows < 0).any():
                return True  # rows moved out by a compaction: the merged segment's index serves
            self.scalar.add(file, segment_id, rows)
            return True

    def serving(self, partition: int, segment_id: int, field_id: int | None = None) -> int | None:
        """Returns the id of the index a segment of vector field `field_id` (None: the
        first) is served from, None if exact."""
        return self._by_id(field_id).serving(partition, segment_id)

    def awaits_handoff(self, partition: int, segment_id: int) -> bool:
        """Returns whether the rows of segment `segment_id`, a compaction's merged segment,
        still wait for one of its vector indexes (handoff.py): it serves nothing yet."""
        with self.lock:
            return any(key[1:] == (partition, segment_id) for key in self.handoffs.pending)

    def handoff_sources(self, partition: int, segment_id: int) -> dict[int, int]:
        """Returns {segment: rows held} of the compacted-from segments that serve the rows
        of merged segment `segment_id` while it waits for an index (handoff.py; {} when it
        serves them itself)."""
        with self.lock:
            out = {}
            for sid in self.handoffs.sources(partition, segment_id):
                seg = self.segments.get((partition, sid))
                out[sid] = 0 if seg is None else int(np.count_nonzero(seg.rows.view() >= 0))
            return out

    def holds_segment(self, partition: int, segment_id: int, field_id: int | None = None) -> bool:
        """Returns whether a segment holds rows here in vector field `field_id` (None: the
        first), the merged segment of a compaction only once they moved to it. Raises
        InvalidArgument if `field_id` is no vector field's."""
        col = self._by_id(field_id)
        with self.lock:
            seg = col.segments.get((partition, segment_id))
            return seg is not None and len(seg) > 0

    def unload_indexes(self, index_id: int) -> None:
        """Takes the segment indexes of `index_id` (-1: every one) out of service: their
        segments go back to exact search, and the merged segments waiting for an index
        behind segments none of which serves one any more take their rows now."""
        with self.lock:
            self.scalar.drop(index_id)
            for col in self._vcols:
                col.unload_indexes(index_id)
                self.handoffs.unblocked(col)  # nothing to wait for where none is left
            self._retire()

    def _by_id(self, field_id: int | None) -> VectorColumn:
        """Returns the vector field with id `field_id` (None: the first). Raises
        InvalidArgument if there is none."""
        if field_id is None:
            return self._first
        for col in self._vcols:
            if col.field_id == field_id:
                return col
        raise InvalidArgument(f"field {field_id} is not a vector field of this collection")


#: search knobs by (ef, nprobe, hits wanted) as given: parsing them took as long as the rest
#: of a one-query search's planning
_KNOBS: dict[tuple[Any, Any, int], SearchKnobs] = {}


def _knobs(params: dict[str, Any] | None, want: int) -> SearchKnobs:
    """Returns SearchKnobs.parse(params, want), cached for int and str values. Raises
    InvalidArgument as it does (never cached)."""
    p = params or {}
    ef, nprobe = p.get("ef"), p.get("nprobe")
    if not (type(ef) in _KEYED and type(nprobe) in _KEYED):
        return SearchKnobs.parse(params, want)
    key = (ef, nprobe, want)
    knobs = _KNOBS.get(key)
    if knobs is None:
        knobs = SearchKnobs.parse(params, want)
        if len(_KNOBS) >= 1024:
            _KNOBS.clear()
        _KNOBS[key] = knobs
    return knobs


def _scan_work(plan: Plan, nq: int) -> int:
    """Returns the rows x dimensions x `nq` a search of `plan` scans exactly (its segments
    without an index or with a FLAT one)."""
    exact = (s for s, _ in plan if s.index is None or s.index.index_type.upper() == "FLAT")
    return sum(len(s) * s.dim for s in exact) * nq


_KEYED = (int, str, type(None))


def _column_of(f: FieldSchema) -> Any:
    """Returns the column of vector field `f`: sparse or dense."""
    if f.dtype is DataType.BINARY_VECTOR:
        return BinaryColumn(f)
    return SparseColumn(f) if f.dtype is DataType.SPARSE_FLOAT_VECTOR else VectorColumn(f)


def as_float32(f: FieldSchema, values: Any) -> np.ndarray:
    """Returns a dense field's values as float32 rows (a half field's packed rows read as
    float32, their float32 rows kept)."""
    raw = np.asarray(values)
    if f.dtype in HALF_TYPES and raw.dtype == np.uint8:
        return to_float32(raw, f.dtype.value)
    return np.ascontiguousarray(raw, np.float32)


def _vector_values(col: Any, values: Any) -> Any:
    """Returns a decoded vector column as its column stores it: float32 rows (dense) or
    Milvus's sparse rows (a list of bytes)."""
    if isinstance(col, BinaryColumn):  # each row's bytes
        return [np.asarray(r, dtype=np.uint8).tobytes() for r in values]
    if isinstance(col, SparseColumn):
        return list(values)
    return as_float32(col.field, values)
