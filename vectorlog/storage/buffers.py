"""The data node's in-memory buffers (Milvus writebuffer): a segment's inserted rows, column
by column, and the deletes aimed at a segment, each with the stream position to replay from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectorlog.streams.msgstream import StreamPosition


@dataclass
class InsertBuffer:
    """The rows of one segment not yet in binlogs: system fields and every user field."""

    start: StreamPosition  # replaying from here redelivers every buffered row
    row_ids: list[np.ndarray] = field(default_factory=list)
    timestamps: list[np.ndarray] = field(default_factory=list)
    columns: dict[int, list[Any]] = field(default_factory=dict)  # field id -> chunks
    num_rows: int = 0
    nbytes: int = 0  # an estimate of the buffered bytes

    def append(self, first_row_id: int, ts: int, columns: dict[int, Any], n: int) -> None:
        """Adds `n` rows inserted at `ts` with row ids from `first_row_id`."""
        ids = np.arange(first_row_id, first_row_id + n, dtype=np.int64)
        chunks = {fid: [values] for fid, values in columns.items()}
        self.append_rows(ids, np.full(n, ts, dtype=np.int64), chunks, n)

    def append_rows(
        self, row_ids: np.ndarray, timestamps: np.ndarray, columns: dict[int, list[Any]], n: int
    ) -> None:
        """Adds `n` rows with their own row ids and insert timestamps (int64 arrays), each
        field's values in chunks (numpy arrays or lists) of `n` rows together."""
        self.row_ids.append(row_ids)
        self.timestamps.append(timestamps)
        for fid, chunks in columns.items():
            self.columns.setdefault(fid, []).extend(chunks)
            for values in chunks:
                self.nbytes += values.nbytes if isinstance(values, np.ndarray) else 32 * len(values)
        self.num_rows += n
        self.nbytes += 16 * n

    def column(self, field_id: int) -> Any:
        """Returns one field's buffered values: a numpy array, or a list (strings, JSON, and
        a nullable field's values once a chunk has a null: None in its rows)."""
        chunks = self.columns[field_id]
        if all(isinstance(c, np.ndarray) for c in chunks):
            return np.concatenate(chunks)
        # a nullable field's chunks with nulls are lists holding None, the others arrays
        return [
            v
            for chunk in chunks
            for v in (chunk.tolist() if isinstance(chunk, np.ndarray) else chunk)
        ]

    def system(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns (row ids, timestamps)."""
        return np.concatenate(self.row_ids), np.concatenate(self.timestamps)


@dataclass
class DeltaBuffer:
    """Deletes aimed at one segment (by delete or by an upsert superseding its row)."""

    start: StreamPosition
    pks: list[Any] = field(default_factory=list)
    tss: list[int] = field(default_factory=list)

    def add(self, pk: Any, ts: int) -> None:
        self.pks.append(pk)
        self.tss.append(ts)

    def __len__(self) -> int:
        return len(self.pks)


@dataclass
class DdlBuffer:
    """A collection's DDL events not yet in its DDL binlogs: (ts, type code, request)."""

    start: StreamPosition
    pchannel: int
    events: list[tuple[int, int, str]] = field(default_factory=list)

    def add(self, ts: int, code: int, request: str) -> None:
        if all(ts != t or code != c for t, c, _ in self.events):  # one copy per vchannel
            self.events.append((ts, code, request))
            self.events.sort()
