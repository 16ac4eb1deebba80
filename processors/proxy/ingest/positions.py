"""Where the ingest consumer keeps its source positions and dml marks (see `applied`).

`LocalPositions`: one consumer's own state store (the standalone cluster). `LogPositions`:
a topic of their own, `<ingest topic>.positions` (compacted on Kafka), shared by the ingest
workers of the cluster mode, so a partition that moves to another worker (a rebalance:
workers started with another assignment) is resumed from the position its last owner
committed, and from the dml mark stored with it: the writes its last owner made past that
position are found on dml and not applied again.

Records, keyed so that compaction keeps the newest of each key (`_fold` reads all three):
- a claim, key `claim:topic/partition`: a worker took the partition; the record's offset is
  its epoch there. A worker holding an older claim of it is fenced (`check`).
- a commit, key `topic/partition`: {"offset": next offset, "epoch": the committer's claim,
  "mark": {dml partition: offset}}; the mark is carried into every commit once taken (an
  older mark is still a floor under every later write). Of a partition's commits the one of
  the newest epoch counts, then the newest one.
- from before fencing (no key): one commit of several partitions, {"positions":
  {"topic/partition": offset}, "marks": {...}}; a partition keeps the mark of its last
  commit that had one.

Partitions are divided among workers as Kafka's range assignor divides them (`assigned`).

The fence is carried by the dml writes themselves (streams.log.lease_fence): each write names
the lease `ingest:topic/partition` and the writer's epoch of each source partition it applies
(`leases`), and a worker that claims partitions appends a takeover marker under its epochs to
every dml partition before it recovers from dml (the consumer's `_mark_takeover`); so every
reader of dml that read the marker, the new owner's recovery included, hides a write a fenced
worker makes after it. The check before a dml write therefore only has to stop a fenced
worker soon (`check_fetched`: the claims its reader already fetched, no request); a commit
still reads the topic up to its end first (`check`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable
from typing import Protocol

from vectorlog.core.errors import VectorlogError
from vectorlog.state.base import StateStore
from vectorlog.streams.errors import LogError, TopicNotFound
from vectorlog.streams.log.base import Append, Headers, Log, Reader, Record
from vectorlog.streams.log.lease_fence import lease_headers
from vectorlog.streams.scan import read_all

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: the key prefix of a claim record
CLAIM = "claim:"
#: the lease prefix of a source partition on dml (`ingest:topic/partition`)
LEASE = "ingest:"
#: how long `check` may take to read the positions topic up to its end
READ_TIMEOUT_S = 30.0


class IngestFenced(VectorlogError):
    """A newer ingest worker claimed one of this worker's partitions: this worker writes and
    commits nothing more (its process exits)."""


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

    def claim(self, owned: Iterable[TopicPartition], worker: str) -> None:
        """Claims the `owned` partitions for this store's worker (`worker`: "I/N")."""
        ...

    def check(self) -> None:
        """Returns if no newer claim covers this worker's partitions. Raises IngestFenced."""
        ...

    def check_fetched(self) -> None:
        """As `check`, from the claims already fetched (no request). Raises IngestFenced."""
        ...

    def leases(self, partitions: Iterable[TopicPartition]) -> Headers:
        """Returns the lease headers (streams.log.lease_fence) of this worker's claims of
        `partitions`, for the dml writes applying them (none: not fenced on dml)."""
        ...

    @property
    def fenced(self) -> str | None:
        """Why this worker was fenced (None: it was not)."""
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

    @property
    def fenced(self) -> str | None:
        return None

    def refresh(self) -> None:
        return None

    def claim(self, owned: Iterable[TopicPartition], worker: str) -> None:
        return None  # one consumer per state store (its lock)

    def check(self) -> None:
        return None

    def check_fetched(self) -> None:
        return None

    def leases(self, partitions: Iterable[TopicPartition]) -> Headers:
        return ()

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
    """Positions shared by every ingest worker on topic `topic` (created compacted, with one
    partition, if missing); each worker claims and commits only the partitions it was
    assigned, and is fenced once a newer worker claims one of them."""

    def __init__(self, log: Log, topic: str) -> None:
        self.log, self.topic = log, topic
        self.instance = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._positions: dict[TopicPartition, int] = {}
        self._ranks: dict[TopicPartition, tuple[int, int]] = {}  # (epoch, offset) counted
        self._marks: dict[TopicPartition, dict[int, int]] = {}
        self._owners: dict[TopicPartition, tuple[int, str]] = {}  # newest claim: epoch, who
        self._claims: dict[TopicPartition, int] = {}  # this worker's epochs
        self._next = 0  # the next offset of the topic to fold
        self._reader: Reader | None = None
        self._lost: str | None = None
        try:
            log.partitions(topic)
        except TopicNotFound:
            log.create_topic(topic, 1, compacted=True)

    @property
    def fenced(self) -> str | None:
        return self._lost

    def refresh(self) -> None:
        """Folds every record on the topic, up to its end offset or past every record this
        store appended or read (`_floor`), whichever is further, and what was fetched with
        them, without waiting for the topic to be idle (that wait cost each worker's start
        0.25 s). Raises LogError."""
        floor = self._floor()
        self._positions, self._ranks, self._marks, self._owners = {}, {}, {}, {}
        self._close_reader()
        self._next = 0
        for rec in read_all(self.log, self.topic, timeout=60.0, idle=0.0, floor={0: floor}):
            self._fold(rec)
        self._reader = self.log.reader(self.topic, {0: self._next})  # fetches from now on

    def _floor(self) -> int:
        """Returns an offset the topic's end is at or past: one past every record this store
        folded (its own commits included) and past its claims. A claim is appended before a
        worker refreshes, so everything committed before it lies below (Tansu's end offset
        can lag the real end: DESIGN.md s.8)."""
        return max([self._next, *(epoch + 1 for epoch in self._claims.values())])

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

    def claim(self, owned: Iterable[TopicPartition], worker: str) -> None:
        """Appends a claim of each `owned` partition not claimed yet by this worker (its
        offset is this worker's epoch there). Raises LogError."""
        new = [tp for tp in owned if tp not in self._claims]
        if not new:
            return
        who = json.dumps({"worker": worker, "instance": self.instance}).encode()
        appends = [Append(0, who, f"{CLAIM}{t}/{p}".encode()) for t, p in new]
        for tp, offset in zip(new, self.log.append(self.topic, appends), strict=True):
            self._claims[tp] = offset
        log.info("ingest worker %s claimed %s (epochs %s)", worker, new, self._claims)

    def check(self) -> None:
        """Reads the records appended since the last read; raises IngestFenced (for good) if
        a newer claim covers one of this worker's partitions. Raises LogError."""
        if self._lost is None and self._claims:
            self._catch_up()
        self._judge()

    def check_fetched(self) -> None:
        """As `check`, from the records the reader already fetched (no request: the dml
        writes carry the fence, see the module's docstring). Raises IngestFenced, LogError."""
        if self._lost is None and self._claims and self._reader is not None:
            for rec in self._reader.poll(1000, 0.0):
                self._fold(rec)
        self._judge()

    def leases(self, partitions: Iterable[TopicPartition]) -> Headers:
        claims = self._claims
        return lease_headers(
            [(f"{LEASE}{t}/{p}", claims[(t, p)]) for t, p in partitions if (t, p) in claims]
        )

    def _judge(self) -> None:
        """Raises IngestFenced if a newer claim folded covers one of this worker's partitions."""
        if self._lost is None:
            for tp, epoch in self._claims.items():
                owner = self._owners.get(tp)
                if owner is not None and owner[0] > epoch:
                    self._lost = (
                        f"{owner[1]} claimed {tp[0]}[{tp[1]}] at epoch {owner[0]} "
                        f"(this worker's: {epoch})"
                    )
                    log.error("this ingest worker is fenced: %s", self._lost)
                    break
        if self._lost is not None:
            raise IngestFenced(f"ingest worker fenced: {self._lost}")

    def commit(self, positions: dict[TopicPartition, int], marks: dict[int, int] | None) -> None:
        """Appends one keyed commit per partition, after a `check`. Raises IngestFenced
        (nothing is appended) or LogError."""
        self.check()
        appends, docs = [], []
        for (t, p), off in positions.items():
            doc: dict[str, object] = {"offset": off, "epoch": self._claims.get((t, p), -1)}
            mark = self._marks.get((t, p)) if marks is None else marks
            if mark is not None:
                doc["mark"] = {str(d): o for d, o in mark.items()}
            docs.append(((t, p), doc))
            appends.append(Append(0, json.dumps(doc).encode(), f"{t}/{p}".encode()))
        if not appends:
            return
        offsets = self.log.append(self.topic, appends)
        for ((t, p), doc), offset in zip(docs, offsets, strict=True):
            key = f"{t}/{p}".encode()
            self._fold(Record(self.topic, 0, offset, json.dumps(doc).encode(), key))

    # -- reading the topic ------------------------------------------------------------------
    def _catch_up(self) -> None:
        """Folds the records from `_next` to the topic's end."""
        end = self.log.end_offsets(self.topic).get(0, 0)
        if end <= self._next:
            return
        if self._reader is None:
            self._reader = self.log.reader(self.topic, {0: self._next})
        deadline = time.monotonic() + READ_TIMEOUT_S
        while self._next < end:
            if time.monotonic() > deadline:
                raise LogError(f"did not read {self.topic!r} up to offset {end} in time")
            for rec in self._reader.poll(1000, 0.2):
                self._fold(rec)

    def _fold(self, rec: Record) -> None:
        """Applies one record (see the module's docstring); a record folded before (this
        worker's own commit, read back) changes nothing."""
        self._next = max(self._next, rec.offset + 1)
        doc = json.loads(rec.value)
        if rec.key is None:
            self._fold_legacy(doc, rec.offset)
            return
        key = rec.key.decode()
        if key.startswith(CLAIM):
            tp = _tp(key[len(CLAIM) :])
            if rec.offset > self._owners.get(tp, (-1, ""))[0]:
                self._owners[tp] = (rec.offset, f"worker {doc['worker']} ({doc['instance']})")
            return
        tp, rank = _tp(key), (int(doc["epoch"]), rec.offset)
        if rank >= self._ranks.get(tp, (-2, -1)):
            self._ranks[tp], self._positions[tp] = rank, int(doc["offset"])
            if "mark" in doc:
                self._marks[tp] = {int(p): int(o) for p, o in doc["mark"].items()}

    def _fold_legacy(self, doc: dict[str, dict[str, int]], offset: int) -> None:
        marks = {int(p): int(off) for p, off in doc.get("marks", {}).items()}
        for key, position in doc["positions"].items():
            tp = _tp(key)
            if (-1, offset) >= self._ranks.get(tp, (-2, -1)):
                self._ranks[tp], self._positions[tp] = (-1, offset), int(position)
                if "marks" in doc:
                    self._marks[tp] = marks

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def close(self) -> None:
        """Closes the reader `check` keeps open. Idempotent."""
        self._close_reader()


def _tp(key: str) -> TopicPartition:
    topic, _, partition = key.rpartition("/")
    return (topic, int(partition))
