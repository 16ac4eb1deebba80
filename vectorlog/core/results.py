"""`SearchResult`: a search's answer as arrays (what the query node returns, the proxy merges
and the gRPC server sends), with per-query offsets instead of per-hit Python objects; turned
into MilvusClient's hits ({id, distance, entity} dicts) only where a caller wants those."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from vectorlog.core.types import Hit


@dataclass(frozen=True, eq=False)
class SearchResult:
    """Hits of `nq` queries, flattened in order (each query's nearest first): primary keys
    `ids` (int64 array, or a list of str), `distances` (float array), `offsets` (nq + 1
    ints: query i's hits are offsets[i]:offsets[i + 1]), and their output fields either as
    `fields` (name -> column of one value per hit, in output-field order) or, where hits
    were reshaped in Python (rerank, dynamic fields lifted), as `entities` (one dict per hit).

    It reads as the list of per-query hits it holds: len() is the number of queries,
    result[i] and iteration give each query's hits {id, distance, entity} (built then), and
    it equals a list of per-query hits holding the same."""

    ids: Any
    distances: np.ndarray
    offsets: np.ndarray
    fields: dict[str, Any]
    entities: list[dict[str, Any]] | None = None

    @classmethod
    def of_arrays(
        cls, ids: Any, distances: np.ndarray, offsets: np.ndarray, fields: dict[str, Any]
    ) -> SearchResult:
        """Returns SearchResult(ids, distances, offsets, fields), made without the frozen
        dataclass's __init__ (one attribute set at a time: a µs of every search)."""
        result = object.__new__(cls)
        result.__dict__.update(
            ids=ids, distances=distances, offsets=offsets, fields=fields, entities=None
        )
        return result

    @property
    def nq(self) -> int:
        return len(self.offsets) - 1

    def __len__(self) -> int:
        """Returns the number of queries (as a list of per-query hits has)."""
        return self.nq

    def __getitem__(self, i: int) -> list[Hit]:
        """Returns query i's hits {id, distance, entity}, nearest first."""
        lo, hi = self.offsets[range(self.nq)[i] : range(self.nq)[i] + 2].tolist()
        part = SearchResult(
            self.ids[lo:hi],
            self.distances[lo:hi],
            np.asarray([0, hi - lo], np.int64),
            {n: self.fields[n][lo:hi] for n in self.fields},
            None if self.entities is None else self.entities[lo:hi],
        )
        return part.hits()[0]

    def __iter__(self) -> Iterator[list[Hit]]:
        return iter(self.hits())

    def __eq__(self, other: object) -> bool:
        """Whether `other` (a SearchResult or a list of per-query hits) holds the same hits."""
        if isinstance(other, SearchResult):
            return self.hits() == other.hits()
        if isinstance(other, list):
            return self.hits() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def queries(self, lo: int, hi: int) -> SearchResult:
        """Returns the result of queries lo:hi only (their hits, fields and entities)."""
        if lo == 0 and hi == self.nq:
            return self
        a, b = int(self.offsets[lo]), int(self.offsets[hi])
        return SearchResult(
            self.ids[a:b],
            self.distances[a:b],
            self.offsets[lo : hi + 1] - a,
            {n: self.fields[n][a:b] for n in self.fields},
            None if self.entities is None else self.entities[a:b],
        )

    def topks(self) -> list[int]:
        """Returns the number of hits of each query."""
        ends = self.offsets
        if len(ends) == 2:  # one query: no arrays to subtract
            lo, hi = ends.tolist()
            return [hi - lo]
        return (ends[1:] - ends[:-1]).tolist()

    def id_list(self) -> list[Any]:
        """Returns the primary keys as Python ints or strs."""
        return self.ids.tolist() if isinstance(self.ids, np.ndarray) else list(self.ids)

    def entity_list(self) -> list[dict[str, Any]]:
        """Returns each hit's entity: its output fields by name (fresh dicts)."""
        if self.entities is not None:
            return self.entities
        names = list(self.fields)
        if not names:
            return [{} for _ in range(len(self.distances))]
        columns = [self.fields[n] for n in names]
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]

    def hits(self) -> list[list[Hit]]:
        """Returns per query its hits {id, distance, entity}, nearest first."""
        ids, dist = self.id_list(), self.distances.tolist()
        flat: list[Hit]
        if self.entities is None and not self.fields:
            pairs = zip(ids, dist, strict=True)
            flat = [{"id": pk, "distance": d, "entity": {}} for pk, d in pairs]
        else:
            flat = [
                {"id": pk, "distance": d, "entity": e}
                for pk, d, e in zip(ids, dist, self.entity_list(), strict=True)
            ]
        ends = self.offsets.tolist()
        if len(ends) == 2:
            return [flat]
        return [flat[lo:hi] for lo, hi in zip(ends[:-1], ends[1:], strict=True)]

    @classmethod
    def of_hits(cls, hits: list[list[Hit]]) -> SearchResult:
        """Returns the result holding per-query `hits` (their entities kept as they are)."""
        flat = [h for per_query in hits for h in per_query]
        ids = [h["id"] for h in flat]
        return cls(
            ids=_ids(ids),
            distances=np.asarray([h["distance"] for h in flat], dtype=np.float64),
            offsets=np.cumsum([0, *(len(q) for q in hits)], dtype=np.int64),
            fields={},
            entities=[h["entity"] for h in flat],
        )

    @classmethod
    def empty(cls, nq: int) -> SearchResult:
        """Returns `nq` queries without hits."""
        return cls(np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(nq + 1, np.int64), {})


def _ids(ids: list[Any]) -> Any:
    """Returns primary keys as an int64 array (ints) or the list itself (strs, or mixed)."""
    if ids and all(type(i) is int for i in ids):
        try:
            return np.asarray(ids, dtype=np.int64)
        except OverflowError:
            return ids
    return ids if ids else np.zeros(0, np.int64)
