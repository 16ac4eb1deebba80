"""The growing data of one collection on a query node, readable as of any timestamp.

Every row has an insert ts and a superseded ts (max until a later insert or delete of the
same primary key). A row is visible at T iff `insert_ts <= T < superseded_ts` (DESIGN.md
s.6): a delete of a key at D hides inserts of it before D; a re-insert (upsert) hides the
older row from its ts on. Exact top-k runs on a faiss flat index, with rows not visible at T
(or outside the requested partitions) excluded through an ID-selector bitmap.

Drops are versions too: a partition dropped at D hides its rows from D on, and a collection
dropped at D keeps answering reads as of T < D (time travel) until the query node frees it.
Events are applied in ts order per pchannel only, so an event of another pchannel with a ts
below a drop may arrive after it: it is applied as of its ts, never discarded.
"""

from __future__ import annotations

import bisect
import json
import threading
from itertools import repeat
from typing import Any

import faiss
import numpy as np

from vectorlog.errors import InvalidArgument
from vectorlog.model import CollectionSchema, DataType
from vectorlog.processors.querynode.growarray import GrowArray
from vectorlog.schemas.columns import COLUMN_TYPE, column_kind, decode_column
from vectorlog.types import Hit

NEVER = np.uint64(np.iinfo(np.uint64).max)


def _flat_index(dim: int, metric: str) -> faiss.Index:
    return faiss.IndexFlatL2(dim) if metric == "L2" else faiss.IndexFlatIP(dim)


class Replica:
    """Rows of one collection from every vchannel this node consumes."""

    def __init__(self, collection_id: int, schema: CollectionSchema) -> None:
        self.collection_id, self.schema = collection_id, schema
        self.pk_name, self.vec = schema.primary.name, schema.vector
        self.metric = self.vec.metric_type or "L2"
        self.index = _flat_index(self.vec.dim or 0, self.metric)
        self._ins, self._sup = GrowArray(np.uint64), GrowArray(np.uint64)
        self._part = GrowArray(np.int64)
        self._pks: list[Any] = []
        self._latest: dict[Any, int] = {}  # pk -> its newest row
        self._prev = GrowArray(np.int64)  # row -> the same pk's previous row, or -1
        self._scalars: dict[str, list[Any]] = {
            f.name: [] for f in schema.fields if f.dtype is not DataType.FLOAT_VECTOR
        }
        self._originals: list[np.ndarray] = []  # COSINE: the inserted (unnormalized) batches
        self._starts: list[int] = []
        self.dropped_partitions: dict[int, int] = {}  # partition id -> drop ts
        self.dropped_ts: int | None = None  # the collection's drop ts
        self.lock = threading.RLock()

    # -- applying events ------------------------------------------------------------
    def insert(self, ts: int, body: dict[str, Any]) -> None:
        """Applies a RowsInserted body at `ts`. Rows stamped at or after the drop of their
        partition or collection are discarded; rows stamped before a partition drop that
        arrive after it are visible until it. Raises InvalidArgument or MalformedEvent
        before changing anything."""
        n, partition = body["num_rows"], body["partition_id"]
        cols = self._checked_columns(ts, n, body["columns"])
        until = self._dropped_at(partition)
        if until is not None and ts >= until:
            return
        vectors = np.ascontiguousarray(cols[self.vec.name], dtype=np.float32)
        with self.lock:
            if self.metric == "COSINE":
                self._starts.append(len(self._pks))
                self._originals.append(vectors)
                vectors = vectors.copy()
                faiss.normalize_L2(vectors)
            self._append(ts, partition, cols, vectors, n)
            if until is not None and n:  # stamped before the drop, visible until it
                self._sup.view()[len(self._pks) - n :] = np.uint64(until)

    def _dropped_at(self, partition: int) -> int | None:
        """Returns the earliest drop ts of the collection or of `partition`, or None."""
        drops = (self.dropped_ts, self.dropped_partitions.get(partition))
        return min((t for t in drops if t is not None), default=None)

    def _checked_columns(self, ts: int, n: int, columns: list[dict[str, Any]]) -> dict[str, Any]:
        """Returns the decoded columns. Raises InvalidArgument naming what breaks the schema."""
        if not 0 <= ts < 2**64 or n < 0:
            raise InvalidArgument(f"RowsInserted with ts {ts} and {n} rows")
        kinds = {c["field_name"]: column_kind(c["column"])[0] for c in columns}
        for f in self.schema.fields:
            if kinds.get(f.name) != COLUMN_TYPE[f.dtype]:
                raise InvalidArgument(
                    f"field {f.name!r} needs a {COLUMN_TYPE[f.dtype]}, "
                    f"got {kinds.get(f.name, 'nothing')}"
                )
        cols = {c["field_name"]: decode_column(c["column"], n) for c in columns}
        if cols[self.vec.name].shape[1] != self.vec.dim:
            raise InvalidArgument(
                f"vector dim {cols[self.vec.name].shape[1]} != schema dim {self.vec.dim}"
            )
        return cols

    def _append(
        self, ts: int, partition: int, cols: dict[str, Any], vecs: np.ndarray, n: int
    ) -> None:
        base = len(self._pks)
        pks = cols[self.pk_name]
        pks = pks.tolist() if isinstance(pks, np.ndarray) else pks
        prev = self._newest(pks)
        self._supersede(prev, ts)
        self._prev.extend(prev)
        self._latest.update(zip(pks, range(base, base + n), strict=True))
        self.index.add(vecs)
        self._ins.extend(np.full(n, ts, dtype=np.uint64))
        self._sup.extend(np.full(n, NEVER, dtype=np.uint64))
        self._part.extend(np.full(n, partition, dtype=np.int64))
        self._pks.extend(pks)
        for name, values in self._scalars.items():
            col = cols[name]
            values.extend(col.tolist() if isinstance(col, np.ndarray) else col)

    def _newest(self, pks: list[Any]) -> np.ndarray:
        """Returns each key's newest row, or -1 for a key never seen."""
        rows = map(self._latest.get, pks, repeat(-1, len(pks)))
        return np.fromiter(rows, np.int64, count=len(pks))

    def _supersede(self, rows: np.ndarray, ts: int) -> None:
        """Ends at `ts` the visibility of those `rows` (-1 = none) still visible then.

        Only a key's newest row can be visible: every older one was superseded when the
        newer one arrived, as a key's events are applied in ts order.
        """
        rows = rows[rows >= 0]
        if len(rows):
            ins, sup, t = self._ins.view(), self._sup.view(), np.uint64(ts)
            sup[rows[(ins[rows] < t) & (sup[rows] > t)]] = t

    def delete(self, ts: int, pks: list[Any], partition: int = -1) -> None:
        """Hides every row of `pks` inserted before `ts` (in `partition`, or any if -1); a
        delete at or after the collection's drop changes nothing readable: it is skipped."""
        if self.dropped_ts is not None and ts >= self.dropped_ts:
            return
        with self.lock:
            rows = self._newest(pks)
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

    def drop(self, ts: int) -> None:
        """Marks the collection dropped at `ts`: reads as of `ts` or later are refused (see
        `readable`), reads before it answer as before; later events are discarded."""
        with self.lock:
            self.dropped_ts = ts if self.dropped_ts is None else min(ts, self.dropped_ts)

    # -- reads --------------------------------------------------------------------------
    def readable(self, ts: int) -> bool:
        """Returns whether the collection existed at `ts` (it was not dropped by then)."""
        dropped = self.dropped_ts
        return dropped is None or ts < dropped

    def visible(self, ts: int, partitions: list[int] | None = None) -> np.ndarray:
        """Returns the boolean mask of rows visible at `ts` (in `partitions`, if given)."""
        t = np.uint64(ts)
        mask = (self._ins.view() <= t) & (self._sup.view() > t)
        if partitions is not None:
            mask &= np.isin(self._part.view(), partitions)
        return mask

    def count(self, ts: int, partitions: list[int] | None = None) -> int:
        with self.lock:
            return int(self.visible(ts, partitions).sum())

    def search(
        self,
        queries: np.ndarray,
        k: int,
        ts: int,
        partitions: list[int] | None = None,
        output_fields: list[str] | None = None,
    ) -> list[list[Hit]]:
        """Returns, per query, up to k hits {id, distance, entity} visible at `ts`."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if self.metric == "COSINE":
            q = q.copy()
            faiss.normalize_L2(q)
        with self.lock:
            dist, labels = self._knn(q, k, self.visible(ts, partitions))
            return [
                [
                    self._hit(int(r), float(d), output_fields)
                    for d, r in zip(dr, lr, strict=True)
                    if r >= 0
                ]
                for dr, lr in zip(dist, labels, strict=True)
            ]

    def _knn(self, q: np.ndarray, k: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if mask.all():
            return self.index.search(q, k)
        bits = np.packbits(mask, bitorder="little")  # must outlive the search
        params = faiss.SearchParameters()
        params.sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))
        return self.index.search(q, k, params=params)

    def _hit(self, row: int, dist: float, fields: list[str] | None) -> Hit:
        return {"id": self._pks[row], "distance": dist, "entity": self._entity(row, fields or [])}

    def _entity(self, row: int, fields: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in fields:
            if name == self.vec.name:
                out[name] = self._vector(row).tolist()
            else:
                value = self._scalars[name][row]
                dtype = self.schema.field(name).dtype
                out[name] = json.loads(value) if dtype is DataType.JSON else value
        return out

    def _vector(self, row: int) -> np.ndarray:
        if not self._originals:
            return self.index.reconstruct(row)
        i = bisect.bisect_right(self._starts, row) - 1
        return self._originals[i][row - self._starts[i]]

    def get(self, pks: list[Any], ts: int, output_fields: list[str]) -> list[dict[str, Any]]:
        """Returns the entity of each key visible at `ts` (absent keys are skipped)."""
        out = []
        with self.lock:
            ins, sup, prev = self._ins.view(), self._sup.view(), self._prev.view()
            for pk in pks:
                row = self._latest.get(pk, -1)
                while row >= 0 and not ins[row] <= ts < sup[row]:
                    row = int(prev[row])
                if row >= 0:
                    out.append(self._entity(row, output_fields))
        return out
