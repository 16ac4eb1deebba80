"""Where the ingest consumer keeps its source positions and dml marks (see `applied`).

`LocalPositions`: one consumer's own state store (the standalone cluster). `LogPositions`:
a topic of their own, `<ingest topic>.positions`, shared by the ingest workers of the
cluster mode, so a partition that moves to another worker (a rebalance: workers started with
another assignment) is resumed from the position its last owner committed, and from the dml
mark stored with it: the writes its last owner made past that position are found on dml and
not applied again. Each record is one commit: {"positions": {"topic/partition": offset},
"marks": {dml partition: offset}}; a partition keeps the mark of its last commit that had
one (an older mark is still a floor under every later write).

Partitions are divided among workers as Kafka's range assignor divides them (`assigned`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Protocol

from vectorlog.state.base import StateStore
from vectorlog.streams.errors import TopicNotFound
from vectorlog.streams.log.base import Append, Log
from vectorlog.streams.scan import read_all

TopicPartition = tuple[str, int]


class PositionStore(Protocol):
    """The ingest consumer's committed positions and dml marks."""

    def refresh(self) -> None:
        """Reloads what other writers committed (before a consumer opens its readers)."""
        ...

    def committed(self) -> dict[TopicPartition, int]:
        """Returns {(topic, partition): the next offset to read} of every committed one."""
        ...

    def marks(self, owned: Iterable[TopicPartition]) -> dict[int, int]:
        """Returns the dml offsets from which the writes for the `owned` partitions past
        their positions lie ({} if one of them has no mark yet: store one first)."""
        ...

    def commit(self, positions: dict[TopicPartition, int], marks: dict[int, int] | None) -> None:
        """Stores positions and, if given, the dml mark taken before them, durably."""
        ...


def assigned(partitions: int, worker: int, workers: int) -> range:
    """Returns the partitions worker `worker` of `workers` consumes: Kafka's range assignor
    (contiguous ranges, the first `partitions % workers` workers one more)."""
    share, extra = divmod(partitions, workers)
    start = worker * share + min(worker, extra)
    return range(start, start + share + (1 if worker < extra else 0))


class LocalPositions:
    """Positions and one mark in this consumer's own state store (the dml topic's entries
    are the mark)."""

    def __init__(self, store: StateStore, dml: str) -> None:
        self.store, self._dml = store, dml

    def refresh(self) -> None:
        return None

    def committed(self) -> dict[TopicPartition, int]:
        return {tp: off for tp, off in self.store.positions().items() if tp[0] != self._dml}

    def marks(self, owned: Iterable[TopicPartition]) -> dict[int, int]:
        return {p: off for (t, p), off in self.store.positions().items() if t == self._dml}

    def commit(self, positions: dict[TopicPartition, int], marks: dict[int, int] | None) -> None:
        with self.store.transaction() as txn:
            for p, off in (marks or {}).items():
                txn.set_position(self._dml, p, off)
            for (topic, partition), offset in positions.items():
                txn.set_position(topic, partition, offset)


class LogPositions:
    """Positions shared by every ingest worker on topic `topic` (created with one partition
    if missing); each worker commits only the partitions it was assigned."""

    def __init__(self, log: Log, topic: str) -> None:
        self.log, self.topic = log, topic
        self._positions: dict[TopicPartition, int] = {}
        self._marks: dict[TopicPartition, dict[int, int]] = {}
        try:
            log.partitions(topic)
        except TopicNotFound:
            log.create_topic(topic, 1)

    def refresh(self) -> None:
        """Folds every commit on the topic. Raises LogError."""
        self._positions, self._marks = {}, {}
        for rec in read_all(self.log, self.topic, timeout=60.0):
            self._fold(json.loads(rec.value))

    def committed(self) -> dict[TopicPartition, int]:
        return dict(self._positions)

    def marks(self, owned: Iterable[TopicPartition]) -> dict[int, int]:
        floors: dict[int, int] = {}
        for tp in owned:
            if tp not in self._marks:
                return {}
            for p, off in self._marks[tp].items():
                floors[p] = min(off, floors.get(p, off))
        return floors

    def commit(self, positions: dict[TopicPartition, int], marks: dict[int, int] | None) -> None:
        doc = {"positions": {f"{t}/{p}": off for (t, p), off in positions.items()}}
        if marks is not None:
            doc["marks"] = {str(p): off for p, off in marks.items()}
        self.log.append(self.topic, [Append(0, json.dumps(doc).encode())])
        self._fold(doc)

    def _fold(self, doc: dict[str, dict[str, int]]) -> None:
        marks = {int(p): int(off) for p, off in doc.get("marks", {}).items()}
        for key, offset in doc["positions"].items():
            topic, _, partition = key.rpartition("/")
            tp = (topic, int(partition))
            self._positions[tp] = int(offset)
            if "marks" in doc:
                self._marks[tp] = marks
